"""PPO's populations on the added suites (issue 14) and the memory tasks (issue 12), the figures of README's suite
table.

    python benchmarks/suites_learning.py random-breakout            # a uniformly random policy on MinAtar Breakout
    python benchmarks/suites_learning.py random-asterix random-freeway random-space_invaders   # the other games
    python benchmarks/suites_learning.py navix breakout             # the two learning targets, seeds 0..7
    python benchmarks/suites_learning.py craftax                    # Craftax-Classic-Symbolic at 1M steps: a figure
    python benchmarks/suites_learning.py navix --first-seed 1000    # seeds nobody tuned on
    python benchmarks/suites_learning.py memory-chain repeat-previous   # recurrent vs feed-forward PPO

`navix` and `breakout` are PPO's learning targets on `navix/empty_8x8` (success rate ≥ 0.9; navix's return is
1 at the goal, 0 otherwise) and `gymnax/breakout` (≥ 5× a random policy's return, RANDOM_BREAKOUT_RETURN in
stoix_like/claims/learning_targets.py, which `random-breakout` measures): the same claim as
`benchmarks/learning_table.py --algorithms ppo@<env>`, 8 seeds in one program, IQM with a 95% bootstrap interval.
`craftax` reports Craftax-Classic-Symbolic's return and achievement rate (the share of its 22 achievements an
episode unlocks) after 1M steps, with no threshold. Each needs its suite's extra (`pip install -e ".[suites]"`).
`memory-chain` (bsuite's MemoryChain, `gymnax/memory_chain`) and `repeat-previous` (`popjax/repeat_previous`) train
recurrent PPO and feed-forward PPO on the same seeds and budget (`learning_population.compare_memory`) and print
both populations: recurrent PPO must meet its target, feed-forward stay clearly below it. MemoryChain's success
rate is (return + 1) / 2, RepeatPrevious's is its return (the share of right answers).
Wall times depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from typing import List, Sequence

import jax
import numpy as np

from stoix_like.run import experiment
from stoix_like.claims import population
from stoix_like.envs import make
from stoix_like.learner.evaluator import make_evaluator
from stoix_like.claims.learning_population import compare_memory, train_population
from stoix_like.claims.learning_targets import MINATAR_GAMES, RANDOM_MINATAR_RETURN
from stoix_like.systems import system_module

RANDOM_EPISODES = 1000
RANDOM_GAMES = tuple(f"random-{game}" for game in MINATAR_GAMES)
CRAFTAX = "craftax/classic_symbolic"
MEMORY_TASKS = {"memory-chain": "gymnax/memory_chain", "repeat-previous": "popjax/repeat_previous"}
# A memory task's mean return as a success rate: MemoryChain's episodes end +1 or -1, RepeatPrevious's return is the
# share of right answers. Both maps are affine and increasing, so they carry an IQM and its interval's ends exactly.
SUCCESS_RATE_OF_RETURN = {"gymnax/memory_chain": lambda r: (r + 1) / 2, "popjax/repeat_previous": lambda r: r}


def compose_into(run_dir: str):
    from hydra import compose, initialize_config_dir

    from stoix_like.config.compose import CONFIG_DIR

    def _compose(config_name: str, overrides: Sequence[str]):
        with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
            return compose(config_name=config_name, overrides=[*overrides, f"logger.base_exp_path={run_dir}"])
    return _compose


def random_minatar(game: str, seed: int) -> float:
    """Mean return of uniformly random actions over RANDOM_EPISODES episodes of the shipped MinAtar `game` env
    (`gymnax/<game>`): the unit of the MinAtar bars in stoix_like/claims/learning_targets.py."""
    config = compose_into(tempfile.mkdtemp())("ppo", [f"env=gymnax/{game}"])
    _, eval_env = make(config.env)
    num_actions = eval_env.action_space.num_actions

    def random_policy(_params, observation, key):
        return jax.random.randint(key, observation.action_mask.shape[:1], 0, num_actions)

    returns = make_evaluator(eval_env, random_policy, RANDOM_EPISODES)(None, jax.random.PRNGKey(seed))["episode_return"]
    half_width = 1.96 * returns.std() / np.sqrt(len(returns))  # a normal 95% interval of the mean
    print(f"random policy on gymnax/{game}: mean return {returns.mean():.3f} ± {half_width:.3f} (95%) over "
          f"{RANDOM_EPISODES} episodes (seed {seed}); RANDOM_MINATAR_RETURN[{game!r}] = "
          f"{RANDOM_MINATAR_RETURN.get(game)}")
    return float(returns.mean())


def target_population(env: str, first_seed: int, num_seeds: int, overrides: List[str]) -> bool:
    with tempfile.TemporaryDirectory() as run_dir:
        run = train_population("ppo", compose_into(run_dir), first_seed, num_seeds, overrides, env=env)
    print("ROW " + run.describe(), flush=True)
    return not run.problems


def memory_populations(env: str, first_seed: int, num_seeds: int) -> bool:
    with tempfile.TemporaryDirectory() as run_dir:
        comparison = compare_memory(compose_into(run_dir), env, first_seed, num_seeds)
    for line in comparison.describe().splitlines():
        print("ROW " + line, flush=True)
    success_rate = SUCCESS_RATE_OF_RETURN[env]
    for name, summary in (("rec_ppo", comparison.recurrent.summary), ("ppo (feed-forward)", comparison.feed_forward)):
        low, high = summary.interval
        print(f"ROW {name} on {env}: success rate IQM {success_rate(summary.iqm):.1%} [95% CI {success_rate(low):.1%},"
              f" {success_rate(high):.1%}]", flush=True)
    return not comparison.problems


def craftax_population(first_seed: int, num_seeds: int, overrides: List[str]) -> None:
    with tempfile.TemporaryDirectory() as run_dir:
        config = compose_into(run_dir)("ppo", [f"env={CRAFTAX}", f"arch.seed={first_seed}",
                                               f"arch.num_seeds={num_seeds}", *overrides])
        start = time.perf_counter()
        result = experiment.train(config, system_module("ppo").learner_setup, "ppo")
        wall = time.perf_counter() - start
        (metrics_path,) = [os.path.join(root, "metrics.json") for root, _, files in os.walk(run_dir)
                           if "metrics.json" in files]
        with open(metrics_path) as file:
            runs = json.load(file)["craftax"]["Craftax-Classic-Symbolic-v1"]["ppo"]
    seeds = experiment.seeds_of(config)
    rates = [float(np.mean(runs[f"seed_{seed}"]["absolute_metrics"]["achievement_rate"])) for seed in seeds]
    curve = [float(np.mean([np.mean(runs[f"seed_{seed}"][f"step_{i}"]["episode_return"]) for seed in seeds]))
             for i in range(int(config.arch.num_evaluation))]
    for name, values in (("return", result.absolute_returns), ("achievement rate", rates)):
        low, high = population.bootstrap_interval(values)
        print(f"ROW ppo on {CRAFTAX}, {result.steps_done:,} steps per seed, {wall:.0f}s: {name} IQM "
              f"{population.interquartile_mean(values):.3f} [{low:.3f}, {high:.3f}] over seeds {seeds[0]}..{seeds[-1]}"
              f" (per seed: {', '.join(f'{v:.3f}' for v in values)})")
    print("mean eval return per evaluation: " + ", ".join(f"{value:.2f}" for value in curve))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", nargs="+", choices=(*RANDOM_GAMES, "navix", "breakout", "craftax", *MEMORY_TASKS))
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--num-seeds", type=int, default=8)
    parser.add_argument("-o", "--override", action="append", default=[])
    args = parser.parse_args()
    met = True
    for what in args.what:
        if what in RANDOM_GAMES:
            random_minatar(what.removeprefix("random-"), args.first_seed)
        elif what == "craftax":
            craftax_population(args.first_seed, args.num_seeds, args.override)
        elif what in MEMORY_TASKS:  # shipped defaults only: the comparison is of the configs both would run
            met &= memory_populations(MEMORY_TASKS[what], args.first_seed, args.num_seeds)
        else:
            env = {"navix": "navix/empty_8x8", "breakout": "gymnax/breakout"}[what]
            met &= target_population(env, args.first_seed, args.num_seeds, args.override)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
