"""Seeds and devices on the CPU: what one program of N seeds and a second device buy.

    python benchmarks/seeds_and_devices.py [--algorithm ppo|c51|sac] [--seeds 8] [--updates N]

0. Setup: the system's `learner_setup` in a fresh interpreter, its first call (which compiles the network inits
   and the initial state) and every later one, and the setup of an `arch.num_seeds=N` population against one seed.
1. `arch.num_seeds=N` (N seeds vmapped in one compiled program) against N sequential single-seed runs of
   the same config: total env steps per second of learning, all seeds together. Issue 15's check: the program of
   N seeds costs at most N× one seed's learning time, i.e. at least 1.00× the throughput.
2. One against two forced CPU devices (`--xla_force_host_platform_device_count`) at equal total envs.

PPO runs on CartPole (2 evaluations × `updates` updates × 32 steps × 32 envs); C51 on CartPole and SAC on
Pendulum run their shipped defaults (16 envs; C51 16 steps and SAC 2 steps per update, after their warm-up) for
2 evaluations × `updates` updates. Each measurement runs in a fresh interpreter (XLA flags must be set before jax
starts). Throughput counts learn calls only: compilation, evaluation and logging are timed apart (the first call's
one-off start-up, e.g. of the CPU collectives, is in; enough updates amortise it). On a CPU "devices" share the
same cores, so (2) shows the cost of splitting rather than a speed-up; figures depend on the machine and its
load, so compare ratios taken in one run. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import time
from typing import List, NamedTuple

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

QUIET = ["arch.num_evaluation=2", "arch.num_eval_episodes=8", "logger.use_console=False", "logger.use_json=False"]


class Benchmarked(NamedTuple):
    """One system as this benchmark runs it."""

    learner_module: str  # where its learner_setup lives
    overrides: List[str]
    envs: int  # arch.total_num_envs
    steps_per_env_per_update: int  # system.rollout_length
    warmup_steps: int  # env steps before learning, all envs together: part of arch.total_timesteps
    default_updates: int  # per evaluation

    def budget(self, updates: int) -> List[str]:
        return [f"arch.total_timesteps={self.warmup_steps + 2 * updates * self.steps_per_env_per_update * self.envs}"]


SYSTEMS = {
    "ppo": Benchmarked("stoix_like.systems.on_policy.ppo",
                       ["env=gymnax/cartpole", "arch.total_num_envs=32", "system.rollout_length=32",
                        "system.epochs=2", "system.num_minibatches=2"], 32, 32, 0, 50),
    "c51": Benchmarked("stoix_like.systems.q_learning.distributional_dqn", ["env=gymnax/cartpole"], 16, 16, 50 * 16,
                       100),
    "sac": Benchmarked("stoix_like.systems.actor_critic.sac", ["env=gymnax/pendulum"], 16, 2, 64 * 16, 200),
}


def worker(algorithm: str, overrides: list, seeds: list) -> dict:
    """Runs (in this fresh interpreter) one program per entry of `seeds`: a list of arch.num_seeds values."""
    from hydra import compose, initialize_config_dir

    from stoix_like.config.compose import CONFIG_DIR
    from stoix_like.run import experiment

    learner_setup = importlib.import_module(SYSTEMS[algorithm].learner_module).learner_setup

    totals = {"compile_seconds": 0.0, "learn_seconds": 0.0, "learned_steps": 0, "wall_seconds": 0.0}
    for index, num_seeds in enumerate(seeds):
        with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
            config = compose(config_name=algorithm, overrides=overrides + [f"arch.seed={index}",
                                                                      f"arch.num_seeds={num_seeds}",
                                                                      "logger.base_exp_path=/tmp/stoix_bench"])
        start = time.perf_counter()
        result = experiment.train(config, learner_setup, algorithm)
        totals["wall_seconds"] += time.perf_counter() - start
        totals["compile_seconds"] += result.compile_seconds
        totals["learn_seconds"] += result.learn_seconds
        totals["learned_steps"] += result.learned_steps
    import jax

    totals["devices"] = jax.device_count()
    return totals


def setup_worker(algorithm: str, overrides: list, num_seeds: int) -> dict:
    """Sets up `num_seeds` seeds as the experiment loop does (one `learner_setup` per seed, states stacked),
    in this fresh interpreter: seconds of each call and of the whole."""
    import jax
    from hydra import compose, initialize_config_dir

    from stoix_like.runtime import compilation_cache, parallel
    from stoix_like.run import experiment
    from stoix_like import envs as envs_lib
    from stoix_like.config.compose import CONFIG_DIR
    from stoix_like.learner import budget as budget_lib

    learner_setup = importlib.import_module(SYSTEMS[algorithm].learner_module).learner_setup
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        config = compose(config_name=algorithm, overrides=overrides + [f"arch.num_seeds={num_seeds}"])
    budget = budget_lib.make_budget(config)
    train_env, _ = envs_lib.make(config.env)
    start, per_call, states = time.perf_counter(), [], []
    with compilation_cache.setup_programs_cached():
        for seed in experiment.seeds_of(config):
            call_start = time.perf_counter()
            setup = learner_setup(train_env, jax.random.split(jax.random.PRNGKey(seed))[0], config, budget)
            jax.block_until_ready(setup.learner_state)
            per_call.append(time.perf_counter() - call_start)
            states.append(setup.learner_state)
    stack_start = time.perf_counter()
    jax.block_until_ready(parallel.stack_seeds(states))
    return {"setup_seconds": time.perf_counter() - start, "per_call_seconds": per_call,
            "stack_seconds": time.perf_counter() - stack_start}


def measure(algorithm: str, overrides: list, seeds: list | int, devices: int, worker_flag: str = "--worker"
            ) -> dict:
    env = dict(os.environ, PYTHONPATH=REPO_ROOT, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}")
    output = subprocess.run([sys.executable, __file__, worker_flag, json.dumps([algorithm, overrides, seeds])],
                            env=env,
                            capture_output=True, text=True, check=True).stdout
    return json.loads(output.strip().splitlines()[-1])


def report_setup(algorithm: str, overrides: list, num_seeds: int) -> None:
    one = measure(algorithm, overrides, 1, devices=1, worker_flag="--setup-worker")
    population = measure(algorithm, overrides, num_seeds, devices=1, worker_flag="--setup-worker")
    first_call, later_calls = population["per_call_seconds"][0], population["per_call_seconds"][1:]
    print(f"setup, 1 seed: {one['setup_seconds']:.2f}s (the first learner_setup of a process compiles its inits)")
    print(f"setup, {num_seeds} seeds: {population['setup_seconds']:.2f}s, "
          f"{population['setup_seconds'] - one['setup_seconds']:+.2f}s over the 1-seed process (load-dependent: "
          f"the first call's compilation varies between processes)")
    if later_calls:
        added = sum(later_calls) + population["stack_seconds"]
        print(f"  in the {num_seeds}-seed process: first learner_setup {first_call:.2f}s; later ones median "
              f"{sorted(later_calls)[len(later_calls) // 2]:.3f}s, max {max(later_calls):.3f}s; stacking the seeds "
              f"{population['stack_seconds']:.2f}s; so {num_seeds - 1} more seeds add {added:.2f}s", flush=True)


def report(label: str, figures: dict) -> dict:
    figures["steps_per_second"] = figures["learned_steps"] / figures["learn_seconds"]
    print(f"{label:<46} {figures['learned_steps']:>9,} steps  learn {figures['learn_seconds']:6.2f}s  "
          f"{figures['steps_per_second']:>10,.0f} steps/s  compile {figures['compile_seconds']:6.1f}s  "
          f"wall {figures['wall_seconds']:6.1f}s", flush=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algorithm", choices=sorted(SYSTEMS), default="ppo")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--updates", type=int, help="updates per evaluation (2 evaluations); default per system")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--setup-worker", help=argparse.SUPPRESS)
    parser.add_argument("--setup-only", action="store_true", help="only the setup figures (0.)")
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(*json.loads(args.worker))))
        return
    if args.setup_worker:
        print(json.dumps(setup_worker(*json.loads(args.setup_worker))))
        return

    system = SYSTEMS[args.algorithm]
    updates = args.updates or system.default_updates
    overrides = system.overrides + QUIET + system.budget(updates)
    print(f"{args.algorithm}: {' '.join(overrides)}; {os.cpu_count()} CPU cores")
    report_setup(args.algorithm, overrides, args.seeds)
    if args.setup_only:
        return
    vmapped = report(f"num_seeds={args.seeds}, one program",
                     measure(args.algorithm, overrides, [args.seeds], devices=1))
    sequential = report(f"{args.seeds} sequential single-seed runs",
                        measure(args.algorithm, overrides, [1] * args.seeds, devices=1))
    print(f"  one program of {args.seeds} seeds: {vmapped['steps_per_second'] / sequential['steps_per_second']:.2f}× "
          f"the learning throughput ({sequential['steps_per_second'] / vmapped['steps_per_second'] * args.seeds:.2f}× "
          f"one seed's learning time for {args.seeds}× the work), "
          f"{sequential['wall_seconds'] / vmapped['wall_seconds']:.2f}× faster end to end "
          f"(compilation and evaluation included)")
    envs = system.envs
    one = report(f"1 device, {envs} envs", measure(args.algorithm, overrides, [1], devices=1))
    two = report(f"2 forced devices × {envs // 2} envs", measure(args.algorithm, overrides, [1], devices=2))
    print(f"  2 devices / 1 device: {two['steps_per_second'] / one['steps_per_second']:.2f}× the learning throughput")


if __name__ == "__main__":
    main()
