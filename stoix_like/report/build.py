"""A report from runs' logs, in one call: read and group the runs, estimate, draw, write.

    out/curves_<suite>_<task>.png   per env: mean evaluation return against env steps, a line per group
    out/aggregates.png              per env: IQM, median, mean of absolute returns; P(X > Y) between groups
    out/sample_efficiency.png       per env: IQM of evaluation returns against env steps
    out/report.md                   per env: a table of the groups, the figures linked
    out/report.json                 the same numbers, exact, for programs
"""

from __future__ import annotations

import json
import os
import re
from typing import Callable, Dict, List, Sequence

import numpy as np

from stoix_like.report import figures, runs, statistics, tables
from stoix_like.report.results import EnvResults, Report


def file_name(env: str) -> str:
    return "curves_" + re.sub(r"[^A-Za-z0-9.-]+", "_", env) + ".png"


def estimate_env(env: str, groups: List[runs.Group], reps: int) -> EnvResults:
    absolutes = {group.label: group.absolute_returns() for group in groups}
    curves = {group.label: group.curves() for group in groups}
    aggregates = statistics.aggregate_estimates(absolutes, reps)
    by_iqm = sorted(absolutes, key=lambda label: -aggregates[label]["IQM"].point)
    pairs = statistics.comparison_pairs(by_iqm)
    return EnvResults(
        env=env, groups=groups, aggregates=aggregates,
        best_eval={group.label: float(statistics.AGGREGATES["IQM"](group.best_eval_returns())) for group in groups},
        mean_curves=statistics.curve_estimates(curves, "Mean", reps),
        iqm_curves=statistics.curve_estimates(curves, "IQM", reps),
        improvements=statistics.improvement_estimates(absolutes, pairs, reps) if pairs else {},
        curve_file=file_name(env))


def build_report(paths: Sequence[str], out_dir: str, reps: int = statistics.DEFAULT_REPS, command: str = "",
                 say: Callable[[str], None] = print) -> Report:
    """Read every run under `paths`, write the figures, report.md and report.json into `out_dir`."""
    groups = runs.group_runs(runs.load_runs(paths))
    envs = sorted({group.env for group in groups})
    say(f"report: {len(groups)} group(s) on {len(envs)} env(s): "
        + "; ".join(f"{env}: " + ", ".join(f"{g.label} ({len(g.seeds)} seeds)" for g in groups if g.env == env)
                    for env in envs))
    report = Report([], command or "python -m experiments.report " + " ".join(paths), reps)
    for env in envs:
        say(f"report: bootstrapping {env} ({reps:,} resamples)")
        report.envs.append(estimate_env(env, [group for group in groups if group.env == env], reps))
    os.makedirs(out_dir, exist_ok=True)
    write_figures(report, out_dir)
    write_file(out_dir, "report.md", tables.report_markdown(report, out_dir), report)
    write_file(out_dir, "report.json", json.dumps(report_numbers(report, out_dir), indent=1), report)
    return report


def write_figures(report: Report, out_dir: str) -> None:
    style = figures.styles(sorted({group.label for results in report.envs for group in results.groups}))
    seeds = {group.label: len(group.seeds) for results in report.envs for group in results.groups}
    for results in report.envs:
        path = os.path.join(out_dir, results.curve_file)
        figures.learning_curves(path, results.env, results.mean_curves, seeds, style, results.solved_return)
        report.files.append(path)
    path = os.path.join(out_dir, "aggregates.png")
    figures.aggregates(path, {results.env: results.aggregates for results in report.envs},
                       {results.env: results.improvements for results in report.envs}, style)
    report.files.append(path)
    path = os.path.join(out_dir, "sample_efficiency.png")
    figures.sample_efficiency(path, {results.env: results.iqm_curves for results in report.envs}, seeds, style,
                              {results.env: results.solved_return for results in report.envs})
    report.files.append(path)


def write_file(out_dir: str, name: str, text: str, report: Report) -> None:
    path = os.path.join(out_dir, name)
    with open(path, "w") as file:
        file.write(text)
    report.files.append(path)


def report_numbers(report: Report, out_dir: str) -> Dict[str, object]:
    """report.json: every number of the tables, unrounded, per env and group (run directories relative to it)."""
    def listed(array: np.ndarray) -> List[float]:
        return [float(value) for value in array]

    return {"command": report.command, "reps": report.reps, "confidence": report.confidence, "envs": {
        results.env: {"groups": {group.label: {
            "algorithm": group.algorithm, "seeds": group.seed_numbers, "steps_per_seed": group.steps_per_seed,
            "absolute_returns": listed(group.absolute_returns()), "finished": group.finished,
            "final_params_returns": None if (final := group.final_params_returns()) is None else listed(final),
            "absolute": {name: estimate._asdict() for name, estimate in results.aggregates[group.label].items()},
            "best_eval_iqm": results.best_eval[group.label],
            "wall_seconds": group.wall_seconds, "steps_per_second": group.steps_per_second,
            "runs": [os.path.relpath(run.directory, out_dir) for run in group.runs], "notes": group.notes,
        } for group in results.groups}, "probability_of_improvement": [
            {"x": x, "y": y, **estimate._asdict()} for (x, y), estimate in results.improvements.items()]}
        for results in report.envs}}
