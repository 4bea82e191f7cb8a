"""The system schemas: dataclasses composed of shared blocks, one field per key, its range and doc in `metadata`.

A block is one idea several systems share, under one set of names (docs/glossary.md): the ε-greedy schedule,
replay, the target network, an optimiser, ... Each system's schema inherits the blocks it uses plus its own
keys, so it lists exactly the keys its code reads; `tests/test_vocabulary.py` checks every shipped
`config/system/*.yaml` against its schema. A field's `metadata["spec"]` (stoix_like/config_spec.py) is its type,
valid range and one-line doc: `config_schema.SPECS` reads every `system.*` range from here, so a range is written
once. The YAML files hold the values (fields have no defaults: `???`). No jax, no Hydra.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, Type

from stoix_like.config_spec import (DISTRIBUTIONS, POSITIVE_INT, TD_TARGETS, Spec, choice, flag, integer, real)

REQUIRED = "???"  # OmegaConf's MISSING: the value comes from the YAML


def key(spec: Spec) -> Any:
    """A schema field: its value from the YAML, its type, range and doc from `spec`."""
    return field(default=REQUIRED, metadata={"spec": spec})


def text(doc: str) -> Any:
    """A free-form string field (a name): no range, only a doc."""
    return field(default=REQUIRED, metadata={"doc": doc})


LEARNING_RATE = "learning rate: 0 learns nothing and a negative rate climbs the loss"


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
    epochs: int = key(integer(POSITIVE_INT, "on-policy passes over each rollout"))
    num_minibatches: int = key(integer(POSITIVE_INT, "minibatches each epoch splits the rollout into"))


@dataclass
class ReplayBlock:
    warmup_rollout_length: int = key(integer("[0, inf)", "env steps per env filling the buffer before learning"))
    gradient_steps_per_update: int = key(integer(POSITIVE_INT, "gradient steps on sampled batches per update"))
    total_batch_size: int = key(integer(POSITIVE_INT, "transitions sampled per gradient step, over all devices "
                                                      "and slots"))
    total_buffer_size: int = key(integer(POSITIVE_INT, "replay capacity in transitions, over all devices and slots"))
    n_step: int = key(integer(POSITIVE_INT, "steps summed into each return before bootstrapping"))
    prioritized_replay: bool = key(flag("sample transitions by priority"))
    priority_exponent: float = key(real("[0, 1]", "the priority exponent: 0 samples uniformly"))
    importance_sampling_exponent: float = key(real("[0, 1]", "the importance-sampling exponent: 1 corrects fully"))


@dataclass
class EpsilonGreedyBlock:
    epsilon_start: float = key(real("[0, 1]", "the initial exploration probability"))
    epsilon_end: float = key(real("[0, 1]", "the final exploration probability"))
    epsilon_decay_fraction: float = key(real("[0, 1]", "the fraction of the env-step budget over which epsilon "
                                                        "decays"))


@dataclass
class TargetNetworkBlock:
    tau: float = key(real("(0, 1]", "how far the target moves towards the online network: 1 a hard copy"))
    target_update_period: int = key(integer(POSITIVE_INT, "gradient steps between target moves"))


@dataclass
class DeterministicPolicyBlock:
    policy_frequency: int = key(integer(POSITIVE_INT, "Q-network steps per actor update"))
    target_policy_noise: float = key(real("[0, inf)", "the std of target-policy smoothing noise: 0 for none"))
    target_noise_clip: float = key(real("[0, inf)", "the bound of target-policy smoothing noise"))
    exploration_noise: float = key(real("[0, inf)", "the std of the Gaussian acting noise in [-1, 1]"))


@dataclass
class MunchausenBlock:
    entropy_temperature: float = key(real("(0, inf)", "M-DQN's softmax temperature"))
    munchausen_coefficient: float = key(real("[0, 1]", "M-DQN's weight of the log-policy bonus"))
    munchausen_clip_value_min: float = key(real("(-inf, 0]", "M-DQN's lower clip of the log-policy, which is <= 0"))


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


# ---------------------------------------------------------------------------------------------------- systems
# Bases are listed last-to-first in field order; every system starts with SystemBlock's keys.

@dataclass
class PPOSchema(CriticLearningRate, ActorLearningRate, OnPolicyBatchesBlock, SystemBlock):
    gae_lambda: float = key(real("[0, 1]", "GAE's lambda: 0 one-step TD, 1 Monte-Carlo"))
    clip_eps: float = key(real("(0, inf)", "PPO's clipping range of the probability ratio and the value"))
    ent_coef: float = key(real("[0, inf)", "the weight of the entropy bonus"))
    vf_coef: float = key(real("(0, inf)", "the weight of the value loss: 0 would never train the critic"))
    standardize_advantages: bool = key(flag("standardise advantages per minibatch"))


@dataclass
class PQNSchema(EpsilonGreedyBlock, QLearningRate, OnPolicyBatchesBlock, SystemBlock):
    reward_scale: float = key(real("(0, inf)", "the factor rewards are scaled by in the targets"))
    q_lambda: float = key(real("[0, 1]", "Q(lambda)'s lambda: 0 one-step targets, 1 Monte-Carlo"))


@dataclass
class QLearningSchema(TargetNetworkBlock, EpsilonGreedyBlock, QLearningRate, ReplayBlock, SystemBlock):
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


NUM_CRITICS = integer(POSITIVE_INT, "Q-networks whose minimum is the target")


@dataclass
class SACSchema(TargetNetworkBlock, QLearningRate, ActorLearningRate, ReplayBlock, SystemBlock):
    num_critics: int = key(NUM_CRITICS)
    alpha_lr: float = key(real("(0, inf)", "SAC's entropy temperature's " + LEARNING_RATE))
    init_alpha: float = key(real("(0, inf)", "SAC's initial entropy temperature, whose log is learnt"))


@dataclass
class D4PGSchema(TargetNetworkBlock, QLearningRate, ActorLearningRate, DeterministicPolicyBlock, ReplayBlock,
                 SystemBlock):
    pass


@dataclass
class TD3Schema(D4PGSchema):
    num_critics: int = key(NUM_CRITICS)


# system_name -> its schema (DDPG is TD3's learner with other values)
SYSTEM_SCHEMAS: Dict[str, Type[Any]] = {
    "ppo": PPOSchema, "pqn": PQNSchema,
    "dqn": DQNSchema, "ddqn": DQNSchema, "dqn_reg": DQNSchema, "mdqn": MDQNSchema,
    "c51": C51Schema, "rainbow": C51Schema, "qr_dqn": QRDQNSchema,
    "sac": SACSchema, "td3": TD3Schema, "ddpg": TD3Schema, "d4pg": D4PGSchema,
}


def system_specs() -> Dict[str, Spec]:
    """`system.<field>` -> its spec, over every system schema (a shared block gives one spec per key)."""
    specs: Dict[str, Spec] = {}
    for schema in SYSTEM_SCHEMAS.values():
        for schema_field in dataclasses.fields(schema):
            if "spec" in schema_field.metadata:
                spec = schema_field.metadata["spec"]
                assert specs.setdefault(f"system.{schema_field.name}", spec) == spec, schema_field.name
    return specs


def system_free_form() -> Dict[str, str]:
    """`system.<field>` -> its doc, for the free-form string fields (names)."""
    return {f"system.{schema_field.name}": schema_field.metadata["doc"]
            for schema in SYSTEM_SCHEMAS.values() for schema_field in dataclasses.fields(schema)
            if "doc" in schema_field.metadata}


def schema_keys(system_name: str) -> set:
    """The keys `system_name`'s config must have, exactly."""
    return {schema_field.name for schema_field in dataclasses.fields(SYSTEM_SCHEMAS[system_name])}
