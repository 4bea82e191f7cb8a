"""The report's figures, drawn with matplotlib (no display needed): learning curves, aggregates, sample efficiency.

Every figure labels its axes and says what its bands are; a group keeps its colour across figures.
"""

from __future__ import annotations

import math
from typing import Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import matplotlib

matplotlib.use("Agg")  # files only: a report runs on machines without a display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402

from stoix_like.report.statistics import AGGREGATES, CONFIDENCE, CurveEstimate, Estimate  # noqa: E402

DPI = 110
PERCENT = f"{CONFIDENCE:.0%}"
LEGEND_INSIDE_UP_TO = 5  # lines; with more, the legend goes right of the plot, which widens by LEGEND_WIDTH
LEGEND_WIDTH = 3.0  # inches


class Style(NamedTuple):
    colour: Tuple[float, ...]
    line: str


def styles(labels: Sequence[str]) -> Dict[str, Style]:
    """One style per label, the same in every figure of a report: tab10's colours, then again dashed, dotted."""
    palette = plt.get_cmap("tab10")
    return {label: Style(palette(index % 10), ("-", "--", ":", "-.")[index // 10 % 4])
            for index, label in enumerate(sorted(labels))}


def _legend(axis: Axes, count: int) -> None:
    if count <= LEGEND_INSIDE_UP_TO:
        axis.legend(loc="best", fontsize="small")
    else:
        axis.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", borderaxespad=0)


def _steps_axis(axis: Axes) -> None:
    axis.set_xlabel("environment steps per seed")
    axis.ticklabel_format(axis="x", style="sci", scilimits=(-3, 4), useMathText=True)
    axis.grid(alpha=0.3)


def _solved_line(axis: Axes, solved_return: Optional[float]) -> None:
    if solved_return is not None:
        axis.axhline(solved_return, color="grey", linestyle="--", linewidth=1, label=f"solved ({solved_return:g})")


def _curves(axis: Axes, curves: Mapping[str, CurveEstimate], seeds: Mapping[str, int],
            style: Mapping[str, Style]) -> None:
    for label, curve in curves.items():
        axis.plot(curve.steps, curve.point, color=style[label].colour, linestyle=style[label].line, linewidth=2,
                  marker="o", markersize=3, label=f"{label} ({seeds[label]} seeds)")
        axis.fill_between(curve.steps, curve.low, curve.high, color=style[label].colour, alpha=0.2, linewidth=0)


def _legend_width(count: int) -> float:
    return 0.0 if count <= LEGEND_INSIDE_UP_TO else LEGEND_WIDTH


def learning_curves(path: str, env: str, curves: Mapping[str, CurveEstimate], seeds: Mapping[str, int],
                    style: Mapping[str, Style], solved_return: Optional[float]) -> None:
    """One env: the mean evaluation return over seeds against env steps, with its bootstrap band."""
    figure, axis = plt.subplots(figsize=(8 + _legend_width(len(curves)), 5))
    _curves(axis, curves, seeds, style)
    _solved_line(axis, solved_return)
    _steps_axis(axis)
    axis.set_ylabel("evaluation return (mean over seeds)")
    axis.set_title(f"{env}: mean evaluation return, shaded {PERCENT} bootstrap CI over seeds")
    _legend(axis, len(curves) + (solved_return is not None))
    figure.tight_layout()
    figure.savefig(path, dpi=DPI)
    plt.close(figure)


def _grid(count: int, columns: int, width: float, height: float):
    rows = math.ceil(count / columns)
    figure, axes = plt.subplots(rows, min(count, columns), figsize=(width * min(count, columns), height * rows),
                                squeeze=False)
    for extra in axes.flat[count:]:
        extra.set_visible(False)
    return figure, list(axes.flat)


def sample_efficiency(path: str, curves_by_env: Mapping[str, Mapping[str, CurveEstimate]],
                      seeds: Mapping[str, int], style: Mapping[str, Style],
                      solved_returns: Mapping[str, Optional[float]]) -> None:
    """A panel per env: the IQM of the seeds' evaluation returns against env steps, with its bootstrap band."""
    most = max(len(curves) for curves in curves_by_env.values())
    figure, axes = _grid(len(curves_by_env), columns=2, width=7 + _legend_width(most), height=4.5)
    for axis, (env, curves) in zip(axes, curves_by_env.items()):
        _curves(axis, curves, seeds, style)
        _solved_line(axis, solved_returns.get(env))
        _steps_axis(axis)
        axis.set_ylabel("evaluation return (IQM over seeds)")
        axis.set_title(env)
        _legend(axis, len(curves) + (solved_returns.get(env) is not None))
    figure.suptitle(f"Sample efficiency: IQM of evaluation returns, shaded {PERCENT} stratified-bootstrap CI")
    figure.tight_layout()
    figure.savefig(path, dpi=DPI)
    plt.close(figure)


def _intervals(axis: Axes, rows: List[Tuple[str, Estimate]], style: Mapping[str, Style], xlabel: str) -> None:
    """rliable's interval plot: a bar per row from low to high, a tick at the point estimate (a tick alone when
    every resample gave the same value)."""
    for position, (label, estimate) in enumerate(rows):
        colour = style[label].colour if label in style else plt.get_cmap("tab10")(0)
        axis.barh(position, estimate.high - estimate.low, left=estimate.low, height=0.6, color=colour, alpha=0.75)
        axis.vlines(estimate.point, position - 0.3, position + 0.3, color="black", linewidth=2)
    axis.set_yticks(range(len(rows)), [label for label, _ in rows])
    axis.set_ylim(-0.6, len(rows) - 0.4)
    axis.invert_yaxis()
    low, high = min(estimate.low for _, estimate in rows), max(estimate.high for _, estimate in rows)
    pad = 0.05 * (high - low) or max(1.0, 0.05 * abs(high))  # a tick on the frame's edge would hide in it
    axis.set_xlim(low - pad, high + pad)
    axis.set_xlabel(xlabel)
    axis.grid(axis="x", alpha=0.3)


def aggregates(path: str, by_env: Mapping[str, Mapping[str, Mapping[str, Estimate]]],
               improvements_by_env: Mapping[str, Mapping[Tuple[str, str], Estimate]],
               style: Mapping[str, Style]) -> None:
    """A row per env: IQM, median and mean of the seeds' absolute returns per group (best IQM first), then
    P(X > Y) for pairs."""
    columns = len(AGGREGATES) + 1
    heights = [max(1.6, 0.45 * max(len(estimates), len(improvements_by_env.get(env, {})) or 1) + 1.2)
               for env, estimates in by_env.items()]
    figure, axes = plt.subplots(len(by_env), columns, figsize=(4.2 * columns, sum(heights)), squeeze=False,
                                gridspec_kw={"height_ratios": heights})
    for row, (env, estimates) in zip(axes, by_env.items()):
        order = sorted(estimates, key=lambda label: -estimates[label]["IQM"].point)
        for axis, name in zip(row, AGGREGATES):
            _intervals(axis, [(label, estimates[label][name]) for label in order], style, f"{name} of absolute return")
            axis.set_title(f"{env}: {name}")
        improvements = improvements_by_env.get(env, {})
        axis = row[-1]
        if improvements:
            _intervals(axis, [(f"P({x} > {y})", estimate) for (x, y), estimate in improvements.items()], {},
                       "probability of improvement")
            axis.axvline(0.5, color="grey", linestyle="--", linewidth=1)
            axis.set_xlim(-0.03, 1.03)
            axis.set_title(f"{env}: P(X > Y)")
        else:
            axis.text(0.5, 0.5, "one group: no pair to compare", ha="center", va="center", transform=axis.transAxes)
            axis.set_axis_off()
    figure.suptitle(f"Absolute return (best params, 10× the evaluation episodes) per seed: point estimates and "
                    f"{PERCENT} stratified-bootstrap CIs")
    figure.tight_layout()
    figure.savefig(path, dpi=DPI)
    plt.close(figure)
