"""The learning table: each algorithm's shipped defaults, trained on a population of seeds in one program.

    python benchmarks/learning_table.py                       # all algorithms, seeds 0..7, prints the table
    python benchmarks/learning_table.py --update-readme       # ... and rewrites README.md's learning table
    python benchmarks/learning_table.py --algorithms sac --update-readme   # rewrites sac's rows, keeps the rest
    python benchmarks/learning_table.py --algorithms mpo@gymnax/pendulum   # one task of an algorithm
    python benchmarks/learning_table.py --algorithms ppo dqn --first-seed 1000   # a shifted population
    python benchmarks/learning_table.py --algorithms ppo -o system.actor_lr=1e-3  # try an override
    python benchmarks/learning_table.py --from-logs           # README's rows redrawn from the kept logs, no training

One row per algorithm and task (an algorithm with targets on several tasks has a row for each): the task, env
steps per seed, the IQM of the seeds' absolute returns with a 95% bootstrap interval, the seeds that solved the
task, whether the population meets its target (stoix_like/learning_targets.py) and the wall time of the run
(compilation included). Each row is the same claim the learning tests make. Wall times depend on the machine and
its load.

Each population writes its JSON logs (metrics.json, run.json) into its own folder, `<results>/<algorithm>/<suite>/
<task>/`, and the table is the report's (`python -m experiments.report`, stoix_like/report/) built from those logs.
With --update-readme the results are docs/results/runs/ (committed: the figures can be rebuilt from them without
retraining), the report's figures and report.md go to docs/results/, and README's rows are the report's rows for
every population logged there; rows of algorithms with no logs there are kept as they are. Without it the logs go
to a temporary folder (or --results DIR) and the table is only printed. Needs the report extra
(`pip install -e ".[report]"`).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
from typing import Dict, List, Sequence, Tuple

from hydra import compose as hydra_compose
from hydra import initialize_config_dir

from stoix_like.entry import CONFIG_DIR
from stoix_like.errors import ConfigError
from stoix_like.learning_population import train_population
from stoix_like.learning_targets import TARGETS, LearningTarget, all_targets, target_of
from stoix_like.report import require_extra

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(REPO_ROOT, "README.md")
RESULTS = os.path.join(REPO_ROOT, "docs", "results")  # the report README shows: figures, report.md
RUNS = os.path.join(RESULTS, "runs")  # the populations' JSON logs it is built from
TABLE_START, TABLE_END = "<!-- learning-table:start -->", "<!-- learning-table:end -->"
RowKey = Tuple[str, str]  # (algorithm, env option)


def compose_into(run_dir: str):
    """Hydra's compose API, every run writing its logs (metrics.json, run.json, console lines) into `run_dir`
    (a path relative to the working directory, so the run's saved config names no machine's folders)."""
    def compose(config_name: str, overrides: Sequence[str]):
        with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
            return hydra_compose(config_name=config_name, overrides=[
                *overrides, f"logger.base_exp_path={os.path.relpath(run_dir)}"])
    return compose


def run_dir_of(results: str, algorithm: str, target: LearningTarget) -> str:
    return os.path.join(results, algorithm, *target.env.split("/"))


def markdown_table(rows: Dict[RowKey, str], footer: str) -> str:
    """The rows in the targets table's order (one per algorithm and task), then the footer."""
    from stoix_like.report.tables import LEARNING_TABLE_HEADER

    ordered = [rows[(algorithm, target.env)] for algorithm, target in all_targets() if (algorithm, target.env) in rows]
    return "\n".join([*LEARNING_TABLE_HEADER, *ordered, "", footer])


README_FOOTER = (f"Seeds 0..7 of each default, in one program per algorithm, on a {os.cpu_count()}-core CPU "
                 "(wall times include compilation and depend on the machine and its load). Reproduce with "
                 "`python benchmarks/learning_table.py --update-readme`, or one row with "
                 "`--algorithms NAME --update-readme`: the rows, the figures and docs/results/report.md are the "
                 "report of the logs in docs/results/runs/.")


def readme_rows() -> Dict[RowKey, str]:
    """The rows README.md's learning table holds now, by algorithm and task (a partial update keeps the others)."""
    with open(README) as file:
        block = _TABLE.search(file.read())
    if block is None:
        raise SystemExit(f"README.md has no {TABLE_START} ... {TABLE_END} block to rewrite")
    rows = {}
    for line in block.group(0).splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] in TARGETS:
            rows[(cells[0], cells[1])] = line
    return rows


_TABLE = re.compile(re.escape(TABLE_START) + ".*?" + re.escape(TABLE_END), flags=re.DOTALL)


def update_readme(table: str) -> None:
    with open(README) as file:
        text = file.read()
    with open(README, "w") as file:
        file.write(_TABLE.sub(lambda _: f"{TABLE_START}\n{table}\n{TABLE_END}", text))


def selected_targets(names: Sequence[str]) -> List[Tuple[str, LearningTarget]]:
    """`NAME` selects every task of an algorithm, `NAME@suite/task` one of them."""
    selected = []
    for name in names:
        algorithm, _, env = name.partition("@")
        if algorithm not in TARGETS:
            raise SystemExit(f"no learning target for {algorithm!r}; choose from {', '.join(TARGETS)}")
        try:
            selected += [(algorithm, target_of(algorithm, env))] if env else [(algorithm, t) for t in TARGETS[algorithm]]
        except KeyError as error:
            raise SystemExit(error.args[0]) from None
    return selected


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algorithms", nargs="+", default=list(TARGETS), metavar="NAME[@SUITE/TASK]",
                        help="algorithms (every task of each), or one task of one: mpo@gymnax/pendulum")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--num-seeds", type=int, default=8)
    parser.add_argument("-o", "--override", action="append", default=[],
                        help="a config override applied to every algorithm run (for trying settings)")
    parser.add_argument("--update-readme", action="store_true",
                        help="rewrite README.md's learning table and docs/results/ from logs kept in docs/results/runs")
    parser.add_argument("--results", help="where the populations' logs go (default: docs/results/runs with "
                                          "--update-readme, else a temporary folder)")
    parser.add_argument("--from-logs", action="store_true",
                        help="train nothing: rebuild docs/results/ and README.md's rows from docs/results/runs "
                             "(after a change to the report's statistics)")
    args = parser.parse_args()
    if args.from_logs and (args.update_readme or args.override or args.first_seed != 0 or args.num_seeds != 8
                           or args.results or args.algorithms != list(TARGETS)):
        parser.error("--from-logs trains nothing and rewrites every row from docs/results/runs: give it alone")
    if args.update_readme and (args.override or args.first_seed != 0 or args.num_seeds != 8 or args.results):
        parser.error("--update-readme reports the shipped defaults on seeds 0..7 into docs/results: drop --override, "
                     "--first-seed, --num-seeds and --results")
    try:
        require_extra()  # the table is the report's: refuse before hours of training, not after
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.update_readme or args.from_logs:
        readme_rows()  # a README without the table block is refused before hours of training
    if args.from_logs:
        rows = learning_table_report(RUNS, RESULTS, "python benchmarks/learning_table.py --from-logs")
        update_readme(markdown_table({**readme_rows(), **rows}, README_FOOTER))
        print("README.md: learning table rows rebuilt from docs/results/runs: "
              + ", ".join(f"{a} on {e}" for a, e in rows))
        return 0
    selected = selected_targets(args.algorithms)
    command = "python benchmarks/learning_table.py" + (
        f" --first-seed {args.first_seed}" if args.first_seed else "") + (
        f" --num-seeds {args.num_seeds}" if args.num_seeds != 8 else "") + (
        f" --algorithms {' '.join(args.algorithms)}" if args.algorithms != list(TARGETS) else "") + (
        " --update-readme" if args.update_readme else "")
    with tempfile.TemporaryDirectory() as scratch:
        results = RUNS if args.update_readme else (args.results or os.path.join(scratch, "runs"))
        problems = []
        for algorithm, target in selected:
            run_dir = run_dir_of(results, algorithm, target)
            shutil.rmtree(run_dir, ignore_errors=True)  # a row is one population: never pooled with an older one
            run = train_population(algorithm, compose_into(run_dir), args.first_seed, args.num_seeds,
                                   args.override, env=target.env)
            print("ROW " + run.describe(), flush=True)
            problems += run.problems
        rows = learning_table_report(results, RESULTS if args.update_readme else os.path.join(scratch, "report"),
                                     command)
    trained = {(algorithm, target.env) for algorithm, target in selected}
    first = args.first_seed
    print(markdown_table({key: row for key, row in rows.items() if key in trained},
                         f"Seeds {first}..{first + args.num_seeds - 1}, one program per algorithm: `{command}`."))
    if args.update_readme:
        update_readme(markdown_table({**readme_rows(), **rows}, README_FOOTER))
        print("README.md: learning table rows rewritten from docs/results/runs: "
              + ", ".join(f"{a} on {e}" for a, e in rows))
    return 0 if not problems else 1


def learning_table_report(results: str, out: str, command: str) -> Dict[RowKey, str]:
    """The report of every population logged under `results`, written to `out`; README's rows from it."""
    from stoix_like.report.build import build_report
    from stoix_like.report.tables import learning_table_rows

    report = build_report([results], out, command=command)
    return learning_table_rows(report)


if __name__ == "__main__":
    sys.exit(main())
