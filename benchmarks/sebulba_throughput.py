"""Throughput of the two architectures at the same env count: Anakin PPO on gymnax CartPole (acting compiled into
the learner) against Sebulba PPO on gymnasium CartPole (actor threads stepping CPU envs), and Sebulba's policy lag.

    python benchmarks/sebulba_throughput.py                          # 4 envs, 100,000 steps each
    python benchmarks/sebulba_throughput.py --envs 16 --steps 200000 --threads 2
    XLA_FLAGS=--xla_force_host_platform_device_count=2 python benchmarks/sebulba_throughput.py \
        --actor-devices 0 --learner-devices 1                        # actors and learner on their own devices

Anakin's figure is its learn calls' env steps per second (compilation and evaluation excluded); Sebulba's are
from its last training line: end-to-end env steps per second (the learner waiting on actors included), the actor
threads' rate (acting and env stepping) and the learner's rate (its updates alone), and the lag between the
learner's update index and the params version each rollout was collected with. Both runs use PPO's shipped
hyperparameters. Figures depend on the machine and its load; the script prints what it measured and where.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import tempfile
import time
from typing import Dict, List

from stoix_like.config.compose import compose_config


def sebulba_figures(log: str) -> Dict[str, float]:
    """The last `[train]` line's figures: end-to-end steps/s and the named metrics after it."""
    line = [row for row in log.splitlines() if row.startswith("[train]")][-1]
    figures = {"steps_per_second": float(re.search(r"\| ([\d,]+) steps/s", line).group(1).replace(",", ""))}
    for name in ("policy_lag_mean", "policy_lag_max", "actor_steps_per_second", "learner_steps_per_second"):
        figures[name] = float(re.search(rf"{name} ([-\d.e+]+)", line).group(1))
    return figures


def main(argv: List[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, default=4, help="arch.total_num_envs of both runs (PPO's default: 4)")
    parser.add_argument("--steps", type=int, default=100_000, help="arch.total_timesteps of each run")
    parser.add_argument("--threads", type=int, default=1, help="Sebulba's arch.num_actor_threads")
    parser.add_argument("--actor-devices", default="0")
    parser.add_argument("--learner-devices", default="0")
    args = parser.parse_args(argv)

    import jax

    from stoix_like.run import experiment
    from stoix_like.run.sebulba import loop
    from stoix_like.systems.on_policy import ppo

    results = pathlib.Path(tempfile.mkdtemp(prefix="sebulba_throughput_"))
    common = [f"arch.total_num_envs={args.envs}", f"arch.total_timesteps={args.steps}", "arch.num_evaluation=2"]
    anakin = experiment.train(compose_config("ppo", common + [f"logger.base_exp_path={results}/anakin"]),
                              ppo.learner_setup, "ppo")
    anakin_rate = anakin.learned_steps / anakin.learn_seconds

    sebulba_config = compose_config("ppo", common + [
        "arch=sebulba", "env=gymnasium/cartpole", f"arch.num_actor_threads={args.threads}",
        f"arch.actor_device_ids=[{args.actor_devices}]", f"arch.learner_device_ids=[{args.learner_devices}]",
        f"logger.base_exp_path={results}/sebulba"])
    start = time.perf_counter()
    loop.run(sebulba_config, ppo.sebulba_setup, "ppo")
    wall = time.perf_counter() - start
    log = "\n".join(path.read_text() for path in (results / "sebulba").rglob("ppo.log"))
    figures = sebulba_figures(log)

    print(f"\nPPO on CartPole-v1, {args.envs} envs, {args.steps:,} steps per run, devices {jax.devices()}")
    print(f"  Anakin  (gymnax, compiled):   {anakin_rate:>10,.0f} env steps/s (learn calls)")
    print(f"  Sebulba (gymnasium, threads): {figures['steps_per_second']:>10,.0f} env steps/s end to end "
          f"(last interval; whole run incl. compile and evaluation: {args.steps / wall:,.0f})")
    print(f"      actor threads ({args.threads}):        {figures['actor_steps_per_second']:>10,.0f} env steps/s")
    print(f"      learner:                  {figures['learner_steps_per_second']:>10,.0f} env steps/s of updates")
    print(f"      policy lag (updates):     mean {figures['policy_lag_mean']:.2f}, max {figures['policy_lag_max']:.0f}")
    print(f"  logs: {results}")


if __name__ == "__main__":
    main()
