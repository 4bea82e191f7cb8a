"""A hyperparameter sweep in one compiled program against one member alone and against the same sweep as a Hydra
multirun (issue 46, item 1).

    python benchmarks/sweep_in_one_program.py [--timesteps 500000] [--seeds 4]
    python benchmarks/sweep_in_one_program.py --log docs/results/sweep_in_one_program   # README's table's logs

The sweep is the issue's: PPO on CartPole (its shipped config), `system.actor_lr` in {1e-4, 3e-4, 1e-3} ×
`system.ent_coef` in {0.0, 0.01} × `--seeds` seeds, 24 members by default. Five commands, each timed end to end
(interpreter start, setup, compilation, learning, evaluations, logs) in a fresh interpreter, as a user types them:

  one member:       python -m experiments.ppo arch.seed=42 system.actor_lr=0.0001 system.ent_coef=0.0
  in one program:   python -m experiments.ppo arch.num_seeds=4 'sweep.system.actor_lr=[...]' 'sweep.system.ent_coef=[...]'
  as seeds:         python -m experiments.ppo arch.num_seeds=24                  (the same arithmetic, no sweep)
  one wide member:  the one member with arch.total_num_envs=96 and 24× the steps (the members' arithmetic in one
                    learner's wide matrices: the same number of updates, 24× the samples each)
  Hydra multirun:   python -m experiments.ppo -m arch.seed=42,43,44,45 system.actor_lr=... system.ent_coef=...

Each starts with an empty compilation cache of its own, so the one-member run and the program compile from scratch,
while the multirun's later jobs load the first job's programs from its cache (what a user's multirun gets). The
targets: the program within 4× one member's wall time, and at least 4× faster than the multirun. The two middle
arms say where the program's time goes: each run's learning seconds and steps come from its own run.json files. The
ratios are taken between runs of this one invocation on this machine; on a machine shared with other work every
figure moves, so read the ratios, not the seconds. Prints figures (and with --log writes them, for README's table
in "Seeds, sweeps, clusters"); asserts nothing.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Dict, List

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LEARNING_RATES = (1e-4, 3e-4, 1e-3)
ENTROPY_COEFFICIENTS = (0.0, 0.01)
FIRST_SEED = 42
ONE_MEMBER_ENVS = 4  # config/ppo.yaml's arch.total_num_envs, CartPole's shipped recipe


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


def learning_of(log_dir: str) -> Dict[str, float]:
    """The learning seconds and steps summed over the run.json files under `log_dir` (a sweep member's holds its
    share of the program's learning, a multirun job's its own)."""
    records = [json.load(open(path)) for path in glob.glob(os.path.join(log_dir, "**", "run.json"), recursive=True)]
    if not records:
        raise RuntimeError(f"{log_dir}: the run wrote no run.json")
    return {"learn_seconds": sum(record["learn_seconds"] for record in records),
            "learned_steps": sum(record["learned_steps"] for record in records),
            "machine": f"{records[0]['machine']['cpu_count']}-core {records[0]['machine']['processor']}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--timesteps", type=int, default=500_000, help="env steps per member (CartPole's shipped "
                        "config trains 500,000; PPO's defaults split them 10 evaluations × 4 envs × 125 steps)")
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--log", metavar="DIR", help="also write the figures to DIR/steps_<timesteps>.json, which "
                        "README's sweep-speed table renders (`python benchmarks/learning_table.py --from-logs`)")
    args = parser.parse_args()
    members = len(LEARNING_RATES) * len(ENTROPY_COEFFICIENTS) * args.seeds
    seeds = ",".join(str(FIRST_SEED + k) for k in range(args.seeds))
    rates, coefficients = ",".join(map(str, LEARNING_RATES)), ",".join(map(str, ENTROPY_COEFFICIENTS))
    one_member = [f"arch.seed={FIRST_SEED}", f"system.actor_lr={LEARNING_RATES[0]}",
                  f"system.ent_coef={ENTROPY_COEFFICIENTS[0]}"]
    arms = {  # what a user types for each arm; every arm also gets the budget and its own log folder
        "one_member": one_member,
        "in_one_program": [f"arch.num_seeds={args.seeds}", f"sweep.system.actor_lr=[{rates}]",
                           f"sweep.system.ent_coef=[{coefficients}]"],
        # where the time goes: the members as plain seeds, and their arithmetic in one learner's wide matrices
        # (all their envs, so the same number of updates with members × the samples each)
        "seeds_only": [f"arch.num_seeds={members}"],
        "wide_member": [*one_member, f"arch.total_num_envs={ONE_MEMBER_ENVS * members}"],
        "multirun": ["-m", f"arch.seed={seeds}", f"system.actor_lr={rates}", f"system.ent_coef={coefficients}"],
    }
    budget = ["arch.num_evaluation=2", "logger.use_console=False"]
    print(f"PPO on CartPole, {args.timesteps:,} steps per member; {members} members = "
          f"{len(LEARNING_RATES)} actor_lr × {len(ENTROPY_COEFFICIENTS)} ent_coef × {args.seeds} seeds")
    figures: Dict[str, Dict] = {}
    with tempfile.TemporaryDirectory(prefix="sweep_benchmark_") as work_dir:
        for name, arguments in arms.items():
            steps = args.timesteps * (members if name == "wide_member" else 1)
            log_dir = os.path.join(work_dir, name)
            seconds = timed_run([*arguments, f"arch.total_timesteps={steps}", *budget, f"hydra.run.dir={log_dir}",
                                 f"hydra.sweep.dir={log_dir}"], work_dir)
            figures[name] = {"command": " ".join(arguments), "wall_seconds": seconds, **learning_of(log_dir)}
            learning = figures[name]
            print(f"{name:15s} {seconds:7.1f} s = {seconds / figures['one_member']['wall_seconds']:.2f}x one "
                  f"member; learning {learning['learn_seconds']:.1f} s at "
                  f"{learning['learned_steps'] / learning['learn_seconds']:,.0f} steps/s")
    program = figures["in_one_program"]["wall_seconds"]
    print(f"targets: the program {program / figures['one_member']['wall_seconds']:.2f}x one member (<= 4x); the "
          f"multirun {figures['multirun']['wall_seconds'] / program:.2f}x the program (>= 4x)")
    if args.log:
        machine = figures["one_member"]["machine"]
        for arm in figures.values():
            del arm["machine"]
        os.makedirs(args.log, exist_ok=True)
        path = os.path.join(args.log, f"steps_{args.timesteps}.json")
        with open(path, "w") as file:
            json.dump({"timesteps": args.timesteps, "members": members, "machine": machine,
                       "date": datetime.date.today().isoformat(), "arms": figures}, file, indent=1)
        print(f"logged: {path}")


if __name__ == "__main__":
    main()
