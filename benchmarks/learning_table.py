"""The learning table: each algorithm's shipped defaults, trained on populations of seeds in one program.

    python benchmarks/learning_table.py --from-logs           # README's table rendered from the committed logs
    python benchmarks/learning_table.py --update-readme       # train every target on seeds 0..7, then render
    python benchmarks/learning_table.py --algorithms sac --update-readme   # retrain sac's populations of 0..7
    python benchmarks/learning_table.py --algorithms sac --first-seed 1000 --update-readme   # ... of 1000..1007
    python benchmarks/learning_table.py --algorithms mpo@gymnax/pendulum   # one task of an algorithm, printed only
    python benchmarks/learning_table.py --algorithms ppo -o system.actor_lr=1e-3  # try an override

One row per algorithm and task (stoix_like/report/learning_table.py says what each cell is): two populations of
8 seeds, 0..7 (the defaults were tuned on them) and 1000..1007 (nobody tuned on them), each with the IQM of its
final and absolute returns, the seeds that solved the task, the target's verdict on all four, how CI checks
the target, the wall time and the day it was logged. Wall times depend on the machine and its load.

Each population writes its JSON logs (metrics.json, run.json) into its own folder, `<results>/<algorithm>/<suite>/
<task>/`. With --update-readme the results are docs/results/runs/ (seeds 0..7) or docs/results/untuned/ (seeds
1000..1007), both committed; README's table is then rendered from those logs alone (a target without logs is an
error, never a row kept from before), and docs/results/ gets the report (`python -m experiments.report`) of
docs/results/runs/. Without it the logs go to a temporary folder (or --results DIR) and the rows are only
printed. Needs the report extra (`pip install -e ".[report]"`).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
from typing import List, Sequence, Tuple

from hydra import compose as hydra_compose
from hydra import initialize_config_dir

from stoix_like.config.compose import CONFIG_DIR
from stoix_like.errors import ConfigError
from stoix_like.claims.learning_population import train_population
from stoix_like.claims.learning_targets import TARGETS, LearningTarget, target_of
from stoix_like.report import require_extra

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(REPO_ROOT, "README.md")
RESULTS = os.path.join(REPO_ROOT, "docs", "results")  # the report README shows: figures, report.md
RUNS = os.path.join(RESULTS, "runs")  # seeds 0..7: the populations the defaults were tuned on, and the report's
UNTUNED = os.path.join(RESULTS, "untuned")  # seeds 1000..1007: nobody tuned on them
SEBULBA = os.path.join(RESULTS, "sebulba")  # Sebulba's populations: folders of single-seed runs
TABLE_START, TABLE_END = "<!-- learning-table:start -->", "<!-- learning-table:end -->"  # README's block
SEBULBA_BLOCK = "sebulba-table"  # README's <!-- sebulba-table:start --> ... <!-- sebulba-table:end -->
BRAX_PEER = os.path.join(RESULTS, "brax_peer")  # ours beside brax's trainer: benchmarks/brax_learning_peer.py
CONTINUOUS_BLOCK = "continuous-table"  # README's "Continuous control" table
PBT_RESULTS = os.path.join(RESULTS, "pbt")  # a fixed learning rate against PBT: benchmarks/pbt_learning_check.py
PBT_BLOCK = "pbt-table"  # README's PBT table, in "Seeds, sweeps, clusters"
REJAX_PEER = os.path.join(RESULTS, "rejax_peer")  # ours beside rejax on MinAtar: benchmarks/minatar_rejax_peer.py
PIXELS_BLOCK = "pixels-table"  # README's "Pixels" table
SWEEP_SPEED = os.path.join(RESULTS, "sweep_in_one_program")  # benchmarks/sweep_in_one_program.py --log
SWEEP_SPEED_BLOCK = "sweep-speed-table"  # README's sweep-speed table, in "Seeds, sweeps, clusters"
TORSO_CHECK = os.path.join(RESULTS, "torso_check")  # benchmarks/minatar_torso_check.py
TORSO_CHECK_BLOCK = "torso-check-table"  # README's ResNet-on-MinAtar table, in "Pixels"
ATARI = os.path.join(RESULTS, "atari")  # PPO on Atari: benchmarks/sebulba_population.py --task envpool/<game>
ATARI_BLOCK = "atari-table"  # README's Atari table, in "Pixels"
GPU_BRAX = os.path.join(RESULTS, "gpu", "brax_ppo")  # brax's published budget in a GPU lease: brax_published_budget.py
GPU_BRAX_BLOCK = "gpu-brax-table"  # README's brax table in "On a GPU"


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


def rendered_table(runs: str = RUNS, untuned: str = UNTUNED) -> str:
    """README's table block as the committed logs render it (ConfigError naming any target without logs)."""
    from stoix_like.report.learning_table import render, target_groups

    return render(target_groups([runs]), target_groups([untuned]))


def rendered_sebulba_table(root: str = SEBULBA) -> str:
    from stoix_like.report.learning_table import sebulba_table

    return sebulba_table(root)


def rendered_pbt_table(root: str = PBT_RESULTS) -> str:
    from stoix_like.report.learning_table import pbt_table

    return pbt_table(root)


def rendered_continuous_table(root: str = BRAX_PEER) -> str:
    from stoix_like.report.learning_table import continuous_control_table

    return continuous_control_table(root)


def rendered_pixels_table(root: str = REJAX_PEER) -> str:
    from stoix_like.report.learning_table import pixels_table

    return pixels_table(root)


def rendered_torso_check_table(root: str = TORSO_CHECK) -> str:
    from stoix_like.report.learning_table import torso_check_table

    return torso_check_table(root)


def rendered_atari_table(root: str = ATARI) -> str:
    from stoix_like.report.learning_table import atari_table

    return atari_table(root)


def rendered_sweep_speed_table(root: str = SWEEP_SPEED) -> str:
    from stoix_like.report.sweep_speed_table import sweep_speed_table

    return sweep_speed_table(root)


def rendered_gpu_brax_table(root: str = GPU_BRAX) -> str:
    from stoix_like.report.gpu_budget_table import gpu_budget_table

    return gpu_budget_table(root)


def _markers(block: str) -> Tuple[str, str]:
    return f"<!-- {block}:start -->", f"<!-- {block}:end -->"


def readme_table(block: str = "learning-table") -> str:
    """The text README.md holds now between the block's markers."""
    start, end = _markers(block)
    with open(README) as file:
        found = re.search(re.escape(start) + "(.*?)" + re.escape(end), file.read(), flags=re.DOTALL)
    if found is None:
        raise SystemExit(f"README.md has no {start} ... {end} block to rewrite")
    return found.group(1).strip("\n")


def update_readme(table: str, block: str = "learning-table") -> None:
    start, end = _markers(block)
    with open(README) as file:
        text = file.read()
    with open(README, "w") as file:
        file.write(re.sub(re.escape(start) + ".*?" + re.escape(end), lambda _: f"{start}\n{table}\n{end}", text,
                          flags=re.DOTALL))


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
                        help="log into docs/results/runs (seeds 0..7) or docs/results/untuned (1000..1007), then "
                             "render README.md's table and docs/results/ from the logs")
    parser.add_argument("--results", help="where the populations' logs go (default: a temporary folder, or "
                                          "docs/results/{runs,untuned} with --update-readme)")
    parser.add_argument("--from-logs", action="store_true",
                        help="train nothing: render README.md's table and docs/results/ from the committed logs")
    args = parser.parse_args()
    if args.from_logs and (args.update_readme or args.override or args.first_seed != 0 or args.num_seeds != 8
                           or args.results or args.algorithms != list(TARGETS)):
        parser.error("--from-logs trains nothing and renders every row from docs/results: give it alone")
    if args.update_readme and (args.override or args.first_seed not in (0, 1000) or args.num_seeds != 8
                               or args.results):
        parser.error("--update-readme logs the shipped defaults on seeds 0..7 or 1000..1007 (--first-seed 1000) "
                     "into docs/results: drop --override, --num-seeds and --results")
    try:
        require_extra()  # the table is the report's: refuse before hours of training, not after
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.update_readme or args.from_logs:
        readme_table()  # a README without the table blocks is refused before hours of training
        readme_table(SEBULBA_BLOCK)
        readme_table(GPU_BRAX_BLOCK)
        readme_table(PIXELS_BLOCK)
        readme_table(SWEEP_SPEED_BLOCK)
        readme_table(TORSO_CHECK_BLOCK)
        readme_table(ATARI_BLOCK)
    if args.from_logs:
        return render_into_readme("python benchmarks/learning_table.py --from-logs")
    selected = selected_targets(args.algorithms)
    command = "python benchmarks/learning_table.py" + (
        f" --first-seed {args.first_seed}" if args.first_seed else "") + (
        f" --num-seeds {args.num_seeds}" if args.num_seeds != 8 else "") + (
        f" --algorithms {' '.join(args.algorithms)}" if args.algorithms != list(TARGETS) else "") + (
        " --update-readme" if args.update_readme else "")
    with tempfile.TemporaryDirectory() as scratch:
        results = ((UNTUNED if args.first_seed else RUNS) if args.update_readme
                   else (args.results or os.path.join(scratch, "runs")))
        problems = []
        for algorithm, target in selected:
            run_dir = run_dir_of(results, algorithm, target)
            shutil.rmtree(run_dir, ignore_errors=True)  # a row is one population: never pooled with an older one
            run = train_population(algorithm, compose_into(run_dir), args.first_seed, args.num_seeds,
                                   args.override, env=target.env)
            print("ROW " + run.describe(), flush=True)
            problems += run.problems
    if args.update_readme:
        render_into_readme(command)
    return 0 if not problems else 1


def render_into_readme(command: str) -> int:
    """README.md's table and docs/results/ (the report of seeds 0..7) from the committed logs; 1 if a target has
    none."""
    from stoix_like.report.build import build_report

    try:
        table = rendered_table()
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    build_report([RUNS], RESULTS, command=command)
    update_readme(table)
    update_readme(rendered_sebulba_table(), SEBULBA_BLOCK)
    update_readme(rendered_continuous_table(), CONTINUOUS_BLOCK)
    update_readme(rendered_pbt_table(), PBT_BLOCK)
    update_readme(rendered_gpu_brax_table(), GPU_BRAX_BLOCK)
    update_readme(rendered_pixels_table(), PIXELS_BLOCK)
    update_readme(rendered_sweep_speed_table(), SWEEP_SPEED_BLOCK)
    update_readme(rendered_torso_check_table(), TORSO_CHECK_BLOCK)
    update_readme(rendered_atari_table(), ATARI_BLOCK)
    print(f"README.md: learning table rendered from {os.path.relpath(RUNS, REPO_ROOT)} and "
          f"{os.path.relpath(UNTUNED, REPO_ROOT)}, Sebulba's from {os.path.relpath(SEBULBA, REPO_ROOT)}, continuous "
          f"control's from {os.path.relpath(BRAX_PEER, REPO_ROOT)}, PBT's from "
          f"{os.path.relpath(PBT_RESULTS, REPO_ROOT)}, the GPU's brax table from {os.path.relpath(GPU_BRAX, REPO_ROOT)}, "
          f"the pixels table from {os.path.relpath(REJAX_PEER, REPO_ROOT)}, the ResNet check's from "
          f"{os.path.relpath(TORSO_CHECK, REPO_ROOT)}, the Atari table from {os.path.relpath(ATARI, REPO_ROOT)}, "
          f"the sweep-speed table from "
          f"{os.path.relpath(SWEEP_SPEED, REPO_ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
