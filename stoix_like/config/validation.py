"""Every config key's type and valid range as one table, read from the schemas; `validate(config)` checks a
composed config's ranges and the rules that relate keys, and RENAMED refuses the old names.

`SPECS` maps a dotted key (a `*` stands for exactly one path segment, e.g. `network.*.pre_torso.layer_sizes`) to a
`Spec`: its type, its valid interval or choices, whether null is allowed, and what the key means. `FREE_FORM` lists
the string keys that have no range (names, paths, `_target_`s): they are exempt on purpose, not forgotten.
`CROSS_KEY_CHECKS` holds the rules that relate several keys (a buffer holds a batch, ε ends below where it starts,
a support has v_min < v_max, ...).

`validate` raises `stoix_like.errors.ConfigError` with one line naming the key, the value and the valid range,
e.g. `system.gamma=1.5 is out of range: gamma must be in (0, 1] (the discount).`, before envs, setup or
compilation. Ranges are about validity, not taste: any value a run can use sanely passes.

Only the network parts' pattern rows are written here: every `arch.*`, `system.*`, `env.*`, `logger.*` and
evaluate row comes from a field of the schemas (stoix_like/config/schemas.py), dataclasses (a system's composed of shared
blocks) whose field metadata holds the spec, so a range is written once. Composition types the keys (Hydra refuses
a wrong type); this module adds the ranges, which Hydra does not check.

Adding a config key? Add its field to a schema, or a pattern row here for a network part's argument;
`tests/test_config_validation.py` fails for any leaf of a shipped config that has neither a spec nor a FREE_FORM
entry. This module imports no jax, so it checks a config in milliseconds.
"""

from __future__ import annotations

import itertools
import math

from dataclasses import dataclass
from typing import Callable, Dict, Iterator, List, Mapping, Optional, Tuple, TypeVar, Union, cast

from omegaconf import DictConfig, OmegaConf

from stoix_like.config import schemas
from stoix_like.config.spec import (  # noqa: F401 (the enumerations are read from here too)
    ACTIVATIONS, BRAX_BACKENDS, CONVOLUTIONS, DISTRIBUTIONAL_TD_TARGETS, DISTRIBUTIONS, ENV_SUITES, EVAL_METRICS, KERNEL_INITS,
    MUNCHAUSEN_KEYS,
    NEPTUNE_MODES, OBSERVATION_LAYOUTS, PADDINGS, PLAYGROUND_IMPLS, POSITIVE_INT, RECURRENT_CELLS, SAVED_PARAMS,
    SEARCH_POLICIES, SEED_LOOPS, TD_TARGETS, ConfigValue, Spec, _is_whole_float, choice, flag, int_list, integer,
    real)
from stoix_like.errors import ConfigError

# A composed config: a DictConfig, or the same as plain nested dicts.
Config = Union[DictConfig, Mapping[str, ConfigValue]]
# A table's row (a Spec, or a free-form key's doc).
Row = TypeVar("Row")

SPECS: Dict[str, Spec] = {
    # arch.*, system.*, env.*, logger.* and evaluate's keys: one row per schema field (stoix_like/config/schemas.py)
    # ---------------------------------------------------------------- network (config/network/*.yaml; any head)
    "network.*.pre_torso.layer_sizes": int_list(POSITIVE_INT, "the hidden layers' widths"),
    "network.*.pre_torso.activation": choice(ACTIVATIONS, "the hidden layers' activation"),
    "network.*.pre_torso.use_layer_norm": flag("LayerNorm after every hidden layer"),
    "network.*.pre_torso.layer_norm_after_activation": flag("with use_layer_norm: each LayerNorm after its layer's "
                                                            "activation (brax's MLP), not before it (PQN's)"),
    "network.*.*.kernel_init": choice(KERNEL_INITS, "the layers' initialisation: orthogonal with the layer's gain (√2 "
                                                    "hidden, 0.01 policy output, 1.0 value), or brax's lecun_uniform"),
    "network.*.*.num_atoms": integer("[2, inf)", "the atoms of the categorical support"),
    "network.*.*.v_min": real("(-inf, inf)", "the lowest return of the categorical support"),
    "network.*.*.v_max": real("(-inf, inf)", "the highest return of the categorical support"),
    "network.*.*.num_quantiles": integer(POSITIVE_INT, "the return quantiles per action"),
    "network.*.*.dueling": flag("separate value and advantage streams"),
    "network.*.action_head.min_scale": real("(0, inf)", "the tanh-Gaussian policy's least pre-tanh scale: a floor "
                                                         "under its exploration"),
    "network.*.action_head.inward_gradient": flag("the deterministic actor's tanh passes gradients that point back "
                                                  "inside (-1, 1) undamped, so a saturated actor can recover"),
    "network.*.*.noisy": flag("noisy layers in the head"),
    "network.*.pre_torso.channels": int_list(POSITIVE_INT, "the convolutions' output channels, one per conv layer "
                                             "(ResNetTorso: one per stage)"),
    "network.*.pre_torso.blocks_per_stage": integer("[0, inf)", "ResNetTorso: residual blocks after each stage's "
                                                                "convolution and max-pool"),
    "network.*.pre_torso.convolution": choice(CONVOLUTIONS, "ResNetTorso's 3×3 convolutions: XLA's, a matmul over "
                                              "patches (fast on a CPU), or auto (patches on a CPU only)"),
    "network.*.pre_torso.kernel_sizes": int_list(POSITIVE_INT, "the convolutions' square kernel sizes"),
    "network.*.pre_torso.padding": choice(PADDINGS, "CNNTorso's convolutions: SAME (zero-padded, a grid keeps its "
                                          "size at stride 1) or VALID (unpadded, the Nature DQN network's)"),
    "network.*.pre_torso.strides": int_list(POSITIVE_INT, "the convolutions' strides"),
    "network.representation_network.latent_size": integer(
        POSITIVE_INT, "MuZero's latent state width (its representation's and dynamics' output)"),
    "network.shared_torso": flag("one torso under the policy and value heads (the actor's); off: separate networks"),
    "network.*.recurrent_core.cell": choice(RECURRENT_CELLS, "the recurrent torso's cell"),
    "network.*.recurrent_core.hidden_size": integer(POSITIVE_INT, "the recurrent torso's hidden state size"),
    "env.kwargs.backend": choice(BRAX_BACKENDS, "brax's physics pipeline"),
    "env.kwargs.impl": choice(PLAYGROUND_IMPLS, "MuJoCo Playground's MJX backend"),
    "env.kwargs.env_params.memory_length": integer(POSITIVE_INT, "bsuite MemoryChain's steps between cue and query"),
    # popjax RepeatPrevious (envs/popjax.py, which also refuses lag >= horizon)
    "env.kwargs.num_symbols": integer("[2, inf)", "RepeatPrevious: the symbols shown, one-hot; also the actions"),
    "env.kwargs.lag": integer(POSITIVE_INT, "RepeatPrevious: how many steps back the answer lies"),
    "env.kwargs.horizon": integer("[2, inf)", "RepeatPrevious: the episode's length, where it terminates"),
    # envpool's Atari preprocessing (config/env/envpool/pong.yaml; envpool itself refuses what it cannot do)
    "env.kwargs.img_height": integer(POSITIVE_INT, "Atari: the frames' height in pixels after resizing"),
    "env.kwargs.img_width": integer(POSITIVE_INT, "Atari: the frames' width in pixels after resizing"),
    "env.kwargs.gray_scale": flag("Atari: grayscale frames (one channel per stacked frame)"),
    "env.kwargs.stack_num": integer(POSITIVE_INT, "Atari: the last frames stacked into one observation"),
    "env.kwargs.frame_skip": integer(POSITIVE_INT, "Atari: emulator frames each action is repeated for"),
    "env.kwargs.noop_max": integer(POSITIVE_INT, "Atari: at most this many no-op actions at reset"),
    "env.kwargs.episodic_life": flag("Atari, training only: a lost life ends the learner's episode (discount 0); "
                                     "the logged and evaluated returns are whole games"),
    "env.kwargs.reward_clip": flag("Atari, training only: rewards clipped to their sign; the logged and evaluated "
                                   "returns are the game's score"),
    "env.kwargs.repeat_action_probability": real("[0, 1]", "Atari: sticky actions, the chance the previous action "
                                                           "is repeated"),
}

SPECS.update(schemas.specs())

# String keys with no range (names, paths, addresses, `_target_`s), exempt on purpose. A code path that reads
# them reports a bad one itself (an unknown scenario, a missing checkpoint).
FREE_FORM: Dict[str, str] = {
    "network.*.*._target_": "the module a network part is built by",
    "env.kwargs.ruleset_goal": "an XLand goal built locally: 'GOAL TILE COLOUR', e.g. 'agent_near ball red'",
    "env.kwargs.ruleset_objects": "further XLand objects placed at reset: ['TILE COLOUR', ...]",
    **schemas.free_form(),
}


def _matches(pattern: str, key: str) -> bool:
    pattern_parts, key_parts = pattern.split("."), key.split(".")
    return len(pattern_parts) == len(key_parts) and all(
        p == "*" or p == k for p, k in zip(pattern_parts, key_parts))


def _lookup(table: Mapping[str, Row], key: str) -> Optional[Row]:
    if key in table:
        return table[key]
    return next((value for pattern, value in table.items() if "*" in pattern and _matches(pattern, key)), None)


def spec_of(key: str) -> Optional[Spec]:
    """The spec of a dotted key, or None when the table has none (FREE_FORM keys included)."""
    return _lookup(SPECS, key)


def is_free_form(key: str) -> bool:
    return _lookup(FREE_FORM, key) is not None


MISSING = "???"


def leaves(config: Config) -> Iterator[Tuple[str, ConfigValue]]:
    """(dotted key, value) of every leaf, in the config's order; lists are leaves; `???` stays `"???"`."""
    if isinstance(config, DictConfig):
        try:
            config = cast(Dict[str, ConfigValue],
                          OmegaConf.to_container(config, resolve=True, throw_on_missing=False))
        except Exception:  # an interpolation that cannot resolve here: check the raw values
            config = cast(Dict[str, ConfigValue],
                          OmegaConf.to_container(config, resolve=False, throw_on_missing=False))

    def walk(node: Mapping[str, ConfigValue], prefix: str) -> Iterator[Tuple[str, ConfigValue]]:
        for name, value in node.items():
            key = f"{prefix}{name}"
            if isinstance(value, Mapping):
                yield from walk(value, key + ".")
            else:
                yield key, value

    yield from walk(config, "")


def unranged_keys(config: Config) -> List[str]:
    """Leaves with neither a spec nor a FREE_FORM entry: what the completeness test refuses."""
    return [key for key, _ in leaves(config) if spec_of(key) is None and not is_free_form(key)]


def show(value: object) -> str:
    """A value as it would be written on the command line."""
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(show(item) for item in value) + "]"
    return str(value)


def check_key(key: str, value: ConfigValue) -> Optional[str]:
    """One line saying what is wrong with `key=value`, or None (also for keys the table does not know)."""
    if value == MISSING:
        spec = spec_of(key)
        meaning = _lookup(FREE_FORM, key) or (spec.meaning if spec else "")
        return f"{key} is required: pass {key}=..." + (f" ({meaning})." if meaning else ".")
    spec = spec_of(key)
    if spec is None:
        return None
    problem = spec.problem(value)
    if problem is None:
        return None
    leaf = key.rsplit(".", 1)[-1]
    return f"{key}={show(value)} {problem}: {leaf} must be {spec.describe()} ({spec.meaning})."


# ------------------------------------------------------------------------------------------------ renamed keys
# One name per idea (docs/glossary.md). An old name is refused with the new one, but only for the systems it was
# renamed in: `critic_lr` still trains PPO's state-value critic, `epochs` still counts PPO's and PQN's passes.

DQN_FAMILY = ("dqn", "ddqn", "mdqn", "dqn_reg", "c51", "qr_dqn", "rainbow")
Q_CRITIC_SYSTEMS = ("sac", "td3", "ddpg", "d4pg")  # actor-critics whose critic is a Q-function


@dataclass(frozen=True)
class Rename:
    """`old` (a dotted key, or the prefix of a block of keys) is now `new`, in `systems` (empty: in all)."""

    old: str
    new: str
    systems: Tuple[str, ...] = ()

    def applies(self, key: str, system_name: Optional[str]) -> bool:
        in_system = not self.systems or system_name in self.systems
        return in_system and (key == self.old or key.startswith(self.old + "."))


RENAMED: Tuple[Rename, ...] = (
    Rename("system.training_epsilon", "system.epsilon_end", ("pqn",)),
    Rename("system.exploration_fraction", "system.epsilon_decay_fraction", ("pqn",)),
    Rename("system.epochs", "system.gradient_steps_per_update", DQN_FAMILY + Q_CRITIC_SYSTEMS),
    Rename("system.buffer_size", "system.total_buffer_size"),
    Rename("system.batch_size", "system.total_batch_size"),
    Rename("system.critic_lr", "system.q_lr", Q_CRITIC_SYSTEMS),
    Rename("network.critic_network", "network.q_network", Q_CRITIC_SYSTEMS),
    Rename("network.q_network.critic_head", "network.q_network.q_head", Q_CRITIC_SYSTEMS),
    Rename("system.huber_loss_parameter", "system.huber_delta"),
    Rename("system.quantile_huber_parameter", "system.huber_delta"),
    Rename("system.prioritised_replay", "system.prioritized_replay"),
    Rename("system.regularisation_weight", "system.regularization_weight"),
    Rename("env.kwargs.episode_length", "env.max_episode_steps"),  # brax's
    Rename("env.kwargs.max_episode_steps", "env.max_episode_steps"),  # jumanji's
)

# config-group options (files) that were renamed: group -> {old option: new option}
RENAMED_OPTIONS: Dict[str, Dict[str, str]] = {
    "network": {"mlp": "mlp_ppo", "mlp_dpg": "mlp_td3", "mlp_dueling_dqn": "mlp_dqn_dueling",
                "mlp_noisy_dueling_c51": "mlp_rainbow"},
}


def new_name(key: str, system_name: Optional[str]) -> Optional[str]:
    """The key's current name if `key` is an old one in `system_name`'s config, else None."""
    current = key
    for rename in RENAMED:  # in table order, so a block rename and a rename inside it compose
        if rename.applies(current, system_name):
            current = rename.new + current[len(rename.old):]
    return current if current != key else None


def renamed_key_problem(key: str, system_name: Optional[str]) -> Optional[str]:
    """One line refusing an old key name, e.g. `system.critic_lr was renamed to system.q_lr (for sac)`."""
    new = new_name(key, system_name)
    if new is None:
        return None
    scoped = any(rename.systems and rename.applies(key, system_name) for rename in RENAMED)
    return f"{key} was renamed to {new}" + (f" (for {system_name})" if scoped else "") + f"; write {new}=... instead."


def renamed_option_problem(group: str, option: str) -> Optional[str]:
    new = RENAMED_OPTIONS.get(group, {}).get(option)
    return f"{group}={option} was renamed to {group}={new}." if new else None


def system_name_of(config: Config) -> Optional[str]:
    system = config.get("system") if isinstance(config, Mapping) else None
    name = system.get("system_name") if isinstance(system, Mapping) else None
    return None if name is None else str(name)


# ------------------------------------------------------------------------------------------ cross-key checks

def _buffer_holds_a_batch(values: Mapping[str, ConfigValue]) -> Optional[str]:
    buffer_size, batch_size = values.get("system.total_buffer_size"), values.get("system.total_batch_size")
    if buffer_size is not None and batch_size is not None and buffer_size < batch_size:
        return (f"system.total_buffer_size={buffer_size} is smaller than system.total_batch_size={batch_size}: the "
                f"replay buffer must hold at least one batch; set system.total_buffer_size to at least {batch_size}.")
    return None


def _epsilon_decays(values: Mapping[str, ConfigValue]) -> Optional[str]:
    start, end = values.get("system.epsilon_start"), values.get("system.epsilon_end")
    if start is not None and end is not None and end > start:
        return (f"system.epsilon_end={show(end)} is above system.epsilon_start={show(start)}: epsilon decays, so "
                f"epsilon_end must be at most epsilon_start.")
    return None


def _supports_are_intervals(values: Mapping[str, ConfigValue]) -> Optional[str]:
    for key, v_min in values.items():
        if not key.startswith("network.") or not key.endswith(".v_min"):
            continue
        head = key[: -len(".v_min")]
        v_max = values.get(head + ".v_max")
        if v_min is not None and v_max is not None and not v_min < v_max:
            return (f"{head}.v_min={show(v_min)} is not below {head}.v_max={show(v_max)}: the categorical support "
                    f"[v_min, v_max] needs v_min < v_max.")
    return None


def _process_id_in_range(values: Mapping[str, ConfigValue]) -> Optional[str]:
    process_id, num_processes = values.get("arch.process_id"), values.get("arch.num_processes")
    if process_id is not None and num_processes is not None and process_id >= num_processes:
        return (f"arch.process_id={process_id} is out of range: with arch.num_processes={num_processes} it must be "
                f"in 0 .. {num_processes - 1}.")
    return None


# The systems with a Sebulba learner (a `sebulba_setup` in their module; tests/test_sebulba.py checks the list
# against the registry): only they can train on a CPU suite.
SEBULBA_SYSTEMS = ("ppo", "impala")


def _arch_fits_the_env_suite(values: Mapping[str, ConfigValue]) -> Optional[str]:
    """Anakin compiles the env into the learner, so it needs a JAX suite; Sebulba's actor threads step CPU envs."""
    suite, sebulba = values.get("env.suite"), "arch.actor_device_ids" in values
    if suite is None:
        return None
    cpu_suite = suite in ("gymnasium", "envpool")
    system_name = values.get("system.system_name")
    if cpu_suite and system_name is not None and system_name not in SEBULBA_SYSTEMS:
        return (f"env.suite={suite} steps CPU envs, which only arch=sebulba runs, and {system_name} has no Sebulba "
                f"learner: train {' or '.join(SEBULBA_SYSTEMS)} on it (python -m experiments.ppo arch=sebulba "
                f"env=...), or give {system_name} a JAX suite (e.g. env=gymnax/breakout, MinAtar).")
    if cpu_suite and not sebulba:
        return f"env.suite={suite} steps CPU envs, which arch=anakin cannot compile into its learner: use arch=sebulba."
    if sebulba and not cpu_suite:
        return (f"arch=sebulba steps CPU envs (env.suite gymnasium or envpool); env.suite={suite} is a JAX suite: "
                f"use arch=anakin, which compiles it into the learner.")
    return None


def _sebulba_layout_divides(values: Mapping[str, ConfigValue]) -> Optional[str]:
    """Every update's batch (all actor threads' envs) splits evenly over the learner devices."""
    if "arch.actor_device_ids" not in values:
        return None
    actors, learners = values["arch.actor_device_ids"], values["arch.learner_device_ids"]
    for name, ids in (("arch.actor_device_ids", actors), ("arch.learner_device_ids", learners)):
        if not ids:
            return f"{name}=[] names no device: give at least one index of jax.devices(), e.g. {name}=[0]."
        if len(set(ids)) != len(ids):
            return f"{name}={list(ids)} names a device twice: each device once."
    if values.get("arch.num_seeds", 1) != 1:
        return (f"arch.num_seeds={values['arch.num_seeds']}: arch=sebulba trains one seed per run; run a population "
                f"as separate runs (arch.seed=0, 1, ...).")
    if values.get("arch.multihost"):
        return "arch.multihost=True: arch=sebulba runs in one process for now; use arch=anakin across hosts."
    threads, total = len(actors) * values["arch.num_actor_threads"], values["arch.total_num_envs"]
    # each thread steps an equal batch, and each update's batch (every thread's envs) splits over the learners
    granule = threads * len(learners) // math.gcd(threads, len(learners))
    if total % granule:
        lower = max(total - total % granule, granule)
        return (f"arch.total_num_envs={total} must split evenly over {threads} actor threads "
                f"(len(arch.actor_device_ids) × arch.num_actor_threads) and over {len(learners)} learner devices "
                f"(arch.learner_device_ids={list(learners)}): try arch.total_num_envs={lower} or {lower + granule}.")
    return None


def _td_target_fits_the_system(values: Mapping[str, ConfigValue]) -> Optional[str]:
    td_target = values.get("system.td_target")
    if td_target is None:
        return None
    if "system.distribution" in values and td_target not in DISTRIBUTIONAL_TD_TARGETS:
        return (f"system.td_target={td_target} is not available to distributional systems: td_target must be one "
                f"of {', '.join(DISTRIBUTIONAL_TD_TARGETS)}.")
    missing = [name for name in MUNCHAUSEN_KEYS if f"system.{name}" not in values]
    if td_target == "munchausen" and missing:
        return (f"system.td_target=munchausen needs system.{', system.'.join(missing)}; use system=mdqn "
                f"(python -m experiments.mdqn).")
    return None


def first_rollout_too_short(length_key: str, length: int, warmup_rollout_length: int, rollout_length: int) -> str:
    """The refusal of a replayed sequence longer than what each env has stored when learning starts (also raised
    by stoix_like.learner.replay.make_buffer)."""
    return (f"{length_key}={length} is longer than system.warmup_rollout_length + system.rollout_length = "
            f"{warmup_rollout_length + rollout_length}: no full sequence of {length} steps exists when learning "
            f"starts.")


def _replayed_sequences_fit_the_first_rollout(values: Mapping[str, ConfigValue]) -> Optional[str]:
    """The replay samples sequences of system.n_step (or system.sequence_length) stored steps of one env: each env
    must have stored that many when learning starts."""
    rollout = values.get("system.rollout_length")
    warmup = values.get("system.warmup_rollout_length") or 0
    for length_key in ("system.n_step", "system.sequence_length"):
        length = values.get(length_key)
        if length is not None and rollout is not None and warmup + rollout < length:
            return first_rollout_too_short(length_key, length, warmup, rollout)
    return None


CNN_TORSO = "stoix_like.networks.torsos.CNNTorso"
# torsos that read (height, width, channels) grids
IMAGE_TORSOS = (CNN_TORSO, "stoix_like.networks.torsos.ResNetTorso")


def _torsos_read_the_observation_layout(values: Mapping[str, ConfigValue]) -> Optional[str]:
    layout = values.get("env.observation_layout")
    if layout is None:
        return None
    for key, target in values.items():
        if not (key.startswith("network.") and key.endswith(".pre_torso._target_")):
            continue
        is_cnn = target == CNN_TORSO
        if target in IMAGE_TORSOS and layout != "image":
            return (f"{key}={target} reads (height, width, channels) grids, but env.observation_layout={layout}: "
                    "set env.observation_layout=image (the suite must observe a grid).")
        if target not in IMAGE_TORSOS and layout == "image":
            return (f"env.observation_layout=image keeps grid observations, which {key}={target} does not read: "
                    "choose a CNN network (network=cnn_ppo; Atari frames: network=resnet_ppo, cnn_ppo_nature or "
                    "cnn_ppo_nature_shared) "
                    "or env.observation_layout=flat.")
        head = key[: -len("._target_")]
        lengths = {name: len(values[f"{head}.{name}"]) for name in ("channels", "kernel_sizes", "strides")
                   if is_cnn and isinstance(values.get(f"{head}.{name}"), (list, tuple))}
        if len(set(lengths.values())) > 1:
            return (f"{head}: channels, kernel_sizes and strides describe one conv layer each, so their lengths must "
                    f"agree; they are {', '.join(f'{name} {n}' for name, n in lengths.items())}.")
    return None


# The systems that carry a recurrent network's hidden state (networks/recurrent.py), with the networks that fit
# them; every other system's networks read one step alone.
RECURRENT_SYSTEMS = {"rec_ppo": "network=lstm_rec_ppo or network=gru_rec_ppo",
                     "r2d2": "network=lstm_r2d2 or network=gru_r2d2"}


def _recurrent_networks_fit_the_system(values: Mapping[str, ConfigValue]) -> Optional[str]:
    system_name = values.get("system.system_name")
    recurrent = sorted({key.split(".")[1] for key in values
                        if key.startswith("network.") and ".recurrent_core." in key})
    if recurrent and system_name not in RECURRENT_SYSTEMS:
        return (f"network.{recurrent[0]} is recurrent (it has a recurrent_core), and {system_name} has no hidden "
                f"state to carry: choose a feed-forward network, or a recurrent system "
                f"(python -m experiments.{' / '.join(RECURRENT_SYSTEMS)}).")
    if system_name in RECURRENT_SYSTEMS:
        networks = sorted({key.split(".")[1] for key in values if key.startswith("network.")})
        missing = [name for name in networks if name not in recurrent]
        if missing:
            return (f"{system_name} needs recurrent networks, but network.{missing[0]} has no recurrent_core: "
                    f"choose {RECURRENT_SYSTEMS[system_name]}.")
    return None


# The systems whose networks policy_gradient.actor_critic_networks builds and whose learner reads them through
# networks/actor_critic.PolicyAndValue: only they can put the critic's head on the actor's torso.
SHARED_TORSO_SYSTEMS = ("ppo", "ppo_penalty", "dpo", "reinforce", "impala")


def _shared_torso_fits_the_system(values: Mapping[str, ConfigValue]) -> Optional[str]:
    system_name = values.get("system.system_name")
    if values.get("network.shared_torso") and system_name not in SHARED_TORSO_SYSTEMS:
        return (f"network.shared_torso=True: {system_name} builds its actor and critic apart; a shared torso is "
                f"for {', '.join(SHARED_TORSO_SYSTEMS)} (e.g. network=mlp_impala_shared).")
    return None


def _recomputed_advantages_fit_the_system(values: Mapping[str, ConfigValue]) -> Optional[str]:
    """The epoch-by-epoch recomputation lives in policy_gradient.make_learn_from_steps, the loop of the same
    systems as a shared torso's; recurrent PPO would have to replay its critic's memory over every sequence."""
    system_name = values.get("system.system_name")
    if values.get("system.recompute_advantages") and system_name not in SHARED_TORSO_SYSTEMS:
        return (f"system.recompute_advantages=True: {system_name} computes its advantages once per rollout; the "
                f"recomputation before each epoch is for {', '.join(SHARED_TORSO_SYSTEMS)}. Set it to False.")
    return None


def _burn_in_leaves_steps_to_learn(values: Mapping[str, ConfigValue]) -> Optional[str]:
    burn_in, length = values.get("system.burn_in"), values.get("system.sequence_length")
    if burn_in is not None and length is not None and burn_in >= length:
        return (f"system.burn_in={burn_in} is not below system.sequence_length={length}: the loss is on the steps "
                f"after the burn-in, and none would be left; lower system.burn_in or raise system.sequence_length.")
    return None


def _sequences_tile_the_rollout(values: Mapping[str, ConfigValue]) -> Optional[str]:
    """R2D2 (the system with a burn-in) stores each rollout as whole disjoint sequences."""
    length, rollout = values.get("system.sequence_length"), values.get("system.rollout_length")
    if "system.burn_in" not in values or length is None or rollout is None or rollout % length == 0:
        return None
    divisors = [d for d in range(1, rollout + 1) if rollout % d == 0 and d > values["system.burn_in"]]
    nearest = min(divisors, key=lambda d: abs(d - length)) if divisors else None
    hint = f", e.g. system.sequence_length={nearest}" if nearest else ""
    return (f"system.sequence_length={length} does not divide system.rollout_length={rollout}: each rollout is "
            f"stored as whole disjoint sequences; choose a divisor of rollout_length{hint}, or change rollout_length.")


CROSS_KEY_CHECKS: Tuple[Callable[[Mapping[str, ConfigValue]], Optional[str]], ...] = (
    _buffer_holds_a_batch, _epsilon_decays, _supports_are_intervals, _process_id_in_range,
    _td_target_fits_the_system, _replayed_sequences_fit_the_first_rollout, _arch_fits_the_env_suite,
    _torsos_read_the_observation_layout, _recurrent_networks_fit_the_system, _sebulba_layout_divides,
    _burn_in_leaves_steps_to_learn, _sequences_tile_the_rollout, _shared_torso_fits_the_system,
    _recomputed_advantages_fit_the_system)


# ------------------------------------------------------------------------------------------------ sweeps
# `sweep.system.<key>=[v1,v2,...]` trains every grid point × seed as one member of one compiled program
# (stoix_like/config/sweep.py). Only numbers a system's learner reads per member (stoix_like/learner/hyperparams.py)
# can be swept so; the systems below read these keys so, and tests/test_sweep_in_one_program.py checks that a member
# equals the single run with its values.
POLICY_GRADIENT_SWEEPABLE = ("actor_lr", "critic_lr", "ent_coef", "vf_coef", "gamma", "gae_lambda", "reward_scale")
SWEEPABLE = {
    "ppo": POLICY_GRADIENT_SWEEPABLE + ("clip_eps",),
    "ppo_penalty": POLICY_GRADIENT_SWEEPABLE + ("clip_eps",),
    "dpo": POLICY_GRADIENT_SWEEPABLE + ("clip_eps",),
    "reinforce": POLICY_GRADIENT_SWEEPABLE,
    "pqn": ("q_lr", "gamma", "q_lambda", "reward_scale", "epsilon_start", "epsilon_end"),
    "dqn": ("q_lr", "gamma", "tau", "epsilon_start", "epsilon_end"),
    "ddqn": ("q_lr", "gamma", "tau", "epsilon_start", "epsilon_end"),
}
SWEEP_PREFIX = "sweep.system."


def swept_keys(values: Mapping[str, ConfigValue]) -> Dict[str, ConfigValue]:
    """{system key: its list of values} of every `sweep.system.<key>` in a config's leaves."""
    return {key[len(SWEEP_PREFIX):]: value for key, value in values.items() if key.startswith(SWEEP_PREFIX)}


def _sweep_problems(values: Mapping[str, ConfigValue], system_name: Optional[str]) -> List[str]:
    """What is wrong with the config's `sweep.*` keys, one line each: a key that changes shapes or that the system
    does not read per member, a value out of the key's range, a system or a run that cannot train members."""
    keys = [key for key in values if key.startswith("sweep.")]
    if not keys:
        return []
    supported = ", ".join(SWEEPABLE)
    if system_name not in SWEEPABLE:
        return [f"{keys[0]}: {system_name} cannot train a sweep in one program yet (its learner reads its "
                f"hyperparameters as constants); systems that can: {supported}. Sweep {system_name} as a Hydra "
                f"multirun instead: -m {keys[0][len('sweep.'):]}=v1,v2."]
    sweepable = SWEEPABLE[system_name]
    found = []
    for key in keys:
        target, value = key[len("sweep."):], values[key]
        name = target[len("system."):] if target.startswith("system.") else None
        spec = spec_of(target)
        multirun = f"sweep it as a Hydra multirun instead: -m {target}=v1,v2"
        if name is None or name not in sweepable:
            if name is None or (spec is not None and spec.kind in ("int", "int_list")):
                why = ("it changes array shapes or the program itself (envs, network sizes, batch and rollout "
                       "sizes, loop lengths), so its members cannot share one compiled program")
            elif spec is not None and spec.kind in ("bool", "choice"):
                why = "it is a switch, which changes the program itself, so its members cannot share one program"
            elif spec is None:
                why = f"{system_name} has no key {target}"
            else:
                why = f"{system_name}'s learner reads it as a constant, not per member"
            found.append(f"{key} cannot be swept in one program: {why}; {system_name} can sweep "
                         f"{', '.join('system.' + each for each in sweepable)}; {multirun}.")
            continue
        if not isinstance(value, (list, tuple)) or not value:
            found.append(f"{key}={show(value)} must be a non-empty list of values, e.g. {key}=[1e-4,3e-4].")
            continue
        if len(set(value)) != len(value):
            found.append(f"{key}={show(value)} lists a value twice: each grid point must be trained once.")
            continue
        found += [line.replace(target, f"{key}[{index}]", 1) for index, item in enumerate(value)
                  if (line := check_key(target, item))][:1]
    if found:
        return found
    grid = swept_keys(values)
    for point in itertools.product(*grid.values()):  # each grid point is a run whose keys must agree
        point_values = {**values, **{f"system.{name}": value for name, value in zip(grid, point)}}
        disagreement = next((line for check in CROSS_KEY_CHECKS if (line := check(point_values))), None)
        if disagreement:
            shown = " ".join(f"{name}={show(value)}" for name, value in zip(grid, point))
            return [f"sweep grid point {shown}: {disagreement}"]
    if "arch.actor_device_ids" in values:
        return [f"{keys[0]}: arch=sebulba trains one seed per run; a sweep in one program needs arch=anakin."]
    checkpointing = [key for key in ("logger.checkpointing.save_model", "logger.checkpointing.resume")
                     if values.get(key)] + [key for key in ("logger.checkpointing.resume_from",
                                                            "logger.checkpointing.load_params_from")
                                            if values.get(key) is not None]
    if checkpointing:
        return [f"{keys[0]} with {checkpointing[0]}: a sweep in one program does not save or load checkpoints yet; "
                f"turn {checkpointing[0]} off, or sweep as a Hydra multirun (-m)."]
    return []


# ------------------------------------------------------------------------------------------------ PBT
# `arch.pbt.interval=<updates>` with `arch.pbt.ranges.<key>=[low,high]` trains the seeds as a PBT population in one
# program (stoix_like/learner/pbt.py). A member reads its values as a sweep's member does, so the keys that can be
# ranged are the sweepable ones.
PBT_RANGES_PREFIX = "arch.pbt.ranges."


def _pbt_problems(values: Mapping[str, ConfigValue], system_name: Optional[str]) -> List[str]:
    """What is wrong with the config's `arch.pbt` keys, one line each."""
    ranges = {key[len(PBT_RANGES_PREFIX):]: value for key, value in values.items() if key.startswith(PBT_RANGES_PREFIX)}
    interval = values.get("arch.pbt.interval")
    if interval is None:
        if ranges:
            first = next(iter(ranges))
            return [f"{PBT_RANGES_PREFIX}{first} is set but arch.pbt.interval is null: set arch.pbt.interval=<updates> "
                    f"to train the seeds as a PBT population, or drop the range."]
        return []
    if system_name not in SWEEPABLE:
        return [f"arch.pbt.interval={interval}: {system_name} cannot train a PBT population yet (its learner reads "
                f"its hyperparameters as constants); systems that can: {', '.join(SWEEPABLE)}."]
    tunable = SWEEPABLE[system_name]
    example = f"'{PBT_RANGES_PREFIX}{tunable[0]}=[1e-5,1e-1]'"
    if not ranges:
        return [f"arch.pbt.interval={interval} has nothing to tune: give each hyperparameter a range, e.g. {example}."]
    found = []
    for name, bounds in ranges.items():
        key = PBT_RANGES_PREFIX + name
        if name not in tunable:
            found.append(f"{key}: PBT cannot tune system.{name} ({system_name}'s learner reads it as a constant or "
                         f"it changes shapes); {system_name} can tune {', '.join(tunable)}.")
        elif (not isinstance(bounds, (list, tuple)) or len(bounds) != 2
              or not all(isinstance(bound, (int, float)) and not isinstance(bound, bool) for bound in bounds)
              or not bounds[0] < bounds[1]):
            found.append(f"{key}={show(bounds)} must be [low, high] with low < high, e.g. {example}.")
        else:
            found += [line.replace(f"system.{name}", f"{key}[{index}]", 1) for index, bound in enumerate(bounds)
                      if (line := check_key(f"system.{name}", bound))][:1]
    if found:
        return found
    num_seeds, fraction = values.get("arch.num_seeds"), values.get("arch.pbt.fraction")
    if isinstance(num_seeds, int) and isinstance(fraction, (int, float)) and int(fraction * num_seeds) < 1:
        return [f"arch.pbt.fraction={show(fraction)} of arch.num_seeds={num_seeds} members replaces none: a PBT "
                f"population needs arch.num_seeds >= {math.ceil(1 / fraction)} at that fraction."]
    if any(key.startswith("sweep.") for key in values):
        return ["arch.pbt with sweep.*: a PBT population starts from its ranges; drop the sweep.* keys, or turn PBT "
                "off (arch.pbt.interval=null)."]
    if "arch.actor_device_ids" in values:
        return ["arch.pbt: arch=sebulba trains one seed per run; a PBT population in one program needs arch=anakin."]
    if values.get("logger.checkpointing.load_params_from") is not None:
        return ["logger.checkpointing.load_params_from with arch.pbt: a PBT population starts from fresh members; "
                "resume a PBT run's own checkpoint (logger.checkpointing.resume=True) instead."]
    return []


def problems(config: Config) -> List[str]:
    """Every problem of a composed config, one line each: key by key in config order, then the cross-key rules
    (those only once every key they read is valid on its own)."""
    values = dict(leaves(config))
    system_name = system_name_of(config)
    found = [line for line in (renamed_key_problem(key, system_name) for key in values) if line]
    found += [line for line in (check_key(key, value) for key, value in values.items()) if line]
    found += _sweep_problems(values, system_name)
    found += _pbt_problems(values, system_name)
    if not found:
        found = [line for line in (check(values) for check in CROSS_KEY_CHECKS) if line]
    return found


def validate(config: Config) -> None:
    """Raise a one-line ConfigError for the first problem of `config` (a DictConfig or a plain dict).

    A valid DictConfig has its whole-number floats at integer keys (`1e6`) rewritten as ints, so that every
    consumer reads an int.
    """
    found = problems(config)
    if found:
        more = len(found) - 1
        also = f" ({more} more problem{'s' if more > 1 else ''} after this one.)" if more else ""
        raise ConfigError(found[0] + also)
    if isinstance(config, DictConfig):
        for key, value in leaves(config):
            spec = spec_of(key)
            if spec is not None and spec.kind == "int" and _is_whole_float(value):
                OmegaConf.update(config, key, int(value), merge=False)
