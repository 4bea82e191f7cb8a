"""Ours against rejax's PPO, PQN or DQN on a MinAtar game: the same env (gymnax), budget, update shape,
hyperparameters and seeds, each side's seeds in one program.

    python benchmarks/minatar_rejax_peer.py --task breakout [--algorithm ppo|pqn|dqn] [--first-seed 1001]
                                            [--num-seeds 4] [--side ours|rejax|both] [--timesteps 5120000]

Ours is the shipped file for the algorithm and game (`config/tuned/<algorithm>/gymnax/<game>.yaml`, composed by
`env=gymnax/<game>`) at the issue's budget of 5,120,000 steps per seed (`arch.total_timesteps` is the one override;
a file's own budget may be sized for its CI-checked row). rejax (installed with `pip install --no-deps rejax`; not
one of our dependencies) trains `rejax.PPO` (or `rejax.PQN`, `rejax.DQN`) on the same gymnax env with the numbers
read from that composed config. PPO:

- one update = every env unrolled `system.rollout_length` steps (rejax: `num_envs`, `num_steps`), `system.epochs`
  passes (`num_epochs`) over `system.num_minibatches` minibatches;
- γ, λ, clip ε, learning rate, entropy and value-loss weights, gradient-norm clip, observation normalisation and
  the MLP's sizes and activation: the same numbers;
- what stays rejax's own: its learning rate is constant (ours follows `system.decay_learning_rates`), one
  optimiser state per network with its own defaults, and its init. Both policies sample their actions when
  evaluated (ours: `arch.evaluation_greedy=False`).

PQN: the same update shape, learning rate, gradient-norm clip, γ, λ (rejax's `td_lambda`), ε's start, end and decay
fraction (`exploration_fraction`); rejax's Q-network is always 2 × 64 with relu after LayerNorm, so ours must be
too, and its rewards are never scaled (`system.reward_scale` must be 1). What stays rejax's own: a constant learning
rate and its init. Both evaluate ε-greedily at rejax's ε = 0.005 (ours: `system.evaluation_epsilon`, set here).

DQN: `rejax_arguments.rejax_dqn_config` (shared with benchmarks/value_based_cartpole.py) says what maps onto what:
the same envs, gradient steps per env step, batch, buffer, warm-up, learning rate, gradient-norm clip, γ, ε schedule
and target copies; rejax's network is 2 × 64 and its loss the squared error, so ours must be too. Both evaluate at
rejax's ε = 0.005, as PQN's.

rejax runs its seeds as one program too (`jax.vmap` of its `train` over the seeds' keys), its evaluator inside it
(128 episodes every `total_timesteps / arch.num_evaluation` steps, and once before training). Ours logs its run into
`docs/results/rejax_peer/<algorithm>/<game>/ours_<first seed>/`; rejax's per-seed returns go to
`docs/results/rejax_peer/<algorithm>/<game>/rejax_<first seed>.json`. README's "Pixels" table is rendered from both
(`python benchmarks/learning_table.py --from-logs`). "final" is, for ours, the final params over 10× the
evaluation episodes, for rejax its last evaluation; "absolute" is, for ours, the best params re-evaluated, and for
rejax (which keeps no best params) its best evaluation, which is if anything generous to rejax. Wall time is the
whole program: compilation, learning and evaluations.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from typing import Any, Dict

import numpy as np

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rejax_arguments import rejax_config  # noqa: E402  (benchmarks/, on the path set above)
from stoix_like.claims.learning_targets import MINATAR_GAMES  # noqa: E402  (after the path is set)
RESULTS = os.path.join(REPO_ROOT, "docs", "results", "rejax_peer")
TUNED = os.path.join(REPO_ROOT, "config", "tuned")
ALGORITHMS = ("ppo", "pqn", "dqn")
BUDGET = 5_120_000  # the "at least 5M steps", in whole evaluation intervals of the shipped update


# rejax's PQN and DQN evaluate ε-greedily at this ε (hard-coded in their `make_act`, rejax/algos/pqn.py and dqn.py);
# ours plays the same protocol through `system.evaluation_epsilon`, so that the two are judged alike
REJAX_EVALUATION_EPSILON = 0.005


def composed(algorithm: str, game: str, first_seed: int, num_seeds: int, timesteps: int, run_dir: str):
    from stoix_like.config.compose import compose_config

    protocol = [f"system.evaluation_epsilon={REJAX_EVALUATION_EPSILON}"] if algorithm in ("pqn", "dqn") else []
    return compose_config(algorithm, [f"env=gymnax/{game}", f"arch.seed={first_seed}", f"arch.num_seeds={num_seeds}",
                                      f"arch.total_timesteps={timesteps}", f"logger.base_exp_path={run_dir}",
                                      *protocol])


def run_ours(config) -> None:
    from stoix_like.run import experiment
    from stoix_like.systems import system_module

    algorithm = str(config.system.system_name)
    experiment.train(config, system_module(algorithm).learner_setup, algorithm)


def run_rejax(config, seeds) -> Dict[str, Any]:
    import jax

    from rejax_peer import rejax_algorithm

    kwargs = rejax_config(config)
    start = time.perf_counter()
    algo = rejax_algorithm(str(config.system.system_name).upper(), dict(kwargs), env_name=str(config.env.scenario.name),
                           evaluations=True)
    keys = jax.numpy.stack([jax.random.PRNGKey(seed) for seed in seeds])
    _, (lengths, returns) = jax.block_until_ready(jax.jit(jax.vmap(algo.train))(keys))
    seconds = time.perf_counter() - start
    per_evaluation = np.asarray(returns).mean(axis=-1)  # (seeds, evaluations): the first is before training
    steps = [k * kwargs["eval_freq"] for k in range(per_evaluation.shape[1])]
    return {"final": [float(row[-1]) for row in per_evaluation],
            "absolute": [float(row[1:].max()) for row in per_evaluation],
            "evaluations": [[(step, float(value)) for step, value in zip(steps, row)] for row in per_evaluation],
            "wall_seconds": seconds, "config": kwargs, "env": str(config.env.scenario.name)}


def argument_parser() -> argparse.ArgumentParser:
    """The command line, apart so that README's `checked by` commands can be checked against it."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=MINATAR_GAMES, required=True)
    parser.add_argument("--algorithm", choices=ALGORITHMS, default="ppo")
    parser.add_argument("--first-seed", type=int, default=1001)
    parser.add_argument("--num-seeds", type=int, default=4)
    parser.add_argument("--side", choices=("ours", "rejax", "both"), default="both")
    parser.add_argument("--timesteps", type=int, default=BUDGET, help="env steps per seed (default: %(default)s)")
    parser.add_argument("--results", default=RESULTS, help="where both sides write (default: docs/results/rejax_peer)")
    return parser


def main() -> None:
    parser = argument_parser()
    args = parser.parse_args()
    if args.num_seeds < 1:
        parser.error("--num-seeds must be at least 1")
    if not os.path.exists(os.path.join(TUNED, args.algorithm, "gymnax", f"{args.task}.yaml")):
        parser.error(f"--task {args.task}: no tuned {args.algorithm} file for it yet "
                     f"(config/tuned/{args.algorithm}/gymnax/{args.task}.yaml); the comparison runs shipped files only")
    if args.side in ("rejax", "both"):
        try:
            import rejax  # noqa: F401
        except ImportError:
            parser.error("rejax is not installed: pip install --no-deps rejax (it is not one of our dependencies)")
    out_dir = os.path.join(args.results, args.algorithm, args.task)
    os.makedirs(out_dir, exist_ok=True)
    ours_dir = os.path.join(out_dir, f"ours_{args.first_seed}")
    seeds = list(range(args.first_seed, args.first_seed + args.num_seeds))
    config = composed(args.algorithm, args.task, args.first_seed, args.num_seeds, args.timesteps,
                      os.path.relpath(ours_dir))
    if args.side in ("ours", "both"):
        shutil.rmtree(ours_dir, ignore_errors=True)  # a population is one program: never pooled with an older one
        run_ours(config)
    if args.side in ("rejax", "both"):
        result = run_rejax(config, seeds)
        result.update(seeds=seeds, total_timesteps=int(config.arch.total_timesteps), date=time.strftime("%Y-%m-%d"))
        print(f"rejax: final {', '.join(f'{value:.2f}' for value in result['final'])} "
              f"in {result['wall_seconds']:.0f}s", flush=True)
        with open(os.path.join(out_dir, f"rejax_{args.first_seed}.json"), "w") as file:
            json.dump(result, file, indent=1)


if __name__ == "__main__":
    main()
