"""Seeds and devices on the CPU: what one program of N seeds and a second device buy.

    python benchmarks/seeds_and_devices.py [--seeds 8] [--updates 50]

1. `arch.num_seeds=N` (N seeds vmapped in one compiled program) against N sequential single-seed runs of
   the same config: total env steps per second of learning, all seeds together.
2. One against two forced CPU devices (`--xla_force_host_platform_device_count`) at equal total envs.

Each measurement runs in a fresh interpreter (XLA flags must be set before jax starts). Throughput counts
learn calls only: compilation, evaluation and logging are timed apart (the first call's one-off start-up,
e.g. of the CPU collectives, is in; enough updates amortise it). On a CPU "devices" share the same
cores, so (2) shows the cost of splitting rather than a speed-up; figures depend on the machine and its
load, so compare ratios taken in one run. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# PPO on CartPole, per seed: 2 evaluations × `updates` updates × 32 steps × 32 envs
BASE = ["env=gymnax/cartpole", "arch.total_num_envs=32", "system.rollout_length=32", "system.epochs=2",
        "system.num_minibatches=2", "arch.num_evaluation=2", "arch.num_eval_episodes=8",
        "logger.use_console=False", "logger.use_json=False"]


def worker(overrides: list, seeds: list) -> dict:
    """Runs (in this fresh interpreter) one program per entry of `seeds`: a list of arch.num_seeds values."""
    from hydra import compose, initialize_config_dir

    from stoix_like import experiment
    from stoix_like.entry import CONFIG_DIR
    from stoix_like.systems import ppo

    totals = {"compile_seconds": 0.0, "learn_seconds": 0.0, "learned_steps": 0, "wall_seconds": 0.0}
    for index, num_seeds in enumerate(seeds):
        with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
            config = compose(config_name="ppo", overrides=overrides + [f"arch.seed={index}",
                                                                      f"arch.num_seeds={num_seeds}",
                                                                      "logger.base_exp_path=/tmp/stoix_bench"])
        start = time.perf_counter()
        result = experiment.train(config, ppo.learner_setup, "ppo")
        totals["wall_seconds"] += time.perf_counter() - start
        totals["compile_seconds"] += result.compile_seconds
        totals["learn_seconds"] += result.learn_seconds
        totals["learned_steps"] += result.learned_steps
    import jax

    totals["devices"] = jax.device_count()
    return totals


def measure(overrides: list, seeds: list, devices: int) -> dict:
    env = dict(os.environ, PYTHONPATH=REPO_ROOT, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}")
    output = subprocess.run([sys.executable, __file__, "--worker", json.dumps([overrides, seeds])], env=env,
                            capture_output=True, text=True, check=True).stdout
    return json.loads(output.strip().splitlines()[-1])


def report(label: str, figures: dict) -> dict:
    figures["steps_per_second"] = figures["learned_steps"] / figures["learn_seconds"]
    print(f"{label:<46} {figures['learned_steps']:>9,} steps  learn {figures['learn_seconds']:6.2f}s  "
          f"{figures['steps_per_second']:>10,.0f} steps/s  compile {figures['compile_seconds']:6.1f}s  "
          f"wall {figures['wall_seconds']:6.1f}s", flush=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--updates", type=int, default=50, help="updates per evaluation (2 evaluations)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        overrides, seeds = json.loads(args.worker)
        print(json.dumps(worker(overrides, seeds)))
        return

    steps_per_seed = 2 * args.updates * 32 * 32
    overrides = BASE + [f"arch.total_timesteps={steps_per_seed}"]
    print(f"PPO CartPole, {steps_per_seed:,} steps per seed (2 evaluations × {args.updates} updates × 32 steps × "
          f"32 envs), {os.cpu_count()} CPU cores")
    vmapped = report(f"num_seeds={args.seeds}, one program", measure(overrides, [args.seeds], devices=1))
    sequential = report(f"{args.seeds} sequential single-seed runs", measure(overrides, [1] * args.seeds, devices=1))
    print(f"  one program of {args.seeds} seeds: {vmapped['steps_per_second'] / sequential['steps_per_second']:.2f}× "
          f"the learning throughput, {sequential['wall_seconds'] / vmapped['wall_seconds']:.2f}× faster end to end "
          f"(compilation and evaluation included)")
    one = report("1 device, 32 envs", measure(overrides, [1], devices=1))
    two = report("2 forced devices × 16 envs", measure(overrides, [1], devices=2))
    print(f"  2 devices / 1 device: {two['steps_per_second'] / one['steps_per_second']:.2f}× the learning throughput")


if __name__ == "__main__":
    main()
