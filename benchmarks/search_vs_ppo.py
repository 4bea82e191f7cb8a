"""AlphaZero against PPO on a jumanji task at the same env-step budget (issue 11), with a random policy for scale.

    python benchmarks/search_vs_ppo.py                          # jumanji/game2048, 8 seeds each, 256,000 steps
    python benchmarks/search_vs_ppo.py --num-seeds 4 --steps 64000
    python benchmarks/search_vs_ppo.py --first-seed 1000        # seeds nobody looked at

Both algorithms run their shipped defaults (config/az.yaml, config/ppo.yaml) with only the budget and the env
changed: `arch.total_timesteps` is the same for both, a whole number of updates of each (`--steps` is rounded up to
the nearest such budget), with as many evaluations as the default asks for, or the most fewer that split it
evenly. Each population is its seeds in one program; the printed figure is the IQM of the seeds' absolute returns
(the mean return of the best parameters over 10× the evaluation episodes) with a 95% bootstrap interval, and the
wall time, compilation included. AlphaZero is judged as it is evaluated everywhere: its policy network alone, no
search (the evaluator gives observations, not env states).

What "the same budget" means here: real env steps. AlphaZero's search also steps a copy of the env
`system.num_simulations` times per real step (its model is the env itself), so it computes ~num_simulations× more
env steps and network passes than PPO for the same budget; the wall times show that cost.

Game2048's tile spawns draw on a key held in the env state, so the env-as-model search sees the very tiles the real
env will spawn: an exact model, as AlphaZero assumes of a simulator, not one that must plan over chance outcomes.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import tempfile
import time
from typing import List, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from suites_learning import compose_into

from stoix_like.run import experiment
from stoix_like.claims import population
from stoix_like.envs import make
from stoix_like.learner.evaluator import make_evaluator
from stoix_like.systems import system_module

ALGORITHMS = ("az", "ppo")
RANDOM_EPISODES = 256


def steps_per_update(config) -> int:
    return int(config.system.rollout_length) * int(config.arch.total_num_envs)


def common_budget(compose, env: str, requested: int) -> int:
    """The smallest budget ≥ `requested` that both algorithms' defaults split into whole updates."""
    granularity = math.lcm(*(steps_per_update(compose(name, [f"env={env}"])) for name in ALGORITHMS))
    return max(1, math.ceil(requested / granularity)) * granularity


def evaluations_for(compose, algorithm: str, env: str, budget: int) -> int:
    """The most evaluations, up to the default's, that split `budget` into equal whole numbers of updates."""
    config = compose(algorithm, [f"env={env}"])
    updates = budget // steps_per_update(config)
    return max(count for count in range(1, int(config.arch.num_evaluation) + 1) if updates % count == 0)


def random_policy_return(compose, env: str, seed: int) -> str:
    """Uniformly random legal actions on the eval env: the mean return with a normal 95% interval."""
    _, eval_env = make(compose("ppo", [f"env={env}"]).env)

    def random_legal(_params, observation, key):
        return jax.random.categorical(key, jnp.where(observation.action_mask, 0.0, -jnp.inf))

    returns = make_evaluator(eval_env, random_legal, RANDOM_EPISODES)(None, jax.random.PRNGKey(seed))["episode_return"]
    half_width = 1.96 * returns.std() / np.sqrt(len(returns))
    return f"random legal actions: mean return {returns.mean():.1f} ± {half_width:.1f} (95%) over {RANDOM_EPISODES} episodes"


def final_acting_returns(run_dir: str, algorithm: str, seeds: Sequence[int]) -> List[float]:
    """Each seed's mean return over the episodes that ended in the last learn call, as its training log line says:
    how the agent does while it acts as it learns (AlphaZero: with its search; PPO: sampling its policy)."""
    (log_path,) = [os.path.join(root, f"{algorithm}.log") for root, _, files in os.walk(run_dir)
                   if f"{algorithm}.log" in files]
    with open(log_path) as log:
        lines = log.read().splitlines()
    last = {}
    for line in lines:
        match = re.match(r"\[train(?: seed (\d+))?\] .*?\| return +([-\d.]+) ", line)
        if match:  # a one-seed run's lines name no seed
            last[int(match.group(1)) if match.group(1) else seeds[0]] = float(match.group(2))
    return [last[seed] for seed in seeds]


def train(compose, run_dir: str, algorithm: str, env: str, budget: int, first_seed: int, num_seeds: int,
          overrides: Sequence[str]) -> List[str]:
    evaluations = evaluations_for(compose, algorithm, env, budget)
    config = compose(algorithm, [f"env={env}", f"arch.total_timesteps={budget}", f"arch.num_evaluation={evaluations}",
                                 f"arch.seed={first_seed}", f"arch.num_seeds={num_seeds}", *overrides])
    start = time.perf_counter()
    result = experiment.train(config, system_module(algorithm).learner_setup, algorithm)
    wall = time.perf_counter() - start
    seeds = experiment.seeds_of(config)
    judged = population.summarize(result.absolute_returns, seeds, solved_return=None)
    acting = population.summarize(final_acting_returns(run_dir, algorithm, seeds), seeds, solved_return=None)
    policy = "policy network alone" if algorithm == "az" else "policy"
    return [f"ROW {algorithm}, {budget:,} steps per seed, {wall:.0f}s: absolute return ({policy}) {judged.describe()}",
            f"ROW {algorithm}: acting return in the last learn call ({'search' if algorithm == 'az' else 'sampled'}"
            f" actions) {acting.describe()}"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="jumanji/game2048")
    parser.add_argument("--steps", type=int, default=256_000, help="env steps per seed (rounded up to fit both)")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--num-seeds", type=int, default=8)
    parser.add_argument("--az", action="append", default=[], help="an override for AlphaZero only (key=value)")
    parser.add_argument("--ppo", action="append", default=[], help="an override for PPO only (key=value)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        compose = compose_into(scratch)
        budget = common_budget(compose, args.env, args.steps)
        print(f"{args.env}: {budget:,} env steps per seed for each algorithm, seeds {args.first_seed}.."
              f"{args.first_seed + args.num_seeds - 1}", flush=True)
        rows = ["ROW " + random_policy_return(compose, args.env, args.first_seed)]
    overrides = {"az": args.az, "ppo": args.ppo}
    for algorithm in ALGORITHMS:
        with tempfile.TemporaryDirectory() as run_dir:  # one algorithm's logs alone, for its training lines
            rows += train(compose_into(run_dir), run_dir, algorithm, args.env, budget, args.first_seed,
                          args.num_seeds, overrides[algorithm])
        print("\n".join(rows[-2:]), flush=True)
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
