"""The first result: `python -m experiments.ppo` from the shell to its last line, cold, warm and with the cache off.

    python benchmarks/first_result.py [--repeats 3] [overrides ...]

Issue 15's target is 12 s on 2 cores with the default budget, from a cold compilation cache, and less warm. Each
run is a fresh process, as a user's is: import, config, setup, compile (or load), learning, evaluations, logs. A
cold run gets an empty cache directory of its own; the warm run after it reuses that directory; `--no-cache` runs
set `arch.compilation_cache=False`. An untimed run first writes Python's bytecode cache, which `pip install`
would have written (child_environment). It prints each run's wall seconds with the learner's compile and learning
seconds from the run's own summary line, then the medians. Figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List

SUMMARY = re.compile(r"compile (?P<compile>[0-9.]+)s \| learning (?P<learning>[0-9.]+)s")


def child_environment() -> Dict[str, str]:
    """This environment, with Python's bytecode cache allowed: `pip install` compiles every module's bytecode, so
    a user's run never compiles the sources of jax, flax, hydra and this package at start-up. A machine that sets
    PYTHONDONTWRITEBYTECODE (as some containers do) would add ~4 s of source compilation to every run."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def one_run(cache_directory: str | None, overrides: List[str], output_directory: str) -> Dict[str, float]:
    env = child_environment()
    arguments = [sys.executable, "-m", "experiments.ppo", f"hydra.run.dir={output_directory}", *overrides]
    if cache_directory is None:
        arguments.append("arch.compilation_cache=False")
    else:
        env["STOIX_LIKE_CACHE_DIR"] = cache_directory
    start = time.perf_counter()
    result = subprocess.run(arguments, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"the run failed (exit {result.returncode}): {result.stderr.strip()[-2000:]}")
    summary = SUMMARY.search(result.stdout + result.stderr)
    if summary is None:
        raise SystemExit("the run printed no summary line ('done: ... | compile Xs | learning Ys ...')")
    return {"wall_s": wall, "compile_s": float(summary["compile"]), "learning_s": float(summary["learning"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="cold/warm pairs, and runs with the cache off")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides passed to every run")
    args = parser.parse_args()
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.chdir(repo)

    rows: Dict[str, List[Dict[str, float]]] = {"cold cache": [], "warm cache": [], "cache off": []}
    with tempfile.TemporaryDirectory(prefix="first_result_") as scratch:
        # untimed: writes the bytecode of every module a run imports, as an installed package has it
        one_run(None, args.overrides, os.path.join(scratch, "bytecode"))
        for repeat in range(args.repeats):
            cache = os.path.join(scratch, f"cache_{repeat}")
            rows["cold cache"].append(one_run(cache, args.overrides, os.path.join(scratch, f"cold_{repeat}")))
            rows["warm cache"].append(one_run(cache, args.overrides, os.path.join(scratch, f"warm_{repeat}")))
            rows["cache off"].append(one_run(None, args.overrides, os.path.join(scratch, f"off_{repeat}")))

    print(f"python -m experiments.ppo {' '.join(args.overrides)}: {args.repeats} runs each, wall seconds from the "
          f"shell to the last line")
    print(f"{'':<12}{'wall s (each)':>28}{'median':>9}{'compile s':>11}{'learning s':>12}")
    for name, runs in rows.items():
        each = ", ".join(f"{run['wall_s']:.1f}" for run in runs)
        print(f"{name:<12}{each:>28}{statistics.median(r['wall_s'] for r in runs):>9.1f}"
              f"{statistics.median(r['compile_s'] for r in runs):>11.1f}"
              f"{statistics.median(r['learning_s'] for r in runs):>12.1f}")


if __name__ == "__main__":
    main()
