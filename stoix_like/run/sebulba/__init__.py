"""arch=sebulba: actor threads step CPU envs and feed learner devices; the same systems, budget, loggers,
checkpoints and evaluation as Anakin (docs/ARCHITECTURE.md).

threads.py      the supervisor: one stop signal, the first error of any thread, bounded queue hand-offs, shutdown
actors.py       versioned params for the actors, and one actor thread's loop (rollouts of fixed length)
evaluation.py   exactly arch.num_eval_episodes episodes on CPU eval envs of their own
loop.py         the run: budget → envs → setup → resume? → [updates → log → evaluate → checkpoint] × N → absolute
"""

from __future__ import annotations

from omegaconf import DictConfig


def is_sebulba(config: DictConfig) -> bool:
    """config/arch/sebulba.yaml is the arch option with actor devices (the two share the rest of the arch keys)."""
    return "actor_device_ids" in config.arch
