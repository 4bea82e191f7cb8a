"""PBT's learning check (issue 46, item 2): a learning rate spanning 1e-5..1e-1, fixed per member, against PBT
tuning it inside one program.

    python benchmarks/pbt_learning_check.py [--timesteps 200000] [--arm fixed|pbt|both]

Both arms are PPO on CartPole (its shipped config, at `--timesteps` steps per member), on seeds nobody tuned on:

- fixed: `system.actor_lr` in {1e-5, 1e-4, 1e-3, 1e-2, 1e-1}, 4 seeds each (1000..1003), as one sweep in one program
  (`sweep.system.actor_lr=[...]`); logged in `docs/results/pbt/fixed_1000/`;
- PBT: 4 PBT runs, each 8 members in one program (`arch.num_seeds=8 arch.pbt.interval=10
  'arch.pbt.ranges.actor_lr=[1e-5,1e-1]'`, PBT every 10 updates), first seeds 1000, 1008, 1016, 1024; logged in
  `docs/results/pbt/pbt_<first seed>/`.

A PBT run's result is its best member's final return (what a user of PBT keeps); the PBT arm is the population of
those four. The check: each PBT run's best final return is at least the best final return of any fixed member.
README's PBT table is rendered from these logs (`python benchmarks/learning_table.py --from-logs`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)
RESULTS = os.path.join(REPO_ROOT, "docs", "results", "pbt")
LEARNING_RATES = (1e-5, 1e-4, 1e-3, 1e-2, 1e-1)
FIRST_SEED, FIXED_SEEDS, PBT_RUNS, PBT_MEMBERS = 1000, 4, 4, 8
PBT_INTERVAL = 10  # updates: a learn call's (the budget's updates per evaluation / logger.progress_per_evaluation)


def budget(timesteps: int):
    """PPO's CartPole config at `timesteps` steps: 10 evaluations, each run as 4 learn calls of 10 updates at 200k."""
    updates_per_evaluation = timesteps // 10 // (125 * 4)
    return [f"arch.total_timesteps={timesteps}", f"logger.progress_per_evaluation={updates_per_evaluation // 10}"]


def train(overrides, run_dir: str):
    from stoix_like.config.compose import compose_config
    from stoix_like.run import experiment
    from stoix_like.systems import system_module

    shutil.rmtree(run_dir, ignore_errors=True)  # one population per folder: never pooled with an older one
    config = compose_config("ppo", [*overrides, f"logger.base_exp_path={os.path.relpath(run_dir, REPO_ROOT)}"])
    return experiment.train(config, system_module("ppo").learner_setup, "ppo")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timesteps", type=int, default=200_000)
    parser.add_argument("--arm", choices=("fixed", "pbt", "both"), default="both")
    args = parser.parse_args()
    if args.timesteps % (10 * 125 * 4 * PBT_INTERVAL):
        parser.error(f"--timesteps must be a multiple of {10 * 125 * 4 * PBT_INTERVAL:,} (10 evaluations of "
                     f"learn calls of {PBT_INTERVAL} updates of 500 steps)")
    os.chdir(REPO_ROOT)
    if args.arm in ("fixed", "both"):
        result = train([*budget(args.timesteps), f"arch.seed={FIRST_SEED}", f"arch.num_seeds={FIXED_SEEDS}",
                        f"sweep.system.actor_lr=[{','.join(f'{lr:g}' for lr in LEARNING_RATES)}]"],
                       os.path.join(RESULTS, f"fixed_{FIRST_SEED}"))
        print(f"FIXED best member's final return {max(result.final_returns):.1f}", flush=True)
    if args.arm in ("pbt", "both"):
        for run in range(PBT_RUNS):
            first_seed = FIRST_SEED + run * PBT_MEMBERS
            result = train([*budget(args.timesteps), f"arch.seed={first_seed}", f"arch.num_seeds={PBT_MEMBERS}",
                            f"arch.pbt.interval={PBT_INTERVAL}", "arch.pbt.ranges.actor_lr=[1e-5,1e-1]"],
                           os.path.join(RESULTS, f"pbt_{first_seed}"))
            print(f"PBT run {first_seed}: best member's final return {max(result.final_returns):.1f}", flush=True)


if __name__ == "__main__":
    main()
