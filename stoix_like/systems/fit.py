"""Whether the `system=` and `network=` options composed for `python -m experiments.<algo>` fit that algorithm.

Another algorithm's option composes without complaint, since every config group is typed by one shared schema, and
would fail only later, far from its cause: `experiments.ppo network=mlp_dqn` in a traceback about a missing
`network.actor_network`, `experiments.ppo system=dqn` in a budget error about DQN's warm-up. Both are refused here
in one line before anything loads:

- a system option fits when the registry trains its `system_name` with the algorithm's own module (the DQN
  variants share one, as do TD3 and DDPG);
- a network option fits when it has every network the algorithm's default option has (`actor_network` and
  `critic_network` for PPO); a recurrent network for a feed-forward system, or the reverse, is left to validation,
  which names that mismatch; what the networks hold inside is checked where they are built.
"""

from __future__ import annotations

import os
from typing import Optional

from omegaconf import DictConfig, ListConfig, OmegaConf

from stoix_like.config.compose import CONFIG_DIR, available_options
from stoix_like.config.validation import RECURRENT_SYSTEMS
from stoix_like.systems import MODULE_OF


def misfit(algorithm: str, config: DictConfig, network_option: Optional[str]) -> Optional[str]:
    """One line naming the chosen option that belongs to another algorithm, and the options that fit, or None.
    `network_option` is the `network=` choice Hydra composed (None when unknown, e.g. a config built in code)."""
    return _system_misfit(algorithm, config) or _network_misfit(algorithm, config, network_option)


def _system_misfit(algorithm: str, config: DictConfig) -> Optional[str]:
    module = MODULE_OF.get(algorithm)
    if module is None:  # not an algorithm's entry (`experiments.evaluate`)
        return None
    system_name = str(OmegaConf.select(config, "system.system_name", default=algorithm))
    if MODULE_OF.get(system_name, module) == module:
        return None
    fitting = [name for name in available_options("system") if MODULE_OF.get(name) == module]
    return (f"system={system_name} is trained by experiments.{system_name}, not by experiments.{algorithm}: run "
            f"python -m experiments.{system_name}, or choose {' / '.join('system=' + name for name in fitting)}.")


def _network_misfit(algorithm: str, config: DictConfig, network_option: Optional[str]) -> Optional[str]:
    default_option = _default_network_option(algorithm)
    if default_option is None or network_option in (None, default_option):
        return None
    if _has_recurrent_core(config.network) != (algorithm in RECURRENT_SYSTEMS):
        return None  # validation names that mismatch more exactly (a hidden state the system would not carry)
    needed = _network_names(default_option)
    missing = [name for name in needed if name not in config.network]
    if not missing:
        return None
    fitting = [option for option in available_options("network")
               if all(name in _network_names(option) for name in needed)]
    return (f"network={network_option} has no {missing[0]}, which {algorithm} builds (its networks: "
            f"{', '.join(needed)}); choose {' / '.join('network=' + option for option in fitting)}.")


def _has_recurrent_core(network: DictConfig) -> bool:
    return any(isinstance(block, DictConfig) and "recurrent_core" in block for block in network.values())


def _default_network_option(algorithm: str) -> Optional[str]:
    """The `network:` entry of `config/<algorithm>.yaml`'s defaults list."""
    path = os.path.join(CONFIG_DIR, f"{algorithm}.yaml")
    if not os.path.exists(path):
        return None
    for entry in _defaults_of(OmegaConf.load(path)):
        if isinstance(entry, DictConfig) and "network" in entry:
            return str(entry["network"])
    return None


def _defaults_of(spec: DictConfig | ListConfig) -> ListConfig:
    """A config file's defaults list (empty if it has none)."""
    defaults = spec.get("defaults") if isinstance(spec, DictConfig) else None
    return defaults if isinstance(defaults, ListConfig) else ListConfig([])


def _network_names(option: str) -> list[str]:
    """The networks (top-level blocks) a network option defines, through the options it extends."""
    spec = OmegaConf.load(os.path.join(CONFIG_DIR, "network", f"{option}.yaml"))
    names = []
    for parent in _defaults_of(spec):
        if isinstance(parent, str) and parent != "_self_":
            names += _network_names(parent)
    names += [str(key) for key, value in spec.items() if key != "defaults" and isinstance(value, DictConfig)]
    return list(dict.fromkeys(names))
