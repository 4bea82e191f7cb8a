"""The report's tables: `report.md` (a table per env, the figures linked) and README's learning-table rows."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

from stoix_like import population
from stoix_like.learning_targets import TARGETS, shortfalls, target_of
from stoix_like.report.runs import Group, env_option_of

if TYPE_CHECKING:
    from stoix_like.report.build import EnvResults, Report
    from stoix_like.report.statistics import Estimate

# README's learning table (benchmarks/learning_table.py rewrites the block): one row per (algorithm, env option)
LEARNING_TABLE_HEADER = [
    "| algorithm | task | steps per seed | IQM [95% CI] | seeds solved | target | wall time |",
    "|---|---|---|---|---|---|---|"]
RowKey = Tuple[str, str]  # (algorithm, env option)


def seeds_shown(seeds: Sequence[int]) -> str:
    """`8 (0..7)`, or the seeds themselves when they are not consecutive."""
    consecutive = list(seeds) == list(range(seeds[0], seeds[0] + len(seeds)))
    return f"{len(seeds)} ({seeds[0]}..{seeds[-1]})" if consecutive and len(seeds) > 1 else (
        f"{len(seeds)} ({', '.join(map(str, seeds))})")


def _seconds(value: Optional[float]) -> str:
    return "?" if value is None else f"{value:.0f} s"


def _rate(value: Optional[float]) -> str:
    return "?" if value is None else f"{value:,.0f}"


def env_table(results: "EnvResults") -> List[str]:
    lines = ["| algorithm | seeds | steps per seed | final IQM [95% CI] | best eval IQM | wall time | steps/s |",
             "|---|---|---|---|---|---|---|"]
    for group in results.groups:
        iqm = results.aggregates[group.label]["IQM"]
        lines.append(f"| {group.label} | {seeds_shown(group.seed_numbers)} | {group.steps_per_seed:,} "
                     f"| {iqm.point:.1f} [{iqm.low:.1f}, {iqm.high:.1f}] | {results.best_eval[group.label]:.1f} "
                     f"| {_seconds(group.wall_seconds)} | {_rate(group.steps_per_second)} |")
    return lines


def improvement_table(results: "EnvResults") -> List[str]:
    if not results.improvements:
        return []
    lines = ["", "| X | Y | P(X > Y) [95% CI] |", "|---|---|---|"]
    for (x, y), estimate in results.improvements.items():
        lines.append(f"| {x} | {y} | {estimate.point:.2f} [{estimate.low:.2f}, {estimate.high:.2f}] |")
    return lines


def report_markdown(report: "Report", out_dir: str) -> str:
    """report.md: what the numbers are, then per env its curves, its table and its comparisons."""
    runs = sorted({run.directory for results in report.envs for group in results.groups for run in group.runs})
    lines = [
        "# Results", "",
        f"Built by `{report.command}` from {len(runs)} run(s) on {len(report.envs)} env(s). "
        "**Final return**: each seed's absolute return (its best parameters evaluated on 10× the evaluation "
        f"episodes once training ended). IQM, median and mean over seeds with {report.confidence:.0%} "
        f"stratified-bootstrap intervals (rliable, {report.reps:,} resamples). **Best eval**: the IQM over seeds of "
        "each seed's best evaluation. **Wall time**: the runs' own, compilation and evaluation included (summed "
        "over the runs a group's seeds came from); **steps/s**: env steps per second of learning, all seeds "
        "together. Wall times depend on the machine and its load.", "",
        "![Final return: IQM, median, mean and probability of improvement](aggregates.png)", "",
        "![Sample efficiency: IQM against env steps](sample_efficiency.png)", ""]
    for results in report.envs:
        lines += [f"## {results.env}", "", f"![{results.env} learning curves]({results.curve_file})", "",
                  *env_table(results), *improvement_table(results), ""]
        notes = [f"- {group.label}: {note}" for group in results.groups for note in group.notes]
        lines += (["Notes:", *notes, ""] if notes else [])
    lines += ["Runs read:", "", *[f"- `{os.path.relpath(run, out_dir)}`" for run in runs], ""]
    return "\n".join(lines)


def learning_table_rows(report: "Report") -> Dict[RowKey, str]:
    """README's learning-table rows for the groups that are an algorithm's shipped defaults (no differing config)
    on a task it has a learning target for, with the target's verdict."""
    rows = {}
    for results in report.envs:
        for group in results.groups:
            option = env_option_of(group.suite, group.task)
            if group.label != group.algorithm or option is None or group.algorithm not in TARGETS:
                continue
            try:
                target_of(group.algorithm, option)  # a task without a learning target has no README row
            except KeyError:
                continue
            rows[(group.algorithm, option)] = learning_table_row(group, results.aggregates[group.label]["IQM"],
                                                                 option)
    return rows


def learning_table_row(group: Group, iqm: "Estimate", option: str) -> str:
    """One README row: the IQM and interval are the report's (rliable); the verdict is the learning tests'
    (`learning_targets.shortfalls` on `population.summarize`, whose IQM is the same number)."""
    target = target_of(group.algorithm, option)
    summary = population.summarize(group.final_returns().tolist(), group.seed_numbers, target.solved_return)
    verdict = "met" if not shortfalls(target, summary) else "MISSED"
    bar = f"IQM ≥ {target.iqm_at_least:g}, ≤ {target.max_seeds_below_floor} below {target.seed_floor:g}"
    return (f"| {group.algorithm} | {option} | {group.steps_per_seed:,} | {iqm.point:.1f} [{iqm.low:.1f}, "
            f"{iqm.high:.1f}] | {summary.num_solved}/{len(group.seeds)} (≥ {target.solved_return:g}) "
            f"| {verdict}: {bar} | {_seconds(group.wall_seconds)} |")
