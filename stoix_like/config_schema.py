"""Every config key's type and valid range, as one table of data; `validate(config)` checks a composed config.

`SPECS` maps a dotted key (a `*` stands for exactly one path segment, e.g. `network.*.pre_torso.layer_sizes`) to a
`Spec`: its type, its valid interval or choices, whether null is allowed, and what the key means. `FREE_FORM` lists
the string keys that have no range (names, paths, `_target_`s): they are exempt on purpose, not forgotten.
`CROSS_KEY_CHECKS` holds the rules that relate several keys (a buffer holds a batch, ε ends below where it starts,
a support has v_min < v_max, ...).

`validate` raises `stoix_like.errors.ConfigError` with one line naming the key, the value and the valid range,
e.g. `system.gamma=1.5 is out of range: gamma must be in (0, 1] (the discount).`, before envs, setup or
compilation. Ranges are about validity, not taste: any value a run can use sanely passes.

Adding a config key? Add its row here; `tests/test_config_validation.py` fails for any leaf of a shipped config
that has neither a spec nor a FREE_FORM entry. This module imports no jax, so it checks a config in milliseconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

from omegaconf import DictConfig, OmegaConf

from stoix_like.errors import ConfigError

INF = math.inf


@dataclass(frozen=True)
class Spec:
    """What one key may hold. `kind`: "real" (an int is fine too), "int", "bool", "choice" (one of `choices`)
    or "int_list" (a list of ints, each in the interval)."""

    kind: str
    meaning: str
    low: float = -INF
    high: float = INF
    low_open: bool = True  # the bound itself is excluded ("(" rather than "[")
    high_open: bool = True
    choices: Tuple[str, ...] = ()
    nullable: bool = False  # null is allowed (and `meaning` says what it means)

    def interval(self) -> str:
        """The valid range in words a user can act on: "in (0, 1]", "at least 1", "greater than 0", ..."""
        low, high = _number(self.low), _number(self.high)
        if self.low > -INF and self.high < INF:
            return f"in {'(' if self.low_open else '['}{low}, {high}{')' if self.high_open else ']'}"
        if self.low > -INF:
            return f"{'greater than' if self.low_open else 'at least'} {low}"
        if self.high < INF:
            return f"{'less than' if self.high_open else 'at most'} {high}"
        return ""

    def describe(self) -> str:
        """What the value must be, e.g. "an integer, at least 1", "in (0, 1]", "one of relu, tanh"."""
        if self.kind == "bool":
            text = "True or False"
        elif self.kind == "choice":
            text = "one of " + ", ".join(self.choices)
        elif self.kind == "int":
            text = "an integer" + (", " + self.interval() if self.interval() else "")
        elif self.kind == "int_list":
            text = "a list of integers" + (", each " + self.interval() if self.interval() else "")
        else:
            text = self.interval() or "a number"
        return text + (" or null" if self.nullable else "")

    def problem(self, value: Any) -> Optional[str]:
        """None if `value` is valid, else what is wrong with it ("is out of range", "is not an integer", ...)."""
        if value is None:
            return None if self.nullable else "is not set"
        if self.kind == "bool":
            return None if isinstance(value, bool) else "is not a boolean"
        if self.kind == "choice":
            return None if isinstance(value, str) and value in self.choices else "is not one of the choices"
        if self.kind == "int_list":
            if not isinstance(value, (list, tuple)) or not all(_is_int(item) for item in value):
                return "is not a list of integers"
            return None if all(self._inside(item) for item in value) else "is out of range"
        if self.kind == "int":
            if not (_is_int(value) or _is_whole_float(value)):
                return "is not an integer"
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
            return "is not a number"
        return None if self._inside(value) else "is out of range"

    def _inside(self, value: float) -> bool:
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_whole_float(value: Any) -> bool:
    """`arch.total_timesteps=1e6` reaches us as 1000000.0: a whole number, written the way researchers write it."""
    return isinstance(value, float) and value.is_integer() and abs(value) < 2 ** 53


def _number(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _parse_interval(interval: str) -> Dict[str, Any]:
    """"(0, 1]" -> low=0, high=1, low_open=True, high_open=False; "inf" / "-inf" for an open end."""
    low, high = (part.strip() for part in interval[1:-1].split(","))
    parse = lambda text: float(text) if "inf" in text or "." in text or "e" in text else int(text)
    return dict(low=parse(low), high=parse(high), low_open=interval[0] == "(", high_open=interval[-1] == ")")


def real(interval: str, meaning: str, nullable: bool = False) -> Spec:
    return Spec("real", meaning, nullable=nullable, **_parse_interval(interval))


def integer(interval: str, meaning: str, nullable: bool = False) -> Spec:
    return Spec("int", meaning, nullable=nullable, **_parse_interval(interval))


def int_list(interval: str, meaning: str) -> Spec:
    return Spec("int_list", meaning, **_parse_interval(interval))


def flag(meaning: str, nullable: bool = False) -> Spec:
    return Spec("bool", meaning, nullable=nullable)


def choice(choices: Tuple[str, ...], meaning: str) -> Spec:
    return Spec("choice", meaning, choices=tuple(choices))


# Choices of enumerated keys. Kept here as data (importing the modules that define them would import jax);
# tests/test_config_validation.py checks each against the code that reads it.
TD_TARGETS = ("q_learning", "double_q_learning", "munchausen")  # systems/dqn.py TD_ERRORS
DISTRIBUTIONAL_TD_TARGETS = ("q_learning", "double_q_learning")  # systems/distributional_dqn.py
DISTRIBUTIONS = ("categorical", "quantile")  # systems/distributional_dqn.py DISTRIBUTIONS
ACTIVATIONS = ("elu", "gelu", "relu", "silu", "tanh")  # networks/torsos.py
ENV_SUITES = ("gymnax", "brax", "jumanji")  # envs/factory.py AVAILABLE_SUITES
BRAX_BACKENDS = ("spring", "generalized", "positional", "mjx")
EVAL_METRICS = ("episode_return", "episode_length")  # what the evaluator measures per episode
NEPTUNE_MODES = ("async", "sync", "offline", "debug", "read-only")  # logging.py NEPTUNE_MODES
SAVED_PARAMS = ("best", "latest")  # checkpointing.load_eval_params
MUNCHAUSEN_KEYS = ("entropy_temperature", "munchausen_coefficient", "munchausen_clip_value_min")

LEARNING_RATE = "learning rate: 0 learns nothing and a negative rate climbs the loss"
POSITIVE_INT = "[1, inf)"

SPECS: Dict[str, Spec] = {
    # ---------------------------------------------------------------------------- arch (config/arch/anakin.yaml)
    "arch.seed": integer("[0, inf)", "the first seed; seed k of an N-seed run is arch.seed + k"),
    "arch.num_seeds": integer(POSITIVE_INT, "seeds trained side by side in one program"),
    "arch.total_num_envs": integer(POSITIVE_INT, "envs over all devices and batch slots"),
    "arch.total_timesteps": integer(POSITIVE_INT, "env steps per seed, warm-up included"),
    "arch.num_evaluation": integer(POSITIVE_INT, "evaluations spread over the run"),
    "arch.num_eval_episodes": integer(POSITIVE_INT, "episodes per evaluation"),
    "arch.update_batch_size": integer(POSITIVE_INT, "learner copies per device whose gradients are averaged"),
    "arch.evaluation_greedy": flag("evaluate with the policy's mode instead of sampling"),
    "arch.multihost": flag("start jax.distributed"),
    "arch.num_processes": integer("[1, inf)", "processes taking part, with arch.coordinator_address",
                                  nullable=True),
    "arch.process_id": integer("[0, inf)", "this process's index, 0 .. arch.num_processes - 1", nullable=True),
    "arch.multihost_init_timeout_seconds": integer(
        POSITIVE_INT, "seconds jax.distributed start-up waits for every process; null: the default",
        nullable=True),
    "arch.heartbeat_timeout_seconds": integer(
        POSITIVE_INT, "seconds of silence before jax.distributed declares a process dead; null: the default",
        nullable=True),
    "arch.collective_timeout_seconds": real(
        "(0, inf)", "seconds a process waits for its peers in a cross-process stage; null: the default",
        nullable=True),
    # ---------------------------------------------------------------------- system: shared by several systems
    "system.rollout_length": integer(POSITIVE_INT, "env steps per env in each update"),
    "system.warmup_rollout_length": integer("[0, inf)", "env steps per env filling the buffer before learning"),
    "system.epochs": integer(POSITIVE_INT, "on-policy passes over each rollout"),
    "system.num_minibatches": integer(POSITIVE_INT, "minibatches each epoch splits the rollout into"),
    "system.gradient_steps_per_update": integer(POSITIVE_INT, "gradient steps on sampled batches per update"),
    "system.total_batch_size": integer(POSITIVE_INT, "transitions sampled per gradient step, over all devices and "
                                                     "slots"),
    "system.total_buffer_size": integer(POSITIVE_INT, "replay capacity in transitions, over all devices and slots"),
    "system.n_step": integer(POSITIVE_INT, "steps summed into each return before bootstrapping"),
    "system.prioritized_replay": flag("sample transitions by priority"),
    "system.priority_exponent": real("[0, 1]", "the priority exponent: 0 samples uniformly"),
    "system.importance_sampling_exponent": real("[0, 1]", "the importance-sampling exponent: 1 corrects fully"),
    "system.actor_lr": real("(0, inf)", "the actor_network's " + LEARNING_RATE),
    "system.critic_lr": real("(0, inf)", "the critic_network's (a state value V) " + LEARNING_RATE),
    "system.q_lr": real("(0, inf)", "the q_network's (a Q-function) " + LEARNING_RATE),
    "system.alpha_lr": real("(0, inf)", "SAC's entropy temperature's " + LEARNING_RATE),
    "system.decay_learning_rates": flag("decay the learning rates linearly to 0 over the run"),
    "system.gamma": real("(0, 1]", "the discount"),
    "system.tau": real("(0, 1]", "how far the target moves towards the online network: 1 a hard copy"),
    "system.target_update_period": integer(POSITIVE_INT, "gradient steps between target moves"),
    "system.max_grad_norm": real("(0, inf)", "the global gradient-norm clip"),
    "system.normalize_observations": flag("normalise observations by running statistics"),
    # PPO
    "system.gae_lambda": real("[0, 1]", "GAE's lambda: 0 one-step TD, 1 Monte-Carlo"),
    "system.clip_eps": real("(0, inf)", "PPO's clipping range of the probability ratio and the value"),
    "system.ent_coef": real("[0, inf)", "the weight of the entropy bonus"),
    "system.vf_coef": real("(0, inf)", "the weight of the value loss: 0 would never train the critic"),
    "system.standardize_advantages": flag("standardise advantages per minibatch"),
    # PQN
    "system.reward_scale": real("(0, inf)", "the factor rewards are scaled by in the targets"),
    "system.q_lambda": real("[0, 1]", "Q(lambda)'s lambda: 0 one-step targets, 1 Monte-Carlo"),
    # DQN family
    "system.td_target": choice(TD_TARGETS, "the regression target"),
    "system.epsilon_start": real("[0, 1]", "the initial exploration probability"),
    "system.epsilon_end": real("[0, 1]", "the final exploration probability"),
    "system.epsilon_decay_fraction": real("[0, 1]", "the fraction of the env-step budget over which epsilon decays"),
    "system.huber_delta": real("[0, inf)", "the Huber delta: 0 for the squared error (QR-DQN: plain quantile "
                                           "regression)"),
    "system.regularization_weight": real("[0, inf)", "DQN-Reg's weight of Q(s, a) in the loss: 0 for none"),
    "system.entropy_temperature": real("(0, inf)", "M-DQN's softmax temperature"),
    "system.munchausen_coefficient": real("[0, 1]", "M-DQN's weight of the log-policy bonus"),
    "system.munchausen_clip_value_min": real("(-inf, 0]", "M-DQN's lower clip of the log-policy, which is <= 0"),
    "system.distribution": choice(DISTRIBUTIONS, "how the return distribution is represented"),
    # continuous control
    "system.num_critics": integer(POSITIVE_INT, "Q-networks whose minimum is the target"),
    "system.init_alpha": real("(0, inf)", "SAC's initial entropy temperature, whose log is learnt"),
    "system.policy_frequency": integer(POSITIVE_INT, "Q-network steps per actor update"),
    "system.target_policy_noise": real("[0, inf)", "the std of target-policy smoothing noise: 0 for none"),
    "system.target_noise_clip": real("[0, inf)", "the bound of target-policy smoothing noise"),
    "system.exploration_noise": real("[0, inf)", "the std of the Gaussian acting noise in [-1, 1]"),
    # ---------------------------------------------------------------- network (config/network/*.yaml; any head)
    "network.*.pre_torso.layer_sizes": int_list(POSITIVE_INT, "the hidden layers' widths"),
    "network.*.pre_torso.activation": choice(ACTIVATIONS, "the hidden layers' activation"),
    "network.*.pre_torso.use_layer_norm": flag("LayerNorm after every hidden layer"),
    "network.*.*.num_atoms": integer("[2, inf)", "the atoms of the categorical support"),
    "network.*.*.v_min": real("(-inf, inf)", "the lowest return of the categorical support"),
    "network.*.*.v_max": real("(-inf, inf)", "the highest return of the categorical support"),
    "network.*.*.num_quantiles": integer(POSITIVE_INT, "the return quantiles per action"),
    "network.*.*.dueling": flag("separate value and advantage streams"),
    "network.*.*.noisy": flag("noisy layers in the head"),
    # ----------------------------------------------------------------------------- env (config/env/*/*.yaml)
    "env.suite": choice(ENV_SUITES, "the environment suite"),
    "env.eval_metric": choice(EVAL_METRICS, "the evaluation metric"),
    "env.solved_return": real("(-inf, inf)", "the return that counts as solved; null: none", nullable=True),
    "env.kwargs.backend": choice(BRAX_BACKENDS, "brax's physics pipeline"),
    "env.max_episode_steps": integer(POSITIVE_INT, "the time limit in steps, a truncation; null: the suite's own",
                                     nullable=True),
    # ------------------------------------------------------------------------- logger (config/logger/default.yaml)
    "logger.use_console": flag("log to the console"),
    "logger.use_json": flag("write metrics.json"),
    "logger.kind.tensorboard.enabled": flag("write TensorBoard scalars"),
    "logger.kind.neptune.enabled": flag("log to Neptune"),
    "logger.kind.neptune.mode": choice(NEPTUNE_MODES, "Neptune's connection mode"),
    "logger.checkpointing.save_model": flag("save a checkpoint at each evaluation"),
    "logger.checkpointing.keep_last": integer(POSITIVE_INT, "the checkpoints kept, besides the best"),
    "logger.checkpointing.resume": flag("continue the run saved in logger.checkpointing.directory"),
    # ---------------------------------------------------------------------------- evaluate (config/evaluate.yaml)
    "params": choice(SAVED_PARAMS, "which saved params to evaluate"),
    "num_episodes": integer(POSITIVE_INT, "episodes to evaluate"),
    "seed": integer("[0, inf)", "the evaluation's own seed"),
    "greedy": flag("evaluate with the policy's mode; null: as the run evaluated", nullable=True),
}

# String keys with no range (names, paths, addresses, `_target_`s), exempt on purpose. A code path that reads
# them reports a bad one itself (an unknown scenario, a missing checkpoint).
FREE_FORM: Dict[str, str] = {
    "system.system_name": "the name the run is logged under",
    "arch.coordinator_address": "HOST:PORT of process 0",
    "env.scenario.name": "the suite's environment name",
    "network.*.*._target_": "the module a network part is built by",
    "logger.base_exp_path": "the run directory outside Hydra",
    "logger.kind.neptune.project": "WORKSPACE/PROJECT",
    "logger.kind.neptune.tags": "Neptune tags",
    "logger.checkpointing.directory": "where checkpoints go",
    "logger.checkpointing.resume_from": "a checkpoint to continue from",
    "logger.checkpointing.load_params_from": "a checkpoint whose params start the run",
    "checkpoint": "the checkpoint to evaluate",
}


def _matches(pattern: str, key: str) -> bool:
    pattern_parts, key_parts = pattern.split("."), key.split(".")
    return len(pattern_parts) == len(key_parts) and all(
        p == "*" or p == k for p, k in zip(pattern_parts, key_parts))


def _lookup(table: Mapping[str, Any], key: str) -> Optional[Any]:
    if key in table:
        return table[key]
    return next((value for pattern, value in table.items() if "*" in pattern and _matches(pattern, key)), None)


def spec_of(key: str) -> Optional[Spec]:
    """The spec of a dotted key, or None when the table has none (FREE_FORM keys included)."""
    return _lookup(SPECS, key)


def is_free_form(key: str) -> bool:
    return _lookup(FREE_FORM, key) is not None


MISSING = "???"


def leaves(config: Any) -> Iterator[Tuple[str, Any]]:
    """(dotted key, value) of every leaf, in the config's order; lists are leaves; `???` stays `"???"`."""
    if isinstance(config, DictConfig):
        try:
            config = OmegaConf.to_container(config, resolve=True, throw_on_missing=False)
        except Exception:  # an interpolation that cannot resolve here: check the raw values
            config = OmegaConf.to_container(config, resolve=False, throw_on_missing=False)

    def walk(node: Mapping[str, Any], prefix: str) -> Iterator[Tuple[str, Any]]:
        for name, value in node.items():
            key = f"{prefix}{name}"
            if isinstance(value, Mapping):
                yield from walk(value, key + ".")
            else:
                yield key, value

    yield from walk(config, "")


def unranged_keys(config: Any) -> List[str]:
    """Leaves with neither a spec nor a FREE_FORM entry: what the completeness test refuses."""
    return [key for key, _ in leaves(config) if spec_of(key) is None and not is_free_form(key)]


def show(value: Any) -> str:
    """A value as it would be written on the command line."""
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(show(item) for item in value) + "]"
    return str(value)


def check_key(key: str, value: Any) -> Optional[str]:
    """One line saying what is wrong with `key=value`, or None (also for keys the table does not know)."""
    if value == MISSING:
        meaning = _lookup(FREE_FORM, key) or (spec_of(key).meaning if spec_of(key) else "")
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


def system_name_of(config: Any) -> Optional[str]:
    system = config.get("system") if isinstance(config, Mapping) else None
    name = system.get("system_name") if isinstance(system, Mapping) else None
    return None if name is None else str(name)


# ------------------------------------------------------------------------------------------ cross-key checks

def _buffer_holds_a_batch(values: Mapping[str, Any]) -> Optional[str]:
    buffer_size, batch_size = values.get("system.total_buffer_size"), values.get("system.total_batch_size")
    if buffer_size is not None and batch_size is not None and buffer_size < batch_size:
        return (f"system.total_buffer_size={buffer_size} is smaller than system.total_batch_size={batch_size}: the "
                f"replay buffer must hold at least one batch; set system.total_buffer_size to at least {batch_size}.")
    return None


def _epsilon_decays(values: Mapping[str, Any]) -> Optional[str]:
    start, end = values.get("system.epsilon_start"), values.get("system.epsilon_end")
    if start is not None and end is not None and end > start:
        return (f"system.epsilon_end={show(end)} is above system.epsilon_start={show(start)}: epsilon decays, so "
                f"epsilon_end must be at most epsilon_start.")
    return None


def _supports_are_intervals(values: Mapping[str, Any]) -> Optional[str]:
    for key, v_min in values.items():
        if not key.startswith("network.") or not key.endswith(".v_min"):
            continue
        head = key[: -len(".v_min")]
        v_max = values.get(head + ".v_max")
        if v_min is not None and v_max is not None and not v_min < v_max:
            return (f"{head}.v_min={show(v_min)} is not below {head}.v_max={show(v_max)}: the categorical support "
                    f"[v_min, v_max] needs v_min < v_max.")
    return None


def _process_id_in_range(values: Mapping[str, Any]) -> Optional[str]:
    process_id, num_processes = values.get("arch.process_id"), values.get("arch.num_processes")
    if process_id is not None and num_processes is not None and process_id >= num_processes:
        return (f"arch.process_id={process_id} is out of range: with arch.num_processes={num_processes} it must be "
                f"in 0 .. {num_processes - 1}.")
    return None


def _td_target_fits_the_system(values: Mapping[str, Any]) -> Optional[str]:
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


def _n_step_fits_the_first_rollout(values: Mapping[str, Any]) -> Optional[str]:
    n_step, rollout = values.get("system.n_step"), values.get("system.rollout_length")
    warmup = values.get("system.warmup_rollout_length") or 0
    if n_step is not None and rollout is not None and warmup + rollout < n_step:
        return (f"system.n_step={n_step} is longer than system.warmup_rollout_length + system.rollout_length = "
                f"{warmup + rollout}: no full n-step sequence exists when learning starts.")
    return None


CROSS_KEY_CHECKS: Tuple[Callable[[Mapping[str, Any]], Optional[str]], ...] = (
    _buffer_holds_a_batch, _epsilon_decays, _supports_are_intervals, _process_id_in_range,
    _td_target_fits_the_system, _n_step_fits_the_first_rollout)


def problems(config: Any) -> List[str]:
    """Every problem of a composed config, one line each: key by key in config order, then the cross-key rules
    (those only once every key they read is valid on its own)."""
    values = dict(leaves(config))
    system_name = system_name_of(config)
    found = [line for line in (renamed_key_problem(key, system_name) for key in values) if line]
    found += [line for line in (check_key(key, value) for key, value in values.items()) if line]
    if not found:
        found = [line for line in (check(values) for check in CROSS_KEY_CHECKS) if line]
    return found


def validate(config: Any) -> None:
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
