"""C51 and QR-DQN against DQN: learning throughput on the same replay ratio, as ratios taken in one process.

    python benchmarks/distributional_speed.py [--total-timesteps 100640] [--rounds 7] [--num-seeds 4]

The three share config/system/shared/q_learning.yaml (16 envs × 16 steps per update, 64 gradient steps of 64
transitions: 0.25 gradient steps and 16 sampled transitions per env step), so at one `arch.total_timesteps` they
run the same updates and differ only in head and loss (and network width at the head: A × atoms or quantiles
outputs instead of A). Each is set up and compiled once, then their learn calls (one evaluation's worth of
updates each) are interleaved for `--rounds` rounds and the median steps/s is kept: the machine is shared and
noisy, so only ratios taken in one run compare. With `--num-seeds N`, C51 is also compiled for N vmapped seeds
and its learn call timed against the one-seed call: N seeds should cost at most N times one.
"""

from __future__ import annotations

import argparse

import jax

from loop_timing import OurLearning, interleaved_median_seconds  # same directory, as below
from stoix_like.learner import budget as budget_lib
from stoix_like.systems.q_learning import distributional_dqn, dqn
from value_based_cartpole import compose

CONTENDERS = {"DQN": ("dqn", dqn.learner_setup), "C51": ("c51", distributional_dqn.learner_setup),
              "QR-DQN": ("qr_dqn", distributional_dqn.learner_setup)}


def contender(label: str, total_timesteps: int, seed: int, num_seeds: int = 1) -> OurLearning:
    config_name, learner_setup = CONTENDERS[label]
    config = compose(config_name, [f"arch.total_timesteps={total_timesteps}", f"arch.seed={seed}"])
    return OurLearning(learner_setup, config, seed, num_seeds=num_seeds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--total-timesteps", type=int, default=100_640)
    parser.add_argument("--rounds", type=int, default=7, help="learn calls per system, interleaved")
    parser.add_argument("--num-seeds", type=int, default=0, help="also time C51 with this many vmapped seeds")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"CartPole-v1 | jax {jax.__version__} on {jax.devices()[0].platform} | {args.total_timesteps:,} steps")

    contenders = {label: contender(label, args.total_timesteps, args.seed) for label in CONTENDERS}
    if args.num_seeds > 1:
        contenders[f"C51 ×{args.num_seeds}"] = contender("C51", args.total_timesteps, args.seed, args.num_seeds)
    rounds = min(args.rounds, budget_lib.make_budget(
        compose("dqn", [f"arch.total_timesteps={args.total_timesteps}"])).num_evaluation)
    median_seconds = interleaved_median_seconds(contenders, rounds, run=OurLearning.learn_call)
    rates = {label: learning.steps_per_call / median_seconds[label] for label, learning in contenders.items()}

    print(f"{'':<10}{'compile s':>10}{'steps/s':>12}{'÷ DQN':>8}   (median of {rounds} interleaved learn calls)")
    for label, learning in contenders.items():
        print(f"{label:<10}{learning.compile_seconds:>10.1f}{rates[label]:>12,.0f}{rates[label] / rates['DQN']:>8.2f}")
    for label in ("C51", "QR-DQN"):
        print(f"{label} is {rates['DQN'] / rates[label]:.2f}× slower than DQN")
    if args.num_seeds > 1:
        ratio = median_seconds[f"C51 ×{args.num_seeds}"] / median_seconds["C51"]
        print(f"C51: {args.num_seeds} vmapped seeds take {ratio:.2f}× one seed's learning time "
              f"({ratio / args.num_seeds:.2f}× per seed)")


if __name__ == "__main__":
    main()
