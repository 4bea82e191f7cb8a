"""The learning table: each algorithm's shipped defaults, trained on a population of seeds in one program.

    python benchmarks/learning_table.py                       # all algorithms, seeds 0..7, prints the table
    python benchmarks/learning_table.py --update-readme       # ... and rewrites README.md's learning table
    python benchmarks/learning_table.py --algorithms sac --update-readme   # rewrites sac's rows, keeps the rest
    python benchmarks/learning_table.py --algorithms mpo@gymnax/pendulum   # one task of an algorithm
    python benchmarks/learning_table.py --algorithms ppo dqn --first-seed 1000   # a shifted population
    python benchmarks/learning_table.py --algorithms ppo -o system.actor_lr=1e-3  # try an override

One row per algorithm and task (an algorithm with targets on several tasks has a row for each): the task, env steps per seed, the IQM of the seeds' absolute returns with
a 95% bootstrap interval, the seeds that solved the task, whether the population meets its target
(stoix_like/learning_targets.py) and the wall time of the run (compilation included). Each row is the same
claim the learning tests make. Wall times depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from typing import Dict, List, Sequence, Tuple

from hydra import compose as hydra_compose
from hydra import initialize_config_dir

from stoix_like.entry import CONFIG_DIR
from stoix_like.learning_population import PopulationRun, train_population
from stoix_like.learning_targets import TARGETS, LearningTarget, all_targets, target_of

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(REPO_ROOT, "README.md")
TABLE_START, TABLE_END = "<!-- learning-table:start -->", "<!-- learning-table:end -->"


def compose_quietly(log_dir: str):
    def compose(config_name: str, overrides: Sequence[str]):
        with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
            return hydra_compose(config_name=config_name, overrides=[
                *overrides, "logger.use_json=False", f"logger.base_exp_path={log_dir}"])
    return compose


HEADER = ["| algorithm | task | steps per seed | IQM [95% CI] | seeds solved | target | wall time |",
          "|---|---|---|---|---|---|---|"]


def table_row(run: PopulationRun) -> str:
    summary, target = run.summary, run.target
    low, high = summary.interval
    bar = f"IQM ≥ {target.iqm_at_least:g}, ≤ {target.max_seeds_below_floor} below {target.seed_floor:g}"
    return (f"| {run.algorithm} | {target.env} | {run.steps_per_seed:,} | {summary.iqm:.1f} [{low:.1f}, {high:.1f}] "
            f"| {summary.num_solved}/{len(summary.seeds)} (≥ {target.solved_return:g}) "
            f"| {'met' if not run.problems else 'MISSED'}: {bar} | {run.wall_seconds:.0f} s |")


RowKey = Tuple[str, str]  # (algorithm, env option)


def markdown_table(rows: Dict[RowKey, str], footer: str) -> str:
    """The rows in the targets table's order (one per algorithm and task), then the footer."""
    ordered = [rows[(algorithm, target.env)] for algorithm, target in all_targets() if (algorithm, target.env) in rows]
    return "\n".join([*HEADER, *ordered, "", footer])


README_FOOTER = (f"Seeds 0..7 of each default, in one program per algorithm, on a {os.cpu_count()}-core CPU "
                 "(wall times include compilation and depend on the machine and its load). Reproduce with "
                 "`python benchmarks/learning_table.py --update-readme`, or one row with "
                 "`--algorithms NAME --update-readme`.")


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
    parser.add_argument("--update-readme", action="store_true", help="rewrite README.md's learning table")
    args = parser.parse_args()
    if args.update_readme and (args.override or args.first_seed != 0 or args.num_seeds != 8):
        parser.error("--update-readme reports the shipped defaults on seeds 0..7: drop --override, "
                     "--first-seed and --num-seeds")
    if args.update_readme:
        readme_rows()  # a README without the table block is refused before hours of training

    runs = []
    with tempfile.TemporaryDirectory() as log_dir:
        for algorithm, target in selected_targets(args.algorithms):
            run = train_population(algorithm, compose_quietly(log_dir), args.first_seed, args.num_seeds,
                                   args.override, env=target.env)
            print("ROW " + run.describe(), flush=True)
            runs.append(run)
    command = "python benchmarks/learning_table.py" + (
        f" --first-seed {args.first_seed}" if args.first_seed else "") + (
        f" --num-seeds {args.num_seeds}" if args.num_seeds != 8 else "") + (
        f" --algorithms {' '.join(args.algorithms)}" if args.algorithms != list(TARGETS) else "")
    rows = {(run.algorithm, run.target.env): table_row(run) for run in runs}
    seeds = runs[0].summary.seeds
    print(markdown_table(rows, f"Seeds {seeds[0]}..{seeds[-1]}, one program per algorithm: `{command}`."))
    if args.update_readme:
        update_readme(markdown_table({**readme_rows(), **rows}, README_FOOTER))
        print("README.md: learning table rows rewritten: " + ", ".join(f"{a} on {e}" for a, e in rows))
    return 0 if all(not run.problems for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
