"""Interval estimates for a report, by rliable (Agarwal et al. 2021): stratified-bootstrap percentile intervals.

Scores are arranged as rliable expects, `(runs, tasks, ...)`, with one task: a report compares groups within one
env, so the stratified bootstrap resamples seeds. rliable's bootstrap draws from numpy's global generator;
`seeded` fixes it for the call and restores it after, so a report rebuilt from the same logs is the same report.
Each group (or compared pair) is bootstrapped in a call of its own, seeded from its label: its interval then
depends on its own runs alone, not on which other groups the logs hold (one stream shared by all groups made
adding a group move every later group's interval).

Where each statistic comes from: the report (figures, report.md, README's table) uses rliable here; the run's
closing `population:` line and the learning tests' verdicts use `stoix_like/claims/population.py`, which needs no extra.
Both compute the IQM with scipy's `trim_mean(·, 0.25)` (rliable's `aggregate_iqm` is that call), so their point
estimates are equal; their 95% intervals are both percentile bootstraps over seeds but draw other resamples, so
they can differ in the last digit (tests/test_report.py checks the first and bounds the second).
"""

from __future__ import annotations

import contextlib
import zlib
from typing import Callable, Dict, Iterator, List, NamedTuple, Sequence, Tuple

import numpy as np
from rliable import library as rly
from rliable import metrics
from scipy import stats

DEFAULT_REPS = 2000  # bootstrap resamples; rliable's sample-efficiency examples use 2000
CONFIDENCE = 0.95
AGGREGATES: Dict[str, Callable[[np.ndarray], float]] = {
    "IQM": metrics.aggregate_iqm, "Median": metrics.aggregate_median, "Mean": metrics.aggregate_mean}
# with more groups than this in one env, each is compared with the best by IQM rather than every pair
ALL_PAIRS_UP_TO = 5


class Estimate(NamedTuple):
    point: float
    low: float
    high: float


class CurveEstimate(NamedTuple):
    steps: np.ndarray  # (evaluations,)
    point: np.ndarray  # (evaluations,)
    low: np.ndarray
    high: np.ndarray


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


def _interval_estimates(groups: Dict[str, object], statistic: Callable, reps: int, seed: int
                        ) -> Tuple[Dict[str, np.ndarray], Dict[str, np.ndarray]]:
    """rliable's `get_interval_estimates` over `groups`, one group at a time, each seeded by `seed` and its label:
    (points, intervals) by label, as rliable returns them."""
    points, intervals = {}, {}
    for label, scores in groups.items():
        with seeded((seed + zlib.crc32(label.encode())) % 2**32):
            point, interval = rly.get_interval_estimates({label: scores}, statistic, reps=reps,
                                                         confidence_interval_size=CONFIDENCE)
        points[label], intervals[label] = point[label], interval[label]
    return points, intervals


def _as_runs_by_task(values: np.ndarray) -> np.ndarray:
    """(seeds, ...) -> (seeds, 1 task, ...): rliable's layout."""
    return np.asarray(values, np.float64)[:, None]


def aggregate_estimates(returns: Dict[str, np.ndarray], reps: int = DEFAULT_REPS, seed: int = 0
                        ) -> Dict[str, Dict[str, Estimate]]:
    """label -> {"IQM" | "Median" | "Mean" -> Estimate} of the groups' end-of-run returns, each `(seeds,)`."""
    def all_aggregates(scores: np.ndarray) -> np.ndarray:
        return np.array([aggregate(scores) for aggregate in AGGREGATES.values()])

    points, intervals = _interval_estimates(
        {label: _as_runs_by_task(values) for label, values in returns.items()}, all_aggregates, reps, seed)
    return {label: {name: Estimate(float(points[label][i]), float(intervals[label][0, i]),
                                   float(intervals[label][1, i])) for i, name in enumerate(AGGREGATES)}
            for label in returns}


def _iqm(scores: np.ndarray) -> np.ndarray:
    """(seeds, 1) -> (1,): scipy's trim_mean(·, 0.25) of the scores, without its per-call argument handling, which
    cost 40x the arithmetic: README's learning table bootstraps 152 populations 2,000 times each."""
    flat = np.sort(scores.ravel())
    cut = int(0.25 * flat.size)  # as trim_mean: this many values cut from each end
    return np.array([flat[cut:flat.size - cut].mean()])


def iqm_estimate(returns: np.ndarray, label: str, reps: int = DEFAULT_REPS, seed: int = 0) -> Estimate:
    """The IQM of one group's end-of-run returns `(seeds,)` and its interval: `aggregate_estimates(...)[label]
    ["IQM"]` (the same resamples, which do not depend on the statistic), at a fraction of the cost."""
    points, intervals = _interval_estimates({label: _as_runs_by_task(returns)}, _iqm, reps, seed)
    return Estimate(float(points[label][0]), float(intervals[label][0, 0]), float(intervals[label][1, 0]))


def _iqm_per_step(scores: np.ndarray) -> np.ndarray:
    """(seeds, 1, steps) -> (steps,): `metrics.aggregate_iqm` at each step, as one trim_mean over the seed axis
    (rliable's aggregate_iqm is scipy's trim_mean(·, 0.25); one call for all steps is ~10× faster)."""
    return stats.trim_mean(scores.reshape(scores.shape[0] * scores.shape[1], -1), proportiontocut=0.25, axis=0)


def _mean_per_step(scores: np.ndarray) -> np.ndarray:
    return scores.mean(axis=(0, 1))


CURVE_STATISTICS = {"IQM": _iqm_per_step, "Mean": _mean_per_step}


def curve_estimates(curves: Dict[str, Tuple[np.ndarray, np.ndarray]], statistic: str, reps: int = DEFAULT_REPS,
                    seed: int = 0) -> Dict[str, CurveEstimate]:
    """label -> the statistic ("IQM" or "Mean") over seeds at each evaluation step, with its interval.
    `curves`: label -> (steps (evaluations,), returns (seeds, evaluations))."""
    points, intervals = _interval_estimates(
        {label: _as_runs_by_task(returns) for label, (_, returns) in curves.items()}, CURVE_STATISTICS[statistic],
        reps, seed)
    return {label: CurveEstimate(steps, points[label], intervals[label][0], intervals[label][1])
            for label, (steps, _) in curves.items()}


def comparison_pairs(iqm_order: Sequence[str]) -> List[Tuple[str, str]]:
    """(X, Y) pairs to compare, X first by IQM: every pair among a few groups, else each against the best."""
    if len(iqm_order) <= ALL_PAIRS_UP_TO:
        return [(x, y) for i, x in enumerate(iqm_order) for y in iqm_order[i + 1:]]
    return [(iqm_order[0], y) for y in iqm_order[1:]]


def improvement_estimates(returns: Dict[str, np.ndarray], pairs: Sequence[Tuple[str, str]],
                          reps: int = DEFAULT_REPS, seed: int = 0) -> Dict[Tuple[str, str], Estimate]:
    """(X, Y) -> P(X > Y): the probability that a seed of X ends above a seed of Y (ties count half), with the
    interval of rliable's independent stratified bootstrap (each group's seeds resampled on their own)."""
    def improvement(scores_x: np.ndarray, scores_y: np.ndarray) -> np.ndarray:
        return np.array([metrics.probability_of_improvement(scores_x, scores_y)])

    names = {pair: f"{pair[0]} > {pair[1]}" for pair in pairs}
    points, intervals = _interval_estimates(
        {names[(x, y)]: [_as_runs_by_task(returns[x]), _as_runs_by_task(returns[y])] for x, y in pairs},
        improvement, reps, seed)
    return {pair: Estimate(float(points[names[pair]][0]), float(intervals[names[pair]][0, 0]),
                           float(intervals[names[pair]][1, 0])) for pair in pairs}
