"""Statistics of a population of seeds: what a learning claim is made of.

One seed's return says how lucky that trajectory was: XLA's CPU code differs between processors, so the
"same" seed is another seed on another machine. A claim is therefore made on several seeds trained in one
program (`arch.num_seeds`) and summarised robustly: the interquartile mean (IQM, the mean of the middle half,
as in Agarwal et al. 2021), a 95% percentile-bootstrap interval around it, and how many seeds solved the task.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Sequence, Tuple

import numpy as np

BOOTSTRAP_RESAMPLES = 5000
CONFIDENCE = 0.95


def interquartile_mean(values: Sequence[float]) -> float:
    """Mean of the values left after trimming the lowest and highest 25% (rounded down on each side)."""
    from scipy import stats  # here, not at the top: scipy.stats takes 1.8 s to import, and a run summarises once

    return float(stats.trim_mean(np.asarray(values, dtype=np.float64), proportiontocut=0.25))


def bootstrap_interval(values: Sequence[float], confidence: float = CONFIDENCE,
                       resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> Tuple[float, float]:
    """Percentile-bootstrap interval of the IQM: seeds resampled with replacement, a fixed RNG (reproducible)."""
    from scipy import stats  # see interquartile_mean

    array = np.asarray(values, dtype=np.float64)
    rng = np.random.default_rng(seed)
    resampled = array[rng.integers(0, len(array), size=(resamples, len(array)))]
    iqms = stats.trim_mean(np.sort(resampled, axis=1), proportiontocut=0.25, axis=1)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(iqms, [tail, 1.0 - tail])
    return float(low), float(high)


class PopulationSummary(NamedTuple):
    seeds: Tuple[int, ...]
    returns: Tuple[float, ...]  # per seed, in seed order
    iqm: float
    interval: Tuple[float, float]  # 95% bootstrap interval of the IQM
    solved_return: Optional[float]  # the task's threshold a seed must reach to count as solved, if it has one
    num_solved: Optional[int]

    def describe(self, digits: int = 1) -> str:
        """In words; `digits` after the point (returns in [0, 1], success rates, need more than one)."""
        low, high = self.interval
        solved = ("" if self.num_solved is None else
                  f", {self.num_solved}/{len(self.seeds)} solved (≥ {self.solved_return:g})")
        return (f"IQM {self.iqm:.{digits}f} [95% CI {low:.{digits}f}, {high:.{digits}f}] over {len(self.seeds)} seeds "
                f"{self.seeds[0]}..{self.seeds[-1]}{solved}; per seed: "
                + ", ".join(f"{r:.{digits}f}" for r in self.returns))


def summarize(returns: Sequence[float], seeds: Sequence[int], solved_return: Optional[float]) -> PopulationSummary:
    if len(returns) != len(seeds) or not len(returns):
        raise ValueError(f"{len(returns)} returns for {len(seeds)} seeds")
    return PopulationSummary(
        seeds=tuple(int(s) for s in seeds), returns=tuple(float(r) for r in returns),
        iqm=interquartile_mean(returns), interval=bootstrap_interval(returns),
        solved_return=None if solved_return is None else float(solved_return),
        num_solved=None if solved_return is None else int(sum(r >= solved_return for r in returns)))
