"""Bring a config saved under the old key names (checkpoints written before the one-vocabulary change) up to date.

`upgrade_saved_config(saved, algorithm, batch_slots)` renames every old key by `validation.RENAMED`, and adds
the keys that did not exist then with the values that reproduce what the old code did:

- `system_name` (ppo.yaml and pqn.yaml had none): the checkpoint's algorithm;
- PQN's `epsilon_start`: 1 (it was fixed at 1);
- `target_update_period`: SAC moved its targets every gradient step, TD3 / DDPG / D4PG with every actor update
  (every `policy_frequency` steps), and the DQN family with `tau < 1` every step (the period was ignored);
- `prioritized_replay` and its exponents where the system could not choose it (SAC, TD3, DDPG: off);
- `env.max_episode_steps`: null (the suite's own limit) unless an old suite key set it.

`add_later_keys(saved)` adds the keys that came after today's format (3) was first written, so every checkpoint
of it reads too: Anakin's `arch.rollout_unroll` is 1 (its acting loop was not unrolled; the value changes speed,
not results) and its `arch.seed_loop` vmap (its seeds were batched); either architecture's
`arch.reference_timesteps` / `reference_source` are null, `arch.pbt` is off, and SAC's `system.target_entropy_scale`
is 1 (its temperature aimed at −|A|). `upgrade_saved_config` applies it as well.

`batch_size` counted per (device, batch) slot; `total_batch_size` counts over all of them, so it becomes
`batch_size × batch_slots` (n_devices × arch.update_batch_size of the saved run). Keys the systems no longer
carry (C51's and Rainbow's unread `huber_loss_parameter` / `regularisation_weight`) are dropped. An up-to-date
config passes through unchanged. This module imports no jax.
"""

from __future__ import annotations

import copy
from typing import Dict, Iterator, Mapping, Tuple, cast

from omegaconf import DictConfig, OmegaConf

from stoix_like.config import validation
from stoix_like.config.spec import ConfigValue

# keys a system's old config may lack, with the value that reproduces the old behaviour
_OLD_REPLAY_DEFAULTS = {"prioritized_replay": False, "priority_exponent": 0.6, "importance_sampling_exponent": 0.4}
_DISTRIBUTIONAL_UNREAD = ("huber_loss_parameter", "regularisation_weight")


def upgrade_saved_config(saved: validation.Config, algorithm: str, batch_slots: int = 1) -> Dict[str, ConfigValue]:
    """A plain-dict copy of `saved` (a DictConfig or nested dict) with current key names and every current key.

    Args:
        saved: the composed config a checkpoint stored.
        algorithm: the checkpoint's registry name (`config/<algorithm>.yaml`), used where the config has no
            `system.system_name`.
        batch_slots: n_devices × arch.update_batch_size of the run that saved it (old `batch_size` was per slot).
    """
    config: Dict[str, ConfigValue] = (cast(Dict[str, ConfigValue], OmegaConf.to_container(saved, resolve=False))
                                      if isinstance(saved, DictConfig) else copy.deepcopy(dict(saved)))
    system = config.setdefault("system", {})
    system.setdefault("system_name", algorithm)
    name = str(system["system_name"])

    if "distribution" in system:  # C51, QR-DQN, Rainbow inherited DQN's loss keys without reading them
        for key in _DISTRIBUTIONAL_UNREAD:
            system.pop(key, None)
    _add_missing_keys(config, name)
    add_later_keys(config)
    if "batch_size" in system:
        system["batch_size"] = int(system["batch_size"]) * int(batch_slots)
    return _rename_keys(config, name)


def add_later_keys(saved: Dict[str, ConfigValue]) -> Dict[str, ConfigValue]:
    """`saved` (a plain dict, changed in place and returned) with the keys added since format 3 was first written,
    at the values that reproduce the run that saved it."""
    arch = saved.get("arch") or {}
    if "update_batch_size" in arch:  # Anakin: Sebulba's actor threads have no compiled acting loop
        arch.setdefault("rollout_unroll", 1)
        arch.setdefault("seed_loop", "vmap")  # every population before the key was batched
    if arch:  # a published reference budget only words a progress line: none, for runs saved before it
        arch.setdefault("reference_timesteps", None)
        arch.setdefault("reference_source", None)
        # runs saved before PBT trained no population
        arch.setdefault("pbt", {"interval": None, "fraction": 0.25, "resample_probability": 0.25, "ranges": {}})
    system = saved.get("system") or {}
    if system.get("system_name") == "sac":  # SAC's temperature aimed at −|A| before the key
        system.setdefault("target_entropy_scale", 1.0)
    return saved


def _add_missing_keys(config: Dict[str, ConfigValue], name: str) -> None:
    system, env = config["system"], config.setdefault("env", {})
    old_keys = set(system)
    if "training_epsilon" in old_keys:  # PQN
        system.setdefault("epsilon_start", 1.0)
    is_q_critic = "critic_lr" in old_keys and name in validation.Q_CRITIC_SYSTEMS
    if is_q_critic:
        if "policy_frequency" in old_keys:  # TD3, DDPG, D4PG: the targets moved with each actor update
            system.setdefault("target_update_period", int(system["policy_frequency"]))
        else:  # SAC: every gradient step
            system.setdefault("target_update_period", 1)
        for key, value in _OLD_REPLAY_DEFAULTS.items():
            system.setdefault("prioritised_replay" if key == "prioritized_replay" else key, value)
    if name in validation.DQN_FAMILY and "epochs" in old_keys and float(system.get("tau", 1.0)) < 1.0:
        system["target_update_period"] = 1  # Polyak averaging ignored the period: it moved every step
    kwargs = env.get("kwargs") or {}
    if "max_episode_steps" not in env and not ({"episode_length", "max_episode_steps"} & set(kwargs)):
        env["max_episode_steps"] = None


def _rename_keys(config: Dict[str, ConfigValue], name: str) -> Dict[str, ConfigValue]:
    flat = dict(_flatten(config))
    renamed: Dict[str, ConfigValue] = {}
    for key, value in flat.items():
        renamed[validation.new_name(key, name) or key] = value
    return _unflatten(renamed)


def _flatten(node: Mapping[str, ConfigValue], prefix: str = "") -> Iterator[Tuple[str, ConfigValue]]:
    for key, value in node.items():
        if isinstance(value, Mapping) and value:
            yield from _flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _unflatten(flat: Mapping[str, ConfigValue]) -> Dict[str, ConfigValue]:
    tree: Dict[str, ConfigValue] = {}
    for key, value in flat.items():
        *parents, leaf = key.split(".")
        node = tree
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = value
    return tree
