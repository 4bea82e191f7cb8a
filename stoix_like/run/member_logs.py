"""A sweep in one program logs each member as its own run, where a Hydra multirun would have put it.

A multirun `-m system.actor_lr=1e-4,3e-4 arch.seed=42,43` writes one directory per job, `<sweep dir>/<job>_seed<seed>`
(config/hydra_settings.yaml), each with the job's `metrics.json` and `run.json`. `MemberLogs` writes the same for
every member of `sweep.system.actor_lr=[1e-4,3e-4] arch.num_seeds=2`, under the run's directory: member k's
directory is `<run dir>/<k>_seed<seed>`, and its `run.json` holds the config of the single run it stands for. So
`python -m experiments.report <run dir>` groups the members by grid point as it groups a multirun's jobs (the
swept keys differ, seeds aside), with no code of its own. The program's own lines (what it trains, compile time,
each member's evaluations labelled by its grid point) go to the console and `<run dir>/<algorithm>.log`.
"""

from __future__ import annotations

import copy
import os
from typing import Dict, Mapping, Optional, Sequence

import numpy as np
from omegaconf import DictConfig, open_dict

from stoix_like.config.sweep import Member
from stoix_like.run import run_record
from stoix_like.run.logging import ConsoleLogger, Logger
from stoix_like.runtime import parallel
from stoix_like.types import JSONValue


def member_dir(run_dir: str, member: Member) -> str:
    """Where a Hydra multirun puts job `member.number` (config/hydra_settings.yaml's `hydra.sweep.subdir`)."""
    return os.path.join(run_dir, f"{member.number}_seed{member.seed}")


class MemberLogs(Logger):
    """The `Logger` the experiment loop talks to in a sweep: each call about member k goes to member k's own
    `Logger` (its metrics, record, console file and scalar sinks, in its own directory); messages and a line per
    evaluation go to the program's console."""

    def __init__(self, config: DictConfig, run_dir: str, algorithm: str, members: Sequence[Member]):
        # Not Logger's __init__: this logger's sinks are its members' loggers and the program's console.
        self.run_dir = run_dir
        self.enabled = parallel.is_main_process()
        self._failed: set[int] = set()
        self._members = list(members)
        self._loggers = [Logger(_quiet(member.config), member_dir(run_dir, member), algorithm, [member.seed])
                         for member in self._members]
        self.console: Optional[ConsoleLogger] = (
            ConsoleLogger(os.path.join(run_dir, f"{algorithm}.log"), show=bool(config.logger.use_console))
            if self.enabled else None)
        self.json = None
        self.record = None
        self._scalar_sinks = []

    def finish(self, timings: run_record.Timings, resumed: bool) -> None:
        """Each member's record gets its share of the program's timings (1/N each), so that a report summing a
        grid point's runs counts the program's time once over all its members."""
        share = len(self._members)
        for logger in self._loggers:
            logger.finish(run_record.Timings(timings.wall_seconds / share, timings.compile_seconds / share,
                                             timings.learn_seconds / share, timings.learned_steps // share), resumed)

    def progress(self, seed: int, step: int, total: int, train_return: float, steps_per_second: float,
                 eta_seconds: float, train_means: Mapping[str, float], member: int = 0) -> None:
        self._loggers[member].progress(seed, step, total, train_return, steps_per_second, eta_seconds, train_means)

    def evaluation(self, label: str, seed: int, step: int, per_episode: Mapping[str, np.ndarray],
                   extra: Mapping[str, float], member: int = 0) -> Dict[str, Dict[str, float]]:
        stats = self._loggers[member].evaluation(label, seed, step, per_episode, extra)
        self._call(self.console, "evaluation", f"{label} {self._members[member].label()}", step, stats, seed)
        return stats

    def json_state(self) -> Optional[Dict[str, JSONValue]]:
        return None  # a sweep saves no checkpoint (validation refuses one), so no log history is kept in one

    def restore_json(self, state: Optional[Dict[str, JSONValue]]) -> None:
        del state

    def close(self) -> None:
        for logger in self._loggers:
            logger.close()
        self._call(self.console, "close")


def _quiet(config: DictConfig) -> DictConfig:
    """A member's config with its console lines kept to its own log file: the program's console shows one line per
    member and evaluation instead (`logger.*` keys never tell two runs apart in a report)."""
    quiet = copy.deepcopy(config)
    with open_dict(quiet):
        quiet.logger.use_console = False
    return quiet

