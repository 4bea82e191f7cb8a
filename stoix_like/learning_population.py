"""Train one algorithm's population of seeds in one program and judge it against its learning target.

Shared by the learning tests and `benchmarks/learning_table.py`, so that both make exactly the same claim.
"""

from __future__ import annotations

import time
from typing import Callable, List, NamedTuple, Optional, Sequence

from omegaconf import DictConfig

from stoix_like import experiment
from stoix_like.learning_targets import LearningTarget, shortfalls, target_of
from stoix_like.population import PopulationSummary, summarize
from stoix_like.systems import system_module


class PopulationRun(NamedTuple):
    algorithm: str
    target: LearningTarget
    summary: PopulationSummary
    steps_per_seed: int
    wall_seconds: float
    problems: List[str]  # what the population misses of its target; empty when it meets it

    def describe(self) -> str:
        verdict = "meets its target" if not self.problems else "MISSES its target: " + "; ".join(self.problems)
        return (f"{self.algorithm} on {self.target.env}, {self.steps_per_seed:,} steps per seed, "
                f"{self.wall_seconds:.0f}s: {self.summary.describe()} -> {verdict}")


def train_population(algorithm: str, compose: Callable[[str, Sequence[str]], DictConfig], first_seed: int,
                     num_seeds: int = 8, overrides: Sequence[str] = (), env: Optional[str] = None) -> PopulationRun:
    """Seeds first_seed .. first_seed + num_seeds - 1 of `config/<algorithm>.yaml` on `env` (its reference task
    when None; the task's tuned defaults come with `env=`), plus overrides, in one program.

    `compose(config_name, overrides)` builds the config (the tests' fixture, or Hydra's compose API).
    """
    target = target_of(algorithm, env)
    config = compose(algorithm, [f"env={target.env}", f"arch.seed={first_seed}", f"arch.num_seeds={num_seeds}",
                                 *overrides])
    start = time.perf_counter()
    result = experiment.train(config, system_module(algorithm).learner_setup, algorithm)
    wall_seconds = time.perf_counter() - start
    seeds = experiment.seeds_of(config)
    summary = summarize(result.absolute_returns, seeds, target.solved_return)
    return PopulationRun(algorithm, target, summary, result.steps_done, wall_seconds, shortfalls(target, summary))
