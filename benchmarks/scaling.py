"""PPO's learning throughput against the acting-only ceiling as the env batch grows.

    python benchmarks/scaling.py [--env gymnax/cartpole] [--envs 16 64 256 1024 2048 4096]
                                 [--update-batch-sizes 1 4] [--steps-per-size 1048576] [--seed 42]
                                 [--rollout-unrolls 1 5]
    python benchmarks/scaling.py --env brax/ant --envs 16 128 1024 2048 --steps-per-size 524288

For each env count N (`arch.total_num_envs`) and update batch U (`arch.update_batch_size`: U learner copies per
device, N / U envs each, gradients averaged) it trains PPO with its shipped defaults for the env (rollout length,
epochs, minibatches, network) on about `--steps-per-size` env steps in two learn calls, after an ahead-of-time
compile and one untimed warm-up call, and times the two learn calls alone. The ceiling is the same N envs through
our env layer with uniformly random actions and no network (`loop_timing.random_acting_rate`), one learn call's
steps per run, the fastest of three runs after a warm-up. A program's first run on a GPU also builds its command
buffers, which is no part of steady speed (it made both sides look slower, the short ceiling most). Acting and
learning on those envs can at best match the ceiling, so PPO / ceiling is the share of the machine that stepping
the envs leaves to acting with a network and learning. Issue 15's check: PPO on 2,048 CartPoles reaches at least
0.3 of the ceiling.

`--rollout-unrolls K ...` sets `arch.rollout_unroll`, a row for each K: K env steps per iteration of PPO's compiled
acting loop (the ceiling's loop is not unrolled). 1 suits a CPU; on a GPU, 5 cut the loop's kernel-launch overhead
(README's Benchmarks, On a GPU).

Figures depend on the machine and its load: read the ratios, which are taken in the same run at each size.
"""

from __future__ import annotations

import argparse
from typing import Dict, List

import jax

from loop_timing import OurLearning, random_acting_rate  # same directory
from value_based_cartpole import compose

LEARN_CALLS = 2  # the learn calls timed per size
UNTIMED_CALLS = 1  # a warm-up learn call first: on a GPU a program's first run also builds its command buffers
CEILING_RUNS = 4  # the ceiling's loop, as long as one learn call: a warm-up, then the fastest of 3
RATIO_TARGET = 0.3  # PPO at 2,048 CartPole envs, as a share of the acting-only ceiling
RATIO_TARGET_ENVS = 2048


def ppo_budget_overrides(env: str, num_envs: int, update_batch_size: int, steps_per_size: int,
                         rollout_unroll: int = 1) -> List[str]:
    """Overrides for ~steps_per_size env steps in LEARN_CALLS whole learn calls of whole updates."""
    rollout_length = int(compose("ppo", [f"env={env}"]).system.rollout_length)
    steps_per_update = rollout_length * num_envs
    updates_per_call = max(1, round(steps_per_size / (LEARN_CALLS * steps_per_update)))
    calls = LEARN_CALLS + UNTIMED_CALLS
    return [f"env={env}", f"arch.total_num_envs={num_envs}", f"arch.update_batch_size={update_batch_size}",
            f"arch.num_evaluation={calls}", f"arch.total_timesteps={calls * updates_per_call * steps_per_update}",
            f"arch.rollout_unroll={rollout_unroll}"]


def measure(env: str, num_envs: int, update_batch_size: int, steps_per_size: int, seed: int,
            rollout_unroll: int = 1) -> Dict[str, float]:
    from stoix_like.systems.on_policy import ppo

    config = compose("ppo", ppo_budget_overrides(env, num_envs, update_batch_size, steps_per_size, rollout_unroll)
                     + [f"arch.seed={seed}"])
    learning = OurLearning(ppo.learner_setup, config, seed, untimed_calls=UNTIMED_CALLS)
    ppo_rate = learning.learning_steps / learning.learn_budget()
    ceiling = random_acting_rate(config.env, num_envs, learning.steps_per_call // num_envs, seed, runs=CEILING_RUNS)
    return {"ppo_steps_per_s": ppo_rate, "ceiling_steps_per_s": ceiling["steps_per_s"],
            "ratio": ppo_rate / ceiling["steps_per_s"], "compile_s": learning.compile_seconds,
            "budget_steps": learning.budget.total_timesteps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="gymnax/cartpole", help="an env= option, e.g. gymnax/cartpole, brax/ant")
    parser.add_argument("--envs", type=int, nargs="+", default=[16, 64, 256, 1024, 2048, 4096])
    parser.add_argument("--update-batch-sizes", type=int, nargs="+", default=[1])
    parser.add_argument("--steps-per-size", type=int, default=1_048_576)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--rollout-unrolls", type=int, nargs="+", default=[1],
                        help="arch.rollout_unroll values for PPO, a row each (GPU: try 1 5)")
    args = parser.parse_args()
    for num_envs in args.envs:
        for update_batch_size in args.update_batch_sizes:
            if num_envs % update_batch_size:
                parser.error(f"--envs {num_envs} is not a multiple of --update-batch-sizes {update_batch_size}: "
                             "every learner copy steps the same number of envs")

    print(f"PPO on {args.env} against the acting-only ceiling | jax {jax.__version__} on "
          f"{jax.devices()[0].platform} ({jax.device_count()} device)")
    print(f"{'envs':>6}{'update batch':>14}{'unroll':>8}{'budget':>12}{'compile s':>11}{'PPO steps/s':>14}"
          f"{'ceiling steps/s':>17}{'PPO / ceiling':>15}", flush=True)
    ratios = {}
    for num_envs in args.envs:
        for update_batch_size in args.update_batch_sizes:
            for unroll in args.rollout_unrolls:
                row = measure(args.env, num_envs, update_batch_size, args.steps_per_size, args.seed, unroll)
                ratios[(num_envs, update_batch_size, unroll)] = row["ratio"]
                print(f"{num_envs:>6}{update_batch_size:>14}{unroll:>8}{row['budget_steps']:>12,}"
                      f"{row['compile_s']:>11.1f}{row['ppo_steps_per_s']:>14,.0f}"
                      f"{row['ceiling_steps_per_s']:>17,.0f}{row['ratio']:>15.3f}", flush=True)
    if args.env == "gymnax/cartpole":
        for (num_envs, update_batch_size, unroll), ratio in ratios.items():
            if (num_envs, update_batch_size) == (RATIO_TARGET_ENVS, 1):
                print(f"target: PPO at {RATIO_TARGET_ENVS:,} CartPole envs (unroll {unroll}) at least {RATIO_TARGET} "
                      f"of the ceiling: {ratio:.3f}, {'met' if ratio >= RATIO_TARGET else 'missed'}")


if __name__ == "__main__":
    main()
