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
import statistics
from typing import Callable, Dict, List

import jax

from stoix_like import envs as envs_lib
from stoix_like import experiment
from stoix_like.systems.q_learning import distributional_dqn, dqn
from value_based_cartpole import compose  # same directory

CONTENDERS = {"DQN": ("dqn", dqn.learner_setup), "C51": ("c51", distributional_dqn.learner_setup),
              "QR-DQN": ("qr_dqn", distributional_dqn.learner_setup)}


class Contender:
    """One system set up and compiled for `seeds`, stepping through its budget one learn call at a time."""

    def __init__(self, config_name: str, learner_setup: Callable, total_timesteps: int, seeds: List[int]):
        config = compose(config_name, [f"arch.total_timesteps={total_timesteps}", f"arch.seed={seeds[0]}"])
        budget = experiment.make_budget(config)
        train_env, _ = envs_lib.make(config.env)
        prepared = experiment.set_up(learner_setup, train_env, config, budget, seeds)
        self.learn, self.compile_seconds = experiment.compile_learner(prepared.system, prepared.fresh_state,
                                                                      num_seeds=len(seeds))
        self.learner_state = prepared.fresh_state
        self.steps_per_call = budget.steps_per_evaluation * len(seeds)  # over all seeds
        self.seconds: List[float] = []

    def learn_once(self) -> None:
        learned = experiment.learn_once(self.learn, self.learner_state)
        self.learner_state = learned.learner_state
        self.seconds.append(learned.seconds)

    @property
    def median_seconds(self) -> float:
        return statistics.median(self.seconds)


def interleave(contenders: Dict[str, Contender], rounds: int) -> None:
    for _ in range(rounds):
        for contender in contenders.values():
            contender.learn_once()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--total-timesteps", type=int, default=100_640)
    parser.add_argument("--rounds", type=int, default=7, help="learn calls per system, interleaved")
    parser.add_argument("--num-seeds", type=int, default=0, help="also time C51 with this many vmapped seeds")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"CartPole-v1 | jax {jax.__version__} on {jax.devices()[0].platform} | {args.total_timesteps:,} steps")

    contenders = {label: Contender(name, setup, args.total_timesteps, [args.seed])
                  for label, (name, setup) in CONTENDERS.items()}
    if args.num_seeds > 1:
        name, setup = CONTENDERS["C51"]
        contenders[f"C51 ×{args.num_seeds}"] = Contender(name, setup, args.total_timesteps,
                                                          list(range(args.seed, args.seed + args.num_seeds)))
    rounds = min(args.rounds, experiment.make_budget(
        compose("dqn", [f"arch.total_timesteps={args.total_timesteps}"])).num_evaluation)
    interleave(contenders, rounds)

    dqn_rate = contenders["DQN"].steps_per_call / contenders["DQN"].median_seconds
    print(f"{'':<10}{'compile s':>10}{'steps/s':>12}{'÷ DQN':>8}   (median of {rounds} interleaved learn calls)")
    for label, contender in contenders.items():
        rate = contender.steps_per_call / contender.median_seconds
        print(f"{label:<10}{contender.compile_seconds:>10.1f}{rate:>12,.0f}{rate / dqn_rate:>8.2f}")
    for label in ("C51", "QR-DQN"):
        rate = contenders[label].steps_per_call / contenders[label].median_seconds
        print(f"{label} is {dqn_rate / rate:.2f}× slower than DQN")
    if args.num_seeds > 1:
        ratio = contenders[f"C51 ×{args.num_seeds}"].median_seconds / contenders["C51"].median_seconds
        print(f"C51: {args.num_seeds} vmapped seeds take {ratio:.2f}× one seed's learning time "
              f"({ratio / args.num_seeds:.2f}× per seed)")


if __name__ == "__main__":
    main()
