"""README's "On a GPU" brax table: PPO at brax's own published budget in one accelerator lease, ours beside brax's
trainer, rendered from the lease's committed logs (`benchmarks/brax_published_budget.py`).

Layout: `<root>/<task>/ours_<first seed>/` holds our run's logs (metrics.json, run.json, ppo.log) and
`<root>/<task>/brax_*.json` brax's seeds, one file per call of the benchmark (a lease may need two calls to finish
its seeds). A run the lease cut short stays a row: its cells say how far it got.

The comparison is on the *last evaluation*, which both trainers log for every seed (ours: 32 episodes; brax: its
evaluation's 128 envs), and on *learning throughput*, read from each side's own log: ours prints the steps per
second per seed of its seeds trained together; brax's is the steps between its second and last evaluations over
their seconds, one seed at a time. The reference return is brax's trainer's last-evaluation IQM; the last cell
gives the first evaluation at which our IQM over seeds reached it.
"""

from __future__ import annotations

import glob
import json
import os
import re
from typing import Dict, List, Optional

import numpy as np

from stoix_like.errors import ConfigError
from stoix_like.report import runs, statistics
from stoix_like.claims.population import interquartile_mean
from stoix_like.report.learning_table import estimate_cell, seed_range, table_row

HEADER = [
    "| task | trainer | seeds | steps per seed | last evaluation IQM [95% CI] | best evaluation IQM [95% CI] "
    "| learning steps/s | wall time | where our IQM reached brax's last |",
    "|---|---|---|---|---|---|---|---|---|"]
OURS_SPEED = re.compile(r"learning ran at ([\d,]+) steps/s per seed")
OURS_EXPECTED = re.compile(r"expected wall time: about (\S+) in all")
OURS_COMPILE = re.compile(r"compiled the learner in ([\d.]+)s")


def gpu_budget_table(root: str, reps: int = statistics.DEFAULT_REPS) -> str:
    """One row per side per task folder under `root` (ConfigError where a folder has no run of ours)."""
    lines = list(HEADER)
    for folder in sorted(glob.glob(os.path.join(root, "*", ""))):
        task = os.path.basename(os.path.dirname(folder))
        ours_dirs = sorted(glob.glob(os.path.join(folder, "ours_*")))
        if not ours_dirs:
            raise ConfigError(f"{folder}: no run of ours (ours_<first seed>/): run benchmarks/brax_published_budget.py")
        brax = _brax_seeds(folder)  # the task's reference, read once for every run of ours beside it
        reference = _iqm(np.asarray([curve[-1][1] for curve in brax["evaluations"]]), reps) if brax else None
        for ours_dir in ours_dirs:
            (group,) = runs.group_runs(runs.load_runs([ours_dir]))
            steps, returns = group.curves()
            lines.append(_ours_row(task, group, ours_dir, steps, returns, reference, reps))
        if brax:
            lines.append(_brax_row(task, brax, reps))
    return "\n".join(lines)


def _ours_row(task: str, group: runs.Group, ours_dir: str, steps: np.ndarray, returns: np.ndarray,
              reference: Optional[statistics.Estimate], reps: int) -> str:
    seeds = group.seed_numbers
    done = int(steps[-1])
    budget = max(int((run.record or {}).get("total_timesteps", done)) for run in group.runs)  # run.json's budget
    cut = "" if done >= budget else f" of {budget:,} (cut)"
    last = _iqm(returns[:, -1], reps)
    best = _iqm(returns.max(axis=1), reps)
    log = _read(os.path.join(ours_dir, "ppo.log"))
    speed_text = _found(OURS_SPEED, log)
    speed = None if speed_text is None else float(speed_text.replace(",", ""))
    speed_cell = "?" if speed is None else (
        f"{speed:,.0f} per seed, {len(seeds)} seeds at once ({speed * len(seeds):,.0f} in all)")
    finals = [seed.final_params_return for run in group.runs for seed in run.seeds]
    finished = [value for value in finals if value is not None]
    wall = (f"compiled in {_found(OURS_COMPILE, log)} s; after its first interval it expected "
            f"{_found(OURS_EXPECTED, log)} in all; ")
    if done < budget:
        wall += "cut by its time limit in the lease while learning"
    elif len(finished) < len(finals):
        wall += (f"cut by its time limit in the lease after learning, with the final params re-evaluated for "
                 f"{len(finished)} of {len(finals)} seeds")
    else:
        wall += "finished"
        if group.wall_seconds is not None:
            wall += f" in {group.wall_seconds:.0f} s"
    if reference is None:
        reached = "no brax run in this lease"
    else:
        iqms = [interquartile_mean(returns[:, k].tolist()) for k in range(returns.shape[1])]  # points: no interval needed
        first = next((k for k, value in enumerate(iqms) if value >= reference.point), None)
        reached = (f"not reached (last IQM {iqms[-1]:.1f} < {reference.point:.1f})" if first is None else
                   f"evaluation {first + 1} of {len(iqms)}, {int(steps[first]):,} steps per seed "
                   f"(IQM {iqms[first]:.1f} ≥ {reference.point:.1f})")
    return table_row([f"brax/{task}", "ours (ppo)", seed_range(seeds), f"{int(done):,}{cut}",
                      estimate_cell(last, 1), estimate_cell(best, 1), speed_cell, wall, reached])


def _brax_row(task: str, brax: Dict[str, list], reps: int) -> str:
    finals = np.asarray([curve[-1][1] for curve in brax["evaluations"]])
    bests = np.asarray([max(value for _, value, _ in curve[1:]) for curve in brax["evaluations"]])
    speeds = [(curve[-1][0] - curve[2][0]) / (curve[-1][2] - curve[2][2]) for curve in brax["evaluations"]]
    walls = brax["wall_seconds_per_seed"]
    steps = brax["evaluations"][0][-1][0]
    return table_row([f"brax/{task}", "brax.training PPO (notebook recipe)", seed_range(brax["seeds"]), f"{steps:,}",
                 estimate_cell(_iqm(finals, reps), 1), estimate_cell(_iqm(bests, reps), 1),
                 f"{np.median(speeds):,.0f} per seed, one seed at a time (median over seeds)",
                 f"{sum(walls):.0f} s for {len(walls)} seeds ({min(walls):.0f}-{max(walls):.0f} s each, "
                 "compilation included)", "the reference"])


def _brax_seeds(folder: str) -> Dict[str, list]:
    """brax's seeds in this folder, from every brax_*.json (refused where two files hold the same seed)."""
    pooled: Dict[str, list] = {"seeds": [], "evaluations": [], "wall_seconds_per_seed": []}
    for path in sorted(glob.glob(os.path.join(folder, "brax_*.json"))):
        with open(path) as file:
            result = json.load(file)
        for index, seed in enumerate(result["seeds"]):
            if seed in pooled["seeds"]:
                raise ConfigError(f"{path}: brax seed {seed} is logged twice in {folder}")
            pooled["seeds"].append(seed)
            pooled["evaluations"].append(result["evaluations"][index])
            pooled["wall_seconds_per_seed"].append(result["wall_seconds_per_seed"][index])
    order = np.argsort(pooled["seeds"])
    return {key: [values[k] for k in order] for key, values in pooled.items()} if pooled["seeds"] else {}


def _read(log_path: str) -> str:
    if not os.path.exists(log_path):
        return ""
    with open(log_path) as file:
        return file.read()


def _found(pattern: "re.Pattern[str]", log: str) -> Optional[str]:
    """What our run printed after its first interval (its learning speed, expected wall time, compile time)."""
    match = pattern.search(log)
    return None if match is None else match.group(1)


def _iqm(returns: np.ndarray, reps: int) -> statistics.Estimate:
    return statistics.iqm_estimate(np.asarray(returns, dtype=float), "gpu", reps)
