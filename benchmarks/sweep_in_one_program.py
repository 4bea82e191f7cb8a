"""A hyperparameter sweep in one compiled program against one member alone and against the same sweep as a Hydra
multirun (issue 46, item 1).

    python benchmarks/sweep_in_one_program.py [--timesteps 500000] [--seeds 4]

The sweep is the issue's: PPO on CartPole (its shipped config), `system.actor_lr` in {1e-4, 3e-4, 1e-3} ×
`system.ent_coef` in {0.0, 0.01} × `--seeds` seeds, 24 members by default. Three commands, each timed end to end
(interpreter start, setup, compilation, learning, evaluations, logs) in a fresh interpreter, as a user types them:

  one member:       python -m experiments.ppo arch.seed=42 system.actor_lr=1e-4 system.ent_coef=0.0
  in one program:   python -m experiments.ppo arch.num_seeds=4 'sweep.system.actor_lr=[...]' 'sweep.system.ent_coef=[...]'
  Hydra multirun:   python -m experiments.ppo -m arch.seed=42,43,44,45 system.actor_lr=... system.ent_coef=...

Each starts with an empty compilation cache of its own, so the one-member run and the program compile from scratch,
while the multirun's later jobs load the first job's programs from its cache (what a user's multirun gets). The
targets: the program within 4× one member's wall time, and at least 4× faster than the multirun. The ratios are taken
between runs of this one invocation on this machine; on a machine shared with other work every figure moves, so read
the ratios, not the seconds. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from typing import List

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LEARNING_RATES = (1e-4, 3e-4, 1e-3)
ENTROPY_COEFFICIENTS = (0.0, 0.01)
FIRST_SEED = 42


def timed_run(arguments: List[str], work_dir: str) -> float:
    """Wall seconds of `python -m experiments.ppo <arguments>` in a fresh interpreter with an empty compilation
    cache of its own; raises with the run's last lines if it fails."""
    environment = {**os.environ, "STOIX_LIKE_CACHE_DIR": tempfile.mkdtemp(dir=work_dir, prefix="xla_cache_")}
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "experiments.ppo", *arguments], cwd=REPO_ROOT, env=environment,
                            capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(arguments)} failed:\n{(result.stdout + result.stderr)[-3000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--timesteps", type=int, default=500_000, help="env steps per member (CartPole's shipped "
                        "config trains 500,000; PPO's defaults split them 10 evaluations × 4 envs × 125 steps)")
    parser.add_argument("--seeds", type=int, default=4)
    args = parser.parse_args()
    members = len(LEARNING_RATES) * len(ENTROPY_COEFFICIENTS) * args.seeds
    seeds = ",".join(str(FIRST_SEED + k) for k in range(args.seeds))
    budget = [f"arch.total_timesteps={args.timesteps}", "arch.num_evaluation=2", "logger.use_console=False"]
    with tempfile.TemporaryDirectory(prefix="sweep_benchmark_") as work_dir:
        def logs(name: str) -> List[str]:
            return [f"hydra.run.dir={work_dir}/{name}", f"hydra.sweep.dir={work_dir}/{name}"]

        print(f"PPO on CartPole, {args.timesteps:,} steps per member; {members} members = "
              f"{len(LEARNING_RATES)} actor_lr × {len(ENTROPY_COEFFICIENTS)} ent_coef × {args.seeds} seeds")
        one_member = timed_run([*budget, f"arch.seed={FIRST_SEED}", f"system.actor_lr={LEARNING_RATES[0]}",
                                f"system.ent_coef={ENTROPY_COEFFICIENTS[0]}", *logs("one_member")], work_dir)
        print(f"one member:          {one_member:7.1f} s")
        in_one_program = timed_run(
            [*budget, f"arch.num_seeds={args.seeds}",
             f"sweep.system.actor_lr=[{','.join(map(str, LEARNING_RATES))}]",
             f"sweep.system.ent_coef=[{','.join(map(str, ENTROPY_COEFFICIENTS))}]", *logs("in_one_program")],
            work_dir)
        print(f"sweep in one program: {in_one_program:7.1f} s = {in_one_program / one_member:.2f}x one member "
              f"(target <= 4x)")
        multirun = timed_run(["-m", *budget, f"arch.seed={seeds}",
                              f"system.actor_lr={','.join(map(str, LEARNING_RATES))}",
                              f"system.ent_coef={','.join(map(str, ENTROPY_COEFFICIENTS))}", *logs("multirun")],
                             work_dir)
        print(f"Hydra multirun:      {multirun:7.1f} s = {multirun / in_one_program:.2f}x the sweep in one program "
              f"(target >= 4x)")


if __name__ == "__main__":
    main()
