"""DQN and PQN on CartPole-v1: ours against rejax's DQN and PQN on the same configurations.

    python benchmarks/value_based_cartpole.py [--seed 42] [--eval-episodes 128] [--skip-rejax] [--only dqn|pqn]
                                              [--rounds 3] [--cpu-threads N]

DQN: our config/dqn.yaml defaults, 500,000 steps (800 warm-up steps, then 195 updates per evaluation ×
10 evaluations × 16 steps × 16 envs, 64 gradient steps of 64 transitions per update). PQN: 16 envs ×
128 steps, 4 epochs × 16 minibatches, a 64×64 network (rejax's, not configurable), 499,712 steps (244 updates;
500,000 is not a whole number of 2,048-step updates), rewards unscaled (rejax's PQN scales none), the rest
from config/pqn.yaml.

For each contender it prints the compile seconds, the steady learning throughput (env steps per second of
learning alone: no compilation, no evaluation; the median of `--rounds` whole-budget runs, ours and rejax's taken
in turn) and the final policy's mean return over `--eval-episodes`
episodes, then ours / rejax ratios. Figures depend on the machine and its load: compare ratios taken in one run.
"""

from __future__ import annotations

import argparse
import math
from typing import Callable

import jax

from loop_timing import OurLearning, compare_learning, start_backend_as_run_would  # same directory, as below
from rejax_arguments import rejax_dqn_config, rejax_pqn_config
from rejax_peer import rejax_learning

NUM_ENVS = 16
NUM_EVALUATION = 10

DQN_TOTAL_TIMESTEPS = 500_000
DQN_OVERRIDES = [f"arch.total_timesteps={DQN_TOTAL_TIMESTEPS}", f"arch.total_num_envs={NUM_ENVS}",
                 f"arch.num_evaluation={NUM_EVALUATION}"]

PQN_ROLLOUT_LENGTH = 128
PQN_UPDATES = 244
PQN_TOTAL_TIMESTEPS = PQN_UPDATES * PQN_ROLLOUT_LENGTH * NUM_ENVS  # 499,712
# 244 updates = 4 evaluations × 61 updates (10 evaluations would not divide them); rejax's PQN network is fixed
# at 64×64, so ours runs at that size here too (config/network/mlp_pqn.yaml ships 128×128), and rejax's PQN does
# not scale rewards, so neither does ours here (config/system/pqn.yaml scales them by 0.1 in the targets)
PQN_OVERRIDES = [f"arch.total_timesteps={PQN_TOTAL_TIMESTEPS}", f"arch.total_num_envs={NUM_ENVS}",
                 "arch.num_evaluation=4", f"system.rollout_length={PQN_ROLLOUT_LENGTH}",
                 "network.q_network.pre_torso.layer_sizes=[64,64]", "system.reward_scale=1.0"]


def compose(config_name: str, overrides):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from stoix_like.config.compose import CONFIG_DIR

    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        return hydra_compose(config_name=config_name, overrides=list(overrides))


def ours(config_name: str, learner_setup: Callable, overrides, seed: int) -> OurLearning:
    """A real stoix_like system: config composed as `python -m experiments.<name>` would, learner compiled apart."""
    return OurLearning(learner_setup, compose(config_name, list(overrides) + [f"arch.seed={seed}"]), seed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--eval-episodes", type=int, default=128)
    parser.add_argument("--skip-rejax", action="store_true")
    parser.add_argument("--only", choices=["dqn", "pqn"])
    parser.add_argument("--rounds", type=int, default=3,
                        help="whole-budget runs per contender, taken in turn; throughput is their median")
    parser.add_argument("--cpu-threads", type=int, default=None,
                        help="XLA's CPU thread pool for every contender (default: what arch.cpu_threads=null picks "
                             "for these 16-env configs: one thread on a CPU); all share this process's pool")
    args = parser.parse_args()
    # DQN's and PQN's configs both step 16 envs, so null picks the same pool for either
    pool = start_backend_as_run_would(compose("dqn", DQN_OVERRIDES).arch, args.cpu_threads)
    print(f"CartPole-v1, {NUM_ENVS} envs | jax {jax.__version__} on {jax.devices()[0].platform} "
          f"({jax.device_count()} device, XLA CPU pool: {pool})")

    from stoix_like.systems.q_learning import dqn
    try:
        from stoix_like.systems.on_policy import pqn
    except ImportError:  # PQN lands separately; the DQN half runs without it
        pqn = None

    contenders = {}
    if args.only in (None, "dqn"):
        contenders["DQN"] = ("dqn", dqn.learner_setup, DQN_OVERRIDES, "DQN",
                             rejax_dqn_config)
    if args.only in (None, "pqn"):
        if pqn is None:
            print("PQN: stoix_like.systems.on_policy.pqn is not there yet; benchmarking DQN only")
        else:
            contenders["PQN"] = ("pqn", pqn.learner_setup, PQN_OVERRIDES, "PQN", rejax_pqn_config)

    rows = {}
    for label, (config_name, learner_setup, overrides, rejax_name, rejax_config) in contenders.items():
        learners = {f"{label} ours": ours(config_name, learner_setup, overrides, args.seed)}
        if not args.skip_rejax:
            config = compose(config_name, overrides)
            peer = rejax_learning(rejax_name, rejax_config(config), args.seed)
            if peer is None:
                print("rejax is not installed: `pip install --no-deps rejax` to compare with it")
            else:
                learners[f"{label} rejax"] = peer
        rows.update(compare_learning(learners, args.rounds, args.eval_episodes))

    print(f"{'':<12}{'steps':>10}{'setup s':>9}{'compile s':>11}{'steps/s':>12}{'final return':>14}")
    for name, figures in rows.items():
        setup = f"{'-':>9}" if math.isnan(figures["setup_s"]) else f"{figures['setup_s']:>9.1f}"
        print(f"{name:<12}{figures['steps']:>10,}{setup}{figures['compile_s']:>11.1f}{figures['steps_per_s']:>12,.0f}"
              f"{figures['final_return']:>14.1f}")
    print(f"(steps: the env steps one timed run covers, ours after the replay warm-up its setup fills, rejax's "
          f"with its buffer fill; steps/s: the median of {args.rounds} whole-budget runs per contender, taken in turn; "
          f"setup: learner_setup before compiling, replay warm-up included; final returns over "
          f"{args.eval_episodes} episodes of the final params)")
    for label in contenders:
        if f"{label} rejax" in rows:
            mine, theirs = rows[f"{label} ours"], rows[f"{label} rejax"]
            print(f"{label}: ours / rejax = {mine['steps_per_s'] / theirs['steps_per_s']:.2f}× the throughput, "
                  f"compile {mine['compile_s'] / theirs['compile_s']:.2f}× the time")


if __name__ == "__main__":
    main()
