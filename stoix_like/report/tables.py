"""The report's tables: `report.md`, a table per env with the figures linked (README's learning table is
learning_table.py's)."""

from __future__ import annotations

import os
from typing import List, Optional, Sequence

from stoix_like.claims import population
from stoix_like.report.results import EnvResults, Report


def seeds_shown(seeds: Sequence[int]) -> str:
    """`8 (0..7)`, or the seeds themselves when they are not consecutive."""
    consecutive = list(seeds) == list(range(seeds[0], seeds[0] + len(seeds)))
    return f"{len(seeds)} ({seeds[0]}..{seeds[-1]})" if consecutive and len(seeds) > 1 else (
        f"{len(seeds)} ({', '.join(map(str, seeds))})")


def _seconds(value: Optional[float]) -> str:
    return "?" if value is None else f"{value:.0f} s"


def _rate(value: Optional[float]) -> str:
    return "?" if value is None else f"{value:,.0f}"


def env_table(results: EnvResults) -> List[str]:
    lines = ["| algorithm | seeds | steps per seed | absolute IQM [95% CI] | final-params IQM | best eval IQM "
             "| wall time | steps/s |",
             "|---|---|---|---|---|---|---|---|"]
    for group in results.groups:
        iqm = results.aggregates[group.label]["IQM"]
        final = group.final_params_returns()
        final_iqm = "not logged" if final is None else f"{population.interquartile_mean(final.tolist()):.1f}"
        lines.append(f"| {group.label} | {seeds_shown(group.seed_numbers)} | {group.steps_per_seed:,} "
                     f"| {iqm.point:.1f} [{iqm.low:.1f}, {iqm.high:.1f}] | {final_iqm} "
                     f"| {results.best_eval[group.label]:.1f} | {_seconds(group.wall_seconds)} "
                     f"| {_rate(group.steps_per_second)} |")
    return lines


def improvement_table(results: EnvResults) -> List[str]:
    if not results.improvements:
        return []
    lines = ["", "| X | Y | P(X > Y) [95% CI] |", "|---|---|---|"]
    for (x, y), estimate in results.improvements.items():
        lines.append(f"| {x} | {y} | {estimate.point:.2f} [{estimate.low:.2f}, {estimate.high:.2f}] |")
    return lines


def report_markdown(report: Report, out_dir: str) -> str:
    """report.md: what the numbers are, then per env its curves, its table and its comparisons."""
    runs = sorted({run.directory for results in report.envs for group in results.groups for run in group.runs})
    lines = [
        "# Results", "",
        f"Built by `{report.command}` from {len(runs)} run(s) on {len(report.envs)} env(s). "
        "**Absolute return**: each seed's best evaluated parameters, evaluated again on 10× the evaluation "
        "episodes once training ended; **final-params IQM**: the IQM of each seed's final parameters over as "
        f"many episodes (what a user keeps). IQM, median and mean over seeds with {report.confidence:.0%} "
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
