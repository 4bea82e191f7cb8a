"""Train one algorithm's population of seeds in one program and judge it against its learning target.

Shared by the learning tests and `benchmarks/learning_table.py`, so that both make exactly the same claim.
"""

from __future__ import annotations

import time
from typing import Callable, List, NamedTuple, Optional, Sequence

from omegaconf import DictConfig

from stoix_like.run import experiment
from stoix_like.claims.learning_targets import MEMORYLESS_RETURN, LearningTarget, shortfalls, target_of
from stoix_like.claims.population import PopulationSummary, summarize
from stoix_like.systems import system_module


class PopulationRun(NamedTuple):
    algorithm: str
    target: LearningTarget
    summary: PopulationSummary  # the absolute returns: each seed's best params
    final: PopulationSummary  # the final returns: each seed's final params, over as many episodes
    steps_per_seed: int
    wall_seconds: float
    problems: List[str]  # what the population misses of its target, on either; empty when it meets it on both

    def describe(self) -> str:
        verdict = "meets its target" if not self.problems else "MISSES its target: " + "; ".join(self.problems)
        return (f"{self.algorithm} on {self.target.env}, {self.steps_per_seed:,} steps per seed, "
                f"{self.wall_seconds:.0f}s: absolute {self.summary.describe()}; final {self.final.describe()} "
                f"-> {verdict}")


def judge(target: LearningTarget, absolute: PopulationSummary, final: PopulationSummary) -> List[str]:
    """A target is met on both the best params (absolute) and the final params: a default that only reaches it at
    some evaluation along the way, and forgets, leaves a user with a policy that misses it."""
    return ([f"absolute: {problem}" for problem in shortfalls(target, absolute)]
            + [f"final: {problem}" for problem in shortfalls(target, final)])


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
    final = summarize(result.final_returns, seeds, target.solved_return)
    return PopulationRun(algorithm, target, summary, final, result.steps_done, wall_seconds,
                         judge(target, summary, final))


class MemoryComparison(NamedTuple):
    """Recurrent PPO and feed-forward PPO on a memory task, each a population of the same seeds and budget."""

    recurrent: PopulationRun
    feed_forward: PopulationSummary
    feed_forward_steps: int
    feed_forward_seconds: float
    memoryless_return: float
    problems: List[str]  # the recurrent population's shortfalls, and where feed-forward is not clearly below

    def describe(self) -> str:
        verdict = "memory matters" if not self.problems else "NOT SHOWN: " + "; ".join(self.problems)
        env = self.recurrent.target.env
        return (f"rec_ppo on {env}, {self.recurrent.steps_per_seed:,} steps per seed, "
                f"{self.recurrent.wall_seconds:.0f}s: {self.recurrent.summary.describe(3)}\n"
                f"ppo (feed-forward) on {env}, {self.feed_forward_steps:,} steps per seed, "
                f"{self.feed_forward_seconds:.0f}s: {self.feed_forward.describe(3)}\n"
                f"memoryless best {self.memoryless_return:g} -> {verdict}")


def compare_memory(compose: Callable[[str, Sequence[str]], DictConfig], env: str, first_seed: int,
                   num_seeds: int = 8) -> MemoryComparison:
    """Recurrent PPO's shipped defaults on the memory task `env` against feed-forward PPO's (their tuned configs
    for `env` give both the same budget). Memory is shown to matter when the recurrent population meets its target
    and the feed-forward one stays clearly below: its IQM under the target's floor and under the midpoint between
    the best a memoryless policy can do (learning_targets.MEMORYLESS_RETURN) and the recurrent IQM."""
    recurrent = train_population("rec_ppo", compose, first_seed, num_seeds, env=env)
    config = compose("ppo", [f"env={env}", f"arch.seed={first_seed}", f"arch.num_seeds={num_seeds}"])
    start = time.perf_counter()
    result = experiment.train(config, system_module("ppo").learner_setup, "ppo")
    seconds = time.perf_counter() - start
    feed_forward = summarize(result.absolute_returns, experiment.seeds_of(config), recurrent.target.solved_return)
    memoryless = MEMORYLESS_RETURN[env]
    problems = list(recurrent.problems)
    if result.steps_done < recurrent.steps_per_seed:
        problems.append(f"feed-forward trained {result.steps_done:,} steps, fewer than recurrent's "
                        f"{recurrent.steps_per_seed:,}")
    ceiling = min(recurrent.target.seed_floor, (memoryless + recurrent.summary.iqm) / 2)
    if feed_forward.iqm >= ceiling:
        problems.append(f"feed-forward IQM {feed_forward.iqm:.3f} is not clearly below: at least {ceiling:.3f}")
    return MemoryComparison(recurrent, feed_forward, result.steps_done, seconds, memoryless, problems)
