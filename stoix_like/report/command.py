"""`python -m experiments.report RUN_DIR_OR_GLOB ... [--out DIR] [--reps N]`: the command line of the report."""

from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional, Sequence

from stoix_like.errors import ConfigError
from stoix_like.report import require_extra


def default_out(paths: Sequence[str]) -> str:
    """`<dir>/report` for one directory (a sweep's report stays beside its jobs), else ./report."""
    if len(paths) == 1 and os.path.isdir(paths[0]):
        return os.path.join(paths[0], "report")
    return "report"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.report",
        description="Learning curves, aggregate IQM/median/mean with bootstrap intervals, probability of "
                    "improvement and a markdown table, from runs' metrics.json (single runs, arch.num_seeds runs, "
                    "Hydra multirun sweeps). The algorithm, env and seeds are read from the logs.")
    parser.add_argument("paths", nargs="+", metavar="RUN_DIR_OR_GLOB",
                        help="run directories, metrics.json files, sweep directories or globs of them")
    parser.add_argument("--out", help="where the figures and report.md go (default: <dir>/report for one "
                                      "directory, else ./report)")
    parser.add_argument("--reps", type=int, default=None, help="bootstrap resamples (default 2000)")
    args = parser.parse_args(argv)
    try:
        require_extra()
        from stoix_like.report.build import build_report
        from stoix_like.report.statistics import DEFAULT_REPS

        if args.reps is not None and args.reps < 100:
            raise ConfigError(f"--reps {args.reps}: use at least 100 bootstrap resamples (default {DEFAULT_REPS}).")
        out = args.out or default_out(args.paths)
        report = build_report(args.paths, out, args.reps or DEFAULT_REPS,
                              command="python -m experiments.report " + " ".join(argv if argv is not None
                                                                                 else sys.argv[1:]))
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for path in report.files:
        print(f"wrote {path}")
    return 0
