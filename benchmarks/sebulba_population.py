"""A learning population under arch=sebulba: one single-seed run per seed (Sebulba's actor threads hold one seed's
params each, so seeds are not vmapped into one program), summarised as every population here is: the IQM of the
seeds' absolute returns with a 95% bootstrap interval, and the seeds that solved the task, judged against
stoix_like/claims/learning_targets.SEBULBA_TARGETS.

    python benchmarks/sebulba_population.py                               # PPO, gymnasium CartPole, seeds 1000..1003
    python benchmarks/sebulba_population.py --seeds 4 --first-seed 0 -o arch.num_actor_threads=2
    python benchmarks/sebulba_population.py --algorithm impala -o network=mlp_impala_shared   # IMPALA, shared torso
    python benchmarks/sebulba_population.py --from-logs DIR               # summarise runs already in DIR/**/ppo.log

Atari through envpool (`--task envpool/<game>`, judged against learning_targets.ATARI_TARGETS), README's Atari row:

    python benchmarks/sebulba_population.py --task envpool/breakout --seeds 2 --results docs/results/atari/breakout \
        -o network=cnn_ppo_nature_shared -o arch.total_timesteps=430080 -o arch.num_evaluation=5

Each run logs under --results (default: a temporary folder) as a normal Hydra-less run does.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import tempfile
from typing import List, Tuple

from stoix_like.claims import learning_targets, population
from stoix_like.config.compose import compose_config


def absolute_returns_in(directory: pathlib.Path, algorithm: str) -> List[Tuple[int, float]]:
    """(seed, absolute return) of every finished run logged under `directory`: the seed from its run.json, the
    absolute return as the mean of its metrics.json's absolute-metric episodes (what the run logged)."""
    found = []
    for record in sorted(directory.rglob("run.json")):
        metrics_file = record.parent / "metrics.json"
        if not metrics_file.exists():
            continue
        seed = int(json.loads(record.read_text())["seeds"][0])
        metrics = json.loads(metrics_file.read_text())
        for suite in metrics.values():
            for task in suite.values():
                absolute = task.get(algorithm, {}).get(f"seed_{seed}", {}).get("absolute_metrics")
                if absolute:
                    found.append((seed, float(sum(absolute["episode_return"]) / len(absolute["episode_return"]))))
    return found


def argument_parser() -> argparse.ArgumentParser:
    """The command line, apart so that README's `checked by` commands can be checked against it."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algorithm", default="ppo", choices=sorted(learning_targets.SEBULBA_TARGETS))
    atari_tasks = sorted({env for _, env in learning_targets.ATARI_TARGETS})
    parser.add_argument("--task", default=None, choices=atari_tasks,
                        help="an Atari game (PPO only); default: the algorithm's CartPole target")
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--first-seed", type=int, default=1000, help="untuned seeds by default")
    parser.add_argument("--results", default=None)
    parser.add_argument("--from-logs", default=None, help="summarise the runs under this folder; train nothing")
    parser.add_argument("-o", "--override", action="append", default=[])
    return parser


def main(argv: List[str] | None = None) -> None:
    parser = argument_parser()
    args = parser.parse_args(argv)
    if args.task is None:
        target = learning_targets.SEBULBA_TARGETS[args.algorithm]
    elif (args.algorithm, args.task) in learning_targets.ATARI_TARGETS:
        target = learning_targets.ATARI_TARGETS[(args.algorithm, args.task)]
    else:
        parser.error(f"--task {args.task} has a target for PPO only: drop --algorithm {args.algorithm}")

    if args.from_logs:
        seeds_and_returns = absolute_returns_in(pathlib.Path(args.from_logs), args.algorithm)
    else:
        from stoix_like.run.sebulba import loop
        from stoix_like.systems.on_policy import impala, ppo

        setups = {"ppo": ppo.sebulba_setup, "impala": impala.sebulba_setup}
        results = pathlib.Path(args.results or tempfile.mkdtemp(prefix="sebulba_population_"))
        seeds_and_returns = []
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            config = compose_config(args.algorithm, ["arch=sebulba", f"env={target.env}", f"arch.seed={seed}",
                                                     f"logger.base_exp_path={results}/seed_{seed}", *args.override])
            result = loop.run(config, setups[args.algorithm], args.algorithm)
            seeds_and_returns.append((seed, result.absolute_return))
    seeds, returns = zip(*sorted(seeds_and_returns))
    summary = population.summarize(returns, seeds, target.solved_return)
    problems = learning_targets.shortfalls(target, summary)
    print(f"{args.algorithm} (sebulba) on {target.env}: {summary.describe()}")
    print("target met" if not problems else "target missed: " + "; ".join(problems))


if __name__ == "__main__":
    main()
