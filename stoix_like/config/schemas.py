"""Config schemas: dataclasses whose fields are the keys, each with its range and doc in `metadata`.

The `arch`, `env` and `logger` groups and `config/evaluate.yaml` have one schema each; a system's schema is
composed of shared blocks.

A block is one idea several systems share, under one set of names (docs/glossary.md): the ε-greedy schedule,
replay, the target network, an optimiser, ... Each system's schema inherits the blocks it uses plus its own
keys, so it lists exactly the keys its code reads; `tests/test_vocabulary.py` checks every shipped
`config/system/*.yaml` against its schema. A field's `metadata["spec"]` (stoix_like/config/spec.py) is its type,
valid range and one-line doc: `config_schema.SPECS` reads every `system.*` range from here, so a range is written
once (the same goes for `arch.*`, `env.*`, `logger.*` and evaluate's keys). The YAML files hold the values
(fields have no defaults: `???`). Network parts are Hydra `_target_`s with open keyword arguments, so they have no
schema here: their rows are patterns in config_schema.SPECS. No jax, no Hydra.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, Iterator, List, Optional, Protocol, Tuple, Type, TypeVar

from stoix_like.config.spec import (DISTRIBUTIONS, ENV_SUITES, EVAL_METRICS, NEPTUNE_MODES, OBSERVATION_LAYOUTS,
                                    POSITIVE_INT, SAVED_PARAMS, SEARCH_POLICIES, SEED_LOOPS, TD_TARGETS, WANDB_MODES,
                                    Spec, choice, flag, int_list, integer, real)

REQUIRED = "???"  # OmegaConf's MISSING: the value comes from the YAML


class Schema(Protocol):
    """A schema: one of the dataclasses below."""

    __dataclass_fields__: ClassVar[Dict[str, dataclasses.Field[object]]]


SchemaT = TypeVar("SchemaT", bound=Schema)


def key(spec: Spec) -> Any:
    """A schema field: its value from the YAML, its type, range and doc from `spec`."""
    return field(default=REQUIRED, metadata={"spec": spec})


def text(doc: str) -> Any:
    """A free-form string field (a name): no range, only a doc."""
    return field(default=REQUIRED, metadata={"doc": doc})


def part(schema: Type[SchemaT]) -> SchemaT:
    """A nested block of keys (`logger.checkpointing`)."""
    return field(default_factory=schema)


LEARNING_RATE = "learning rate: 0 learns nothing and a negative rate climbs the loss"


# ---------------------------------------------------------------------------------- arch, env, logger, evaluate

@dataclass
class PBTSchema:
    """`arch.pbt`: population-based training of the run's seeds in one program (stoix_like/learner/pbt.py)."""

    interval: Optional[int] = key(integer(
        POSITIVE_INT, "updates between PBT steps (a multiple of the updates per learn call); null: no PBT",
        nullable=True))
    fraction: float = key(real("(0, 0.5]", "the share of members replaced at each PBT step by copies of members "
                               "from the same share at the top"))
    resample_probability: float = key(real("[0, 1]", "the chance that a copied hyperparameter is drawn afresh "
                                           "from its range instead of multiplied by 0.8 or 1.2"))
    # {system key: [low, high]}: the hyperparameters PBT tunes, each member starting log-uniform in its range
    # (uniform where low <= 0). Free-form like env.kwargs: validation._pbt_problems checks each range
    ranges: Dict[str, Any] = field(default_factory=dict)


@dataclass
class CommonArchSchema:
    """The keys both architectures have (config/arch/anakin.yaml, config/arch/sebulba.yaml)."""

    seed: int = key(integer("[0, inf)", "the first seed; seed k of an N-seed run is arch.seed + k"))
    num_seeds: int = key(integer(POSITIVE_INT, "seeds trained side by side in one program"))
    total_num_envs: int = key(integer(POSITIVE_INT, "envs over all devices and batch slots (sebulba: actor threads)"))
    total_timesteps: int = key(integer(POSITIVE_INT, "env steps per seed, warm-up included"))
    num_evaluation: int = key(integer(POSITIVE_INT, "evaluations spread over the run"))
    num_eval_episodes: int = key(integer(POSITIVE_INT, "episodes per evaluation"))
    evaluation_greedy: bool = key(flag("evaluate with the policy's mode instead of sampling"))
    compilation_cache: bool = key(flag(
        "command-line runs keep compiled programs in $STOIX_LIKE_CACHE_DIR (default ~/.cache/stoix_like/xla) "
        "and load them on the next run; runs started in code cache their seeds' setup programs in-process. False: "
        "neither"))
    reference_timesteps: Optional[int] = key(integer(
        POSITIVE_INT, "the budget per seed of the published recipe this config is resized from (a tuned file's "
        "arch.reference_source names it); on a CPU a run says how long that budget would take at its measured "
        "speed; null: none", nullable=True))
    reference_source: Optional[str] = text("where arch.reference_timesteps is published (null: no reference)")
    pbt: PBTSchema = part(PBTSchema)
    cpu_threads: Optional[int] = key(integer(
        POSITIVE_INT, "threads XLA's CPU backend runs programs on (stoix_like/runtime/cpu_threads.py): 1 is faster for a "
        "learner on a few envs, every core for many; null: 1 for a small run on the CPU alone, else every core "
        "(Sebulba: every core)", nullable=True))
    multihost: bool = key(flag("start jax.distributed"))
    coordinator_address: Optional[str] = text("HOST:PORT of process 0")
    num_processes: Optional[int] = key(integer("[1, inf)", "processes taking part, with arch.coordinator_address",
                                               nullable=True))
    process_id: Optional[int] = key(integer("[0, inf)", "this process's index, 0 .. arch.num_processes - 1",
                                            nullable=True))
    multihost_init_timeout_seconds: Optional[int] = key(integer(
        POSITIVE_INT, "seconds jax.distributed start-up waits for every process; null: the default", nullable=True))
    heartbeat_timeout_seconds: Optional[int] = key(integer(
        POSITIVE_INT, "seconds of silence before jax.distributed declares a process dead; null: the default",
        nullable=True))
    collective_timeout_seconds: Optional[float] = key(real(
        "(0, inf)", "seconds a process waits for its peers in a cross-process stage; null: the default",
        nullable=True))


@dataclass
class ArchSchema(CommonArchSchema):
    """config/arch/anakin.yaml: acting and learning compiled together over JAX envs."""

    update_batch_size: int = key(integer(POSITIVE_INT, "learner copies per device whose gradients are averaged"))
    rollout_unroll: int = key(integer(POSITIVE_INT, "env steps per iteration of the compiled acting loop (lax.scan's "
                                      "unroll); the same results, another speed: 1 on CPU, about 5 on a GPU"))
    seed_loop: str = key(choice(SEED_LOOPS, "how one program runs arch.num_seeds seeds: vmap batches them (a "
                                "learner of small ops gains), map runs them one after another, map_on_cpu maps on "
                                "the CPU and batches on a GPU or TPU (a learner of big matrix products: SAC)"))


@dataclass
class SebulbaArchSchema(CommonArchSchema):
    """config/arch/sebulba.yaml: actor threads stepping CPU envs, learner devices learning from their rollouts."""

    actor_device_ids: List[int] = key(int_list("[0, inf)", "the devices actor threads act on (indices of jax.devices())"))
    learner_device_ids: List[int] = key(int_list("[0, inf)", "the devices the learner is pmapped over"))
    num_actor_threads: int = key(integer(POSITIVE_INT, "actor threads per actor device, each with its own envs"))
    queue_size: int = key(integer(POSITIVE_INT, "rollouts an actor thread may have waiting for the learner"))
    shutdown_timeout_seconds: float = key(real("(0, inf)", "how long stopping waits for each thread to end"))


@dataclass
class ScenarioSchema:
    name: str = text("the suite's environment name")


@dataclass
class EnvSchema:
    """config/env/<suite>/<task>.yaml. `kwargs` go to the suite's adapter as they are (brax's `backend` has a
    pattern row in config_schema.SPECS)."""
    suite: str = key(choice(ENV_SUITES, "the environment suite"))
    scenario: ScenarioSchema = part(ScenarioSchema)
    kwargs: Dict[str, Any] = field(default_factory=dict)
    max_episode_steps: Optional[int] = key(integer(
        POSITIVE_INT, "the time limit in steps, a truncation; null: the suite's own", nullable=True))
    resets_per_step: Optional[int] = key(integer(
        POSITIVE_INT, "fresh initial states generated per step for the envs of a batch slot that finished (at most "
        "its envs); null: one per finished env, exact. For suites whose reset costs many steps (Craftax)",
        nullable=True))
    observation_layout: str = key(choice(OBSERVATION_LAYOUTS, "flat: the observation as one vector (an MLP torso); "
                                                              "image: a (height, width, channels) grid kept for a "
                                                              "CNN torso"))
    observed_indices: Optional[List[int]] = key(int_list(
        "[0, inf)", "the flat observation's entries the agent sees, by index; null: all (CartPole's positions "
        "without velocities: [0, 2])", nullable=True))
    eval_metric: str = key(choice(EVAL_METRICS, "the evaluation metric"))
    solved_return: Optional[float] = key(real("(-inf, inf)", "the return that counts as solved; null: none",
                                              nullable=True))


@dataclass
class TensorboardSchema:
    enabled: bool = key(flag("write TensorBoard scalars"))


@dataclass
class NeptuneSchema:
    enabled: bool = key(flag("log to Neptune"))
    project: Optional[str] = text("WORKSPACE/PROJECT")
    mode: str = key(choice(NEPTUNE_MODES, "Neptune's connection mode"))
    tags: List[str] = field(default_factory=list, metadata={"doc": "Neptune tags"})


@dataclass
class WandbSchema:
    enabled: bool = key(flag("log to Weights & Biases"))
    project: Optional[str] = text("the W&B project; null: $WANDB_PROJECT, else wandb's default")
    entity: Optional[str] = text("the W&B team or user; null: $WANDB_ENTITY, else the key's default entity")
    mode: str = key(choice(WANDB_MODES, "W&B's mode: offline writes <run dir>/wandb/ and needs no network"))
    tags: List[str] = field(default_factory=list, metadata={"doc": "W&B tags"})


@dataclass
class LoggerKindSchema:
    tensorboard: TensorboardSchema = part(TensorboardSchema)
    neptune: NeptuneSchema = part(NeptuneSchema)
    wandb: WandbSchema = part(WandbSchema)


@dataclass
class CheckpointingSchema:
    save_model: bool = key(flag("save a checkpoint at each evaluation"))
    directory: Optional[str] = text("where checkpoints go")
    keep_last: int = key(integer(POSITIVE_INT, "the checkpoints kept, besides the best"))
    resume: bool = key(flag("continue the run saved in logger.checkpointing.directory"))
    resume_from: Optional[str] = text("a checkpoint to continue from")
    load_params_from: Optional[str] = text("a checkpoint whose params start the run")


@dataclass
class LoggerSchema:
    """config/logger/default.yaml"""

    base_exp_path: str = text("the run directory outside Hydra")
    use_console: bool = key(flag("log to the console"))
    use_json: bool = key(flag("write metrics.json"))
    progress_per_evaluation: int = key(integer(
        POSITIVE_INT, "progress lines per evaluation interval: its updates run as this many learn calls, a line "
        "after each; must divide the updates per evaluation"))
    kind: LoggerKindSchema = part(LoggerKindSchema)
    checkpointing: CheckpointingSchema = part(CheckpointingSchema)


@dataclass
class EvaluateSchema:
    """config/evaluate.yaml (top-level keys)"""

    checkpoint: str = text("the checkpoint to evaluate")
    params: str = key(choice(SAVED_PARAMS, "which saved params to evaluate"))
    num_episodes: int = key(integer(POSITIVE_INT, "episodes to evaluate"))
    seed: int = key(integer("[0, inf)", "the evaluation's own seed"))
    greedy: Optional[bool] = key(flag("evaluate with the policy's mode; null: as the run evaluated", nullable=True))


# group -> its schema ("" for evaluate's top-level keys)
GROUP_SCHEMAS: Dict[str, Type[Schema]] = {"arch": ArchSchema, "env": EnvSchema, "logger": LoggerSchema,
                                          "": EvaluateSchema}
# the arch group's other options, stored as schema/arch_<name> (config/arch/<name>.yaml's defaults name it)
ARCH_VARIANT_SCHEMAS: Dict[str, Type[Schema]] = {"sebulba": SebulbaArchSchema}


# ----------------------------------------------------------------------------------------------------- blocks

@dataclass
class SystemBlock:
    """What every system has."""

    system_name: str = text("the name the run is logged under")
    rollout_length: int = key(integer(POSITIVE_INT, "env steps per env in each update"))
    gamma: float = key(real("(0, 1]", "the discount"))
    decay_learning_rates: bool = key(flag("decay the learning rates linearly to 0 over the run"))
    max_grad_norm: float = key(real("(0, inf)", "the global gradient-norm clip"))
    normalize_observations: bool = key(flag("normalise observations by running statistics"))


@dataclass
class OnPolicyBatchesBlock:
    """How each on-policy rollout is learnt from: epochs over it, split into minibatches."""

    epochs: int = key(integer(POSITIVE_INT, "on-policy passes over each rollout"))
    num_minibatches: int = key(integer(POSITIVE_INT, "minibatches each epoch splits the rollout into"))


@dataclass
class ReplayBlock:
    """The replay buffer: what fills it, its size, how many batches are drawn from it and how large."""

    warmup_rollout_length: int = key(integer("[0, inf)", "env steps per env filling the buffer before learning"))
    gradient_steps_per_update: int = key(integer(POSITIVE_INT, "gradient steps on sampled batches per update"))
    total_batch_size: int = key(integer(POSITIVE_INT, "items sampled per gradient step (n-step transitions, or "
                                                      "sequences), over all devices and slots"))
    total_buffer_size: int = key(integer(POSITIVE_INT, "replay capacity in transitions, over all devices and slots"))


@dataclass
class NStepReturnsBlock:
    """Replayed sequences of n_step steps, each collapsed into one n-step transition (replay.n_step_batches)."""

    n_step: int = key(integer(POSITIVE_INT, "steps summed into each return before bootstrapping"))


@dataclass
class SequenceReplayBlock:
    """Replayed sequences kept whole, for multi-step estimators over them (replay.sequence_batches)."""

    sequence_length: int = key(integer(POSITIVE_INT, "consecutive stored steps in each sampled sequence"))


@dataclass
class PrioritizedReplayBlock:
    """Sampling by priority, with importance weights that undo its bias."""

    prioritized_replay: bool = key(flag("sample transitions by priority"))
    priority_exponent: float = key(real("[0, 1]", "the priority exponent: 0 samples uniformly"))
    importance_sampling_exponent: float = key(real("[0, 1]", "the importance-sampling exponent: 1 corrects fully"))


@dataclass
class EpsilonGreedyBlock:
    """ε-greedy acting: ε decays linearly from epsilon_start to epsilon_end, then stays."""

    epsilon_start: float = key(real("[0, 1]", "the initial exploration probability"))
    epsilon_end: float = key(real("[0, 1]", "the final exploration probability"))
    epsilon_decay_fraction: float = key(real("[0, 1]", "the fraction of the env-step budget over which epsilon "
                                                        "decays"))
    evaluation_epsilon: float = key(real("[0, 1]", "the exploration probability when evaluated: 0 plays greedily "
                                                    "(rejax evaluates at 0.005)"))


@dataclass
class TargetNetworkBlock:
    """Every target_update_period gradient steps: target ← tau·online + (1 − tau)·target."""

    tau: float = key(real("(0, 1]", "how far the target moves towards the online network: 1 a hard copy"))
    target_update_period: int = key(integer(POSITIVE_INT, "gradient steps between target moves"))


@dataclass
class DeterministicPolicyBlock:
    """TD3/DDPG/D4PG: a deterministic actor, its delayed updates, and its acting and smoothing noise."""

    policy_frequency: int = key(integer(POSITIVE_INT, "Q-network steps per actor update"))
    target_policy_noise: float = key(real("[0, inf)", "the std of target-policy smoothing noise: 0 for none"))
    target_noise_clip: float = key(real("[0, inf)", "the bound of target-policy smoothing noise"))
    exploration_noise: float = key(real("[0, inf)", "the std of the Gaussian acting noise in [-1, 1]"))


@dataclass
class MunchausenBlock:
    """M-DQN's log-policy bonus on the reward."""

    entropy_temperature: float = key(real("(0, inf)", "M-DQN's softmax temperature"))
    munchausen_coefficient: float = key(real("[0, 1]", "M-DQN's weight of the log-policy bonus"))
    munchausen_clip_value_min: float = key(real("(-inf, 0]", "M-DQN's lower clip of the log-policy, which is <= 0"))


@dataclass
class DualVariablesBlock:
    """MPO's and V-MPO's Lagrange multipliers (stoix_like/ops/mpo.py): the E-step's temperature and the M-step's KL
    multipliers, learnt in log space, and the KL bounds they enforce. A bound of the other action kind is null."""

    init_temperature: float = key(real("(0, inf)", "the E-step temperature at the start, whose log is learnt"))
    init_kl_multiplier: float = key(real("(0, inf)", "every KL multiplier at the start, whose log is learnt"))
    temperature_kl_bound: float = key(real("(0, inf)", "the E-step's bound on the KL of the reweighted policy from "
                                                       "the target policy, which the temperature enforces"))
    mean_kl_bound: Optional[float] = key(real(
        "(0, inf)", "continuous actions: the bound on the KL of the policy's mean from the target policy's; null for "
                    "discrete actions", nullable=True))
    scale_kl_bound: Optional[float] = key(real(
        "(0, inf)", "continuous actions: the bound on the KL of the policy's scale from the target policy's; null "
                    "for discrete actions", nullable=True))
    categorical_kl_bound: Optional[float] = key(real(
        "(0, inf)", "discrete actions: the bound on the KL of the policy from the target policy; null for continuous "
                    "actions", nullable=True))


# Learning rates are named after the network they train.
@dataclass
class ActorLearningRate:
    actor_lr: float = key(real("(0, inf)", "the actor_network's " + LEARNING_RATE))


@dataclass
class CriticLearningRate:
    critic_lr: float = key(real("(0, inf)", "the critic_network's (a state value V) " + LEARNING_RATE))


@dataclass
class QLearningRate:
    q_lr: float = key(real("(0, inf)", "the q_network's (a Q-function) " + LEARNING_RATE))


@dataclass
class DualLearningRate:
    dual_lr: float = key(real("(0, inf)", "the dual variables' (the temperature's and the KL multipliers') "
                                          + LEARNING_RATE))


# ---------------------------------------------------------------------------------------------------- systems
# Bases are listed last-to-first in field order; every system starts with SystemBlock's keys.

# PPO's GAE(λ) advantages and AWR's TD(λ) ones, G^λ − V(s), are one estimator: one λ, one name.
GAE_LAMBDA = real("[0, 1]", "the lambda of GAE / TD(lambda) returns: 0 one-step TD, 1 Monte-Carlo")
VF_COEF = real("(0, inf)", "the weight of the value loss: 0 would never train the critic")
ENT_COEF = real("[0, inf)", "the weight of the entropy bonus")
STANDARDIZE_ADVANTAGES = flag("standardise advantages over each minibatch (off-policy: each sampled batch)")
REWARD_SCALE = real("(0, inf)", "the factor rewards are scaled by in the targets (logged returns stay unscaled)")


@dataclass
class PolicyGradientBlock:
    """What the on-policy actor-critics share (PPO, PPO-penalty, DPO, REINFORCE): advantages, and the weights of
    the entropy bonus and the critic's loss."""

    gae_lambda: float = key(GAE_LAMBDA)
    ent_coef: float = key(ENT_COEF)
    vf_coef: float = key(VF_COEF)
    standardize_advantages: bool = key(STANDARDIZE_ADVANTAGES)
    reward_scale: float = key(REWARD_SCALE)
    recompute_advantages: bool = key(flag(
        "recompute values, advantages and targets under the current critic before each epoch after the first "
        "(brax's PPO recomputes them per minibatch); off: once per rollout"))


CLIP_EPS = real("(0, inf)", "the clipping range of the value's move per update (PPO's critic) and, in PPO, of the "
                            "probability ratio")
CLIP_VALUE_LOSS = flag("PPO's critic: the value may move at most clip_eps from its prediction per update; off: plain "
                       "regression (brax's PPO; returns in the hundreds need it off)")


@dataclass
class PPOSchema(PolicyGradientBlock, CriticLearningRate, ActorLearningRate, OnPolicyBatchesBlock, SystemBlock):
    clip_eps: float = key(CLIP_EPS)
    clip_value_loss: bool = key(CLIP_VALUE_LOSS)


@dataclass
class PPOPenaltySchema(PolicyGradientBlock, CriticLearningRate, ActorLearningRate, OnPolicyBatchesBlock, SystemBlock):
    clip_eps: float = key(CLIP_EPS)
    clip_value_loss: bool = key(CLIP_VALUE_LOSS)
    kl_target: float = key(real("(0, inf)", "PPO-penalty's target KL(pi_old || pi) per update: beta halves below "
                                            "kl_target / 1.5 and doubles above 1.5 kl_target"))
    init_kl_coef: float = key(real("(0, inf)", "PPO-penalty's initial beta, the KL penalty's weight"))


@dataclass
class DPOSchema(PolicyGradientBlock, CriticLearningRate, ActorLearningRate, OnPolicyBatchesBlock, SystemBlock):
    clip_eps: float = key(CLIP_EPS)
    clip_value_loss: bool = key(CLIP_VALUE_LOSS)
    drift_alpha: float = key(real("(0, inf)", "DPO's drift scale where the advantage is >= 0; the paper's is 2"))
    drift_beta: float = key(real("(0, inf)", "DPO's drift scale where the advantage is < 0; the paper's is 0.6"))


@dataclass
class ReinforceSchema(PolicyGradientBlock, CriticLearningRate, ActorLearningRate, OnPolicyBatchesBlock, SystemBlock):
    pass


@dataclass
class IMPALASchema(PolicyGradientBlock, CriticLearningRate, ActorLearningRate, OnPolicyBatchesBlock, SystemBlock):
    rho_clip: float = key(real("(0, inf)", "V-trace's rho-bar: pi/mu is truncated at it in the TD errors and the "
                                           "policy-gradient advantages (which value V-trace's fixed point is)"))
    c_clip: float = key(real("(0, inf)", "V-trace's c-bar: pi/mu is truncated at it in the traces (how far the "
                                         "correction reaches back)"))


@dataclass
class PQNSchema(EpsilonGreedyBlock, QLearningRate, OnPolicyBatchesBlock, SystemBlock):
    reward_scale: float = key(REWARD_SCALE)
    q_lambda: float = key(real("[0, 1]", "Q(lambda)'s lambda: 0 one-step targets, 1 Monte-Carlo"))


@dataclass
class QLearningSchema(TargetNetworkBlock, EpsilonGreedyBlock, QLearningRate, PrioritizedReplayBlock, NStepReturnsBlock,
                      ReplayBlock, SystemBlock):
    """What the replay-based Q-learning systems share (config/system/shared/q_learning.yaml)."""

    td_target: str = key(choice(TD_TARGETS, "the regression target"))


HUBER_DELTA = real("[0, inf)", "the Huber delta: 0 for the squared error (QR-DQN: plain quantile regression)")


@dataclass
class DQNSchema(QLearningSchema):
    huber_delta: float = key(HUBER_DELTA)
    regularization_weight: float = key(real("[0, inf)", "DQN-Reg's weight of Q(s, a) in the loss: 0 for none"))


@dataclass
class MDQNSchema(MunchausenBlock, DQNSchema):
    pass


@dataclass
class C51Schema(QLearningSchema):
    distribution: str = key(choice(DISTRIBUTIONS, "how the return distribution is represented"))


@dataclass
class QRDQNSchema(C51Schema):
    huber_delta: float = key(HUBER_DELTA)


@dataclass
class R2D2Schema(TargetNetworkBlock, EpsilonGreedyBlock, QLearningRate, PrioritizedReplayBlock, NStepReturnsBlock,
                 SequenceReplayBlock, ReplayBlock, SystemBlock):
    """Recurrent Q-learning from disjoint replayed sequences (config/system/r2d2.yaml); its memory is the network's."""

    burn_in: int = key(integer("[0, inf)", "steps at each replayed sequence's start that only warm the stored hidden "
                                           "state up (no loss, no gradient); below sequence_length"))
    priority_max_weight: float = key(real("[0, 1]", "eta: a sequence's priority is eta·max|td| + (1 − eta)·mean|td| "
                                                     "over its steps after the burn-in"))
    epsilon_actor_exponent: float = key(real("[0, inf)", "alpha: env i of N in a slot explores at "
                                                         "epsilon^(1 + alpha·i/(N − 1)); 0: every env at epsilon"))


NUM_CRITICS = integer(POSITIVE_INT, "Q-networks whose minimum is the target")


@dataclass
class SACSchema(TargetNetworkBlock, QLearningRate, ActorLearningRate, PrioritizedReplayBlock, NStepReturnsBlock,
                ReplayBlock, SystemBlock):
    num_critics: int = key(NUM_CRITICS)
    alpha_lr: float = key(real("(0, inf)", "SAC's entropy temperature's " + LEARNING_RATE))
    init_alpha: float = key(real("(0, inf)", "SAC's initial entropy temperature, whose log is learnt"))
    target_entropy_scale: float = key(real("[0, inf)", "the temperature is learnt towards a policy entropy of "
                                                       "−target_entropy_scale·|A| nats (the SAC paper: 1; brax's "
                                                       "SAC: 0.5)"))
    reward_scale: float = key(REWARD_SCALE)


@dataclass
class D4PGSchema(TargetNetworkBlock, QLearningRate, ActorLearningRate, DeterministicPolicyBlock, PrioritizedReplayBlock,
                 NStepReturnsBlock, ReplayBlock, SystemBlock):
    pass


@dataclass
class TD3Schema(D4PGSchema):
    num_critics: int = key(NUM_CRITICS)


# AWR's replayed actions and SPO's particles are weighted alike: one key, one range
ADVANTAGE_TEMPERATURE = real("(0, inf)", "beta: weights exp(advantage / beta) (AWR: of replayed actions; SPO: of each "
                                         "particle, every step adding its TD error / beta to its log-weight)")


@dataclass
class AWRSchema(CriticLearningRate, ActorLearningRate, SequenceReplayBlock, ReplayBlock, SystemBlock):
    gae_lambda: float = key(GAE_LAMBDA)
    advantage_temperature: float = key(ADVANTAGE_TEMPERATURE)
    max_advantage_weight: float = key(real("(0, inf)", "AWR's w_max: the clip of every action's weight"))
    standardize_advantages: bool = key(STANDARDIZE_ADVANTAGES)


# MPO's E-step and Sampled AlphaZero's search nodes weigh K sampled actions: one key, one range
NUM_SAMPLED_ACTIONS = integer(
    POSITIVE_INT, "continuous actions: actions sampled from the policy per state (MPO: from the target policy, for the "
                  "E-step and the Q-network's bootstrap; Sampled AlphaZero and Sampled MuZero: at every search node, "
                  "the actions it searches); null for discrete actions, whose every action is weighed (refused by "
                  "sampled_az and sampled_mz)",
    nullable=True)


@dataclass
class MPOSchema(DualVariablesBlock, DualLearningRate, TargetNetworkBlock, QLearningRate, ActorLearningRate,
                PrioritizedReplayBlock, NStepReturnsBlock, ReplayBlock, SystemBlock):
    num_sampled_actions: Optional[int] = key(NUM_SAMPLED_ACTIONS)


@dataclass
class VMPOSchema(DualVariablesBlock, DualLearningRate, TargetNetworkBlock, CriticLearningRate, ActorLearningRate,
                 OnPolicyBatchesBlock, SystemBlock):
    gae_lambda: float = key(GAE_LAMBDA)
    top_k_fraction: float = key(real("(0, 1]", "the fraction of each minibatch's samples, those of highest "
                                               "advantage, that the policy is fitted to"))


@dataclass
class TreeSearchBlock:
    """The tree search a search system acts with (mctx): its policy, simulations and depth."""

    search_policy: str = key(choice(SEARCH_POLICIES, "gumbel_muzero: Gumbel MuZero's sequential halving, an "
                                                      "improving policy with few simulations; muzero: PUCT with "
                                                      "Dirichlet noise at the root"))
    num_simulations: int = key(integer(POSITIVE_INT, "simulations per search, each expanding one node"))
    max_depth: Optional[int] = key(integer(POSITIVE_INT, "the deepest a simulation descends, in actions from the "
                                                         "root; null: num_simulations", nullable=True))


@dataclass
class AZSchema(TreeSearchBlock, CriticLearningRate, ActorLearningRate, OnPolicyBatchesBlock, SystemBlock):
    gae_lambda: float = key(GAE_LAMBDA)
    ent_coef: float = key(ENT_COEF)


@dataclass
class SampledAZSchema(AZSchema):
    """Sampled AlphaZero (config/system/sampled_az.yaml): AlphaZero's keys, the draws per node and the entropy
    bonus that keeps the policy's scale from collapsing."""

    num_sampled_actions: Optional[int] = key(NUM_SAMPLED_ACTIONS)


@dataclass
class SPOSchema(CriticLearningRate, ActorLearningRate, OnPolicyBatchesBlock, SystemBlock):
    """SPO (config/system/spo.yaml): AlphaZero's on-policy learner, its plan a particle filter (SMC) over the env."""

    gae_lambda: float = key(GAE_LAMBDA)
    ent_coef: float = key(ENT_COEF)
    num_particles: int = key(integer(POSITIVE_INT, "particles per plan, each an env copy acting by the policy"))
    search_depth: int = key(integer(POSITIVE_INT, "env steps each particle looks ahead from the root"))
    resample_period: int = key(integer(POSITIVE_INT, "steps between systematic resamplings of the particles (never "
                                                     "after the last step; at least search_depth: never)"))
    advantage_temperature: float = key(ADVANTAGE_TEMPERATURE)


@dataclass
class MZSchema(TreeSearchBlock, NStepReturnsBlock, ReplayBlock, SystemBlock):
    """MuZero (config/system/mz.yaml): one network (representation, dynamics, prediction) trained on replayed
    sequences unrolled K steps; rewards and values on a support in h-space."""

    model_lr: float = key(real("(0, inf)", "the MuZero model's (representation, dynamics, prediction) " + LEARNING_RATE))
    unroll_steps: int = key(integer(POSITIVE_INT, "K: steps the learnt model unrolls from a sequence's first state"))
    vf_coef: float = key(VF_COEF)
    num_atoms: int = key(integer("[2, inf)", "the support's atoms, even over [-support_max, support_max] (h-space)"))
    support_max: float = key(real("(0, inf)", "the support's top in h-space; it reaches returns of about its square"))
    max_abs_reward: float = key(real(
        "(0, inf)", "the largest |reward| of one env step (CartPole: 1); a support short of max_abs_reward / (1 - "
                    "gamma) is refused"))
    bootstrap_from: str = key(choice(("search", "network"), "what the n-step value targets bootstrap from: search, "
                                     "the root value stored when the step was searched; network, the current "
                                     "network's value of the successor (a reanalysed value)"))
    evaluate_with_search: bool = key(flag(
        "the learnt model's search plays when judged, as it acts in training; off: the prediction network's policy"))


@dataclass
class SampledMZSchema(MZSchema):
    """Sampled MuZero (config/system/sampled_mz.yaml): MuZero's keys and the draws per search node."""

    num_sampled_actions: Optional[int] = key(NUM_SAMPLED_ACTIONS)


# system_name -> its schema (DDPG is TD3's learner with other values; recurrent PPO has PPO's keys, its memory is
# the network's)
SYSTEM_SCHEMAS: Dict[str, Type[Schema]] = {
    "ppo": PPOSchema, "rec_ppo": PPOSchema, "ppo_penalty": PPOPenaltySchema, "dpo": DPOSchema, "reinforce": ReinforceSchema,
    "impala": IMPALASchema,
    "pqn": PQNSchema,
    "dqn": DQNSchema, "ddqn": DQNSchema, "dqn_reg": DQNSchema, "mdqn": MDQNSchema,
    "c51": C51Schema, "rainbow": C51Schema, "qr_dqn": QRDQNSchema, "r2d2": R2D2Schema,
    "sac": SACSchema, "td3": TD3Schema, "ddpg": TD3Schema, "d4pg": D4PGSchema,
    "awr": AWRSchema,
    "mpo": MPOSchema, "vmpo": VMPOSchema,
    "az": AZSchema,
    "sampled_az": SampledAZSchema,
    "spo": SPOSchema,
    "mz": MZSchema,
    "sampled_mz": SampledMZSchema,
}


def _walk(schema: Type[Schema], prefix: str) -> Iterator[Tuple[str, dataclasses.Field[object]]]:
    """(dotted key, field) of every leaf field, nested blocks entered."""
    for schema_field in dataclasses.fields(schema):
        nested = schema_field.default_factory if schema_field.default_factory is not dataclasses.MISSING else None
        if nested is not None and dataclasses.is_dataclass(nested):
            yield from _walk(nested, f"{prefix}{schema_field.name}.")
        else:
            yield f"{prefix}{schema_field.name}", schema_field


def _all_fields() -> Iterator[Tuple[str, dataclasses.Field[object]]]:
    for group, schema in GROUP_SCHEMAS.items():
        yield from _walk(schema, f"{group}." if group else "")
    for schema in ARCH_VARIANT_SCHEMAS.values():
        yield from _walk(schema, "arch.")
    for schema in SYSTEM_SCHEMAS.values():
        yield from _walk(schema, "system.")


def specs() -> Dict[str, Spec]:
    """Dotted key -> its spec, over every schema (a block shared by several systems gives one spec per key)."""
    found: Dict[str, Spec] = {}
    for dotted, schema_field in _all_fields():
        if "spec" in schema_field.metadata:
            assert found.setdefault(dotted, schema_field.metadata["spec"]) == schema_field.metadata["spec"], dotted
    return found


def free_form() -> Dict[str, str]:
    """Dotted key -> its doc, for the free-form fields (names, paths, addresses)."""
    return {dotted: schema_field.metadata["doc"] for dotted, schema_field in _all_fields()
            if "doc" in schema_field.metadata}


def schema_keys(system_name: str) -> set:
    """The keys `system_name`'s config must have, exactly."""
    return {schema_field.name for schema_field in dataclasses.fields(SYSTEM_SCHEMAS[system_name])}
