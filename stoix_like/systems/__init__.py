"""One module per algorithm; each holds only what is particular to that algorithm.

`MODULE_OF` names, for each `config/<algo>.yaml`, the module whose `learner_setup` trains it: variants that are
configs of one system (DQN, Double DQN, M-DQN, DQN-Reg) share a module.
"""

from __future__ import annotations

import importlib
from types import ModuleType

MODULE_OF = {
    "ppo": "ppo", "pqn": "pqn",
    "dqn": "dqn", "ddqn": "dqn", "mdqn": "dqn", "dqn_reg": "dqn",
    "c51": "distributional_dqn", "qr_dqn": "distributional_dqn", "rainbow": "distributional_dqn",
    "sac": "sac", "td3": "td3", "ddpg": "td3", "d4pg": "d4pg",
}


def system_module(algorithm: str) -> ModuleType:
    """The system module of `config/<algorithm>.yaml` (imported on demand: importing one loads no other)."""
    return importlib.import_module(f"stoix_like.systems.{MODULE_OF[algorithm]}")
