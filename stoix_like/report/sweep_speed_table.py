"""README's sweep-speed table (issue 46, item 1): a hyperparameter sweep trained as the members of one compiled
program, against one member alone and against the same sweep as a Hydra multirun, rendered from the JSON logs
`benchmarks/sweep_in_one_program.py --log DIR` writes (one file per budget).

Each log holds, per arm, the wall time the benchmark measured around the command (interpreter start to exit) and
the learning seconds and steps summed over the arm's own run.json files (a member's run.json holds its share of
the program's learning, a multirun job's its own). Beside the issue's three arms, two show where the time goes:
the same members as plain seeds (`arch.num_seeds`, no sweep) and one member given all the members' arithmetic in
wide matrices (their envs in one learner, the same number of updates). If no layout of the arithmetic learns much
faster than one member does, batching has little left to share and the program costs what its arithmetic costs.
"""

from __future__ import annotations

import glob
import json
import os
from typing import Dict, List

from stoix_like.errors import ConfigError

# the arms a log must hold, in the order the table shows them, with the words of its `run` column
ARMS = {
    "one_member": "one member",
    "in_one_program": "the sweep in one program",
    "seeds_only": "the same members as seeds (`arch.num_seeds`, no sweep)",
    "wide_member": "one member with all the members' envs and steps",
    "multirun": "the sweep as a Hydra multirun",
}
PROGRAM_TARGET = 4.0  # issue 46: the program within 4× one member's wall time
MULTIRUN_TARGET = 4.0  # ... and at least 4× faster than the same sweep as a Hydra multirun
HEADER = ["| steps per member | run | wall time | × one member's | learning | learning steps/s | × one member's |",
          "|---|---|---|---|---|---|---|"]


def sweep_speed_table(root: str) -> str:
    """The table and a verdict line per budget, from every `*.json` under `root` (ConfigError if none, or if a log
    lacks an arm)."""
    logs = [_load(path) for path in sorted(glob.glob(os.path.join(root, "*.json")))]
    if not logs:
        raise ConfigError(f"{root}: no sweep-speed logs; run `python benchmarks/sweep_in_one_program.py --log {root}`")
    logs.sort(key=lambda log: -log["timesteps"])
    lines = list(HEADER)
    for log in logs:
        arms = log["arms"]
        one = arms["one_member"]
        for name, words in ARMS.items():
            arm = arms[name]
            throughput = arm["learned_steps"] / arm["learn_seconds"]
            lines.append(
                f"| {log['timesteps']:,} | {words}: `{arm['command']}` | {arm['wall_seconds']:.1f} s "
                f"| {arm['wall_seconds'] / one['wall_seconds']:.2f}× | {arm['learn_seconds']:.1f} s "
                f"| {throughput:,.0f} | {throughput / (one['learned_steps'] / one['learn_seconds']):.2f}× |")
    lines.append("")
    for log in logs:
        lines.append(_verdict(log))
    return "\n".join(lines)


def _verdict(log: Dict) -> str:
    arms = log["arms"]
    program = arms["in_one_program"]["wall_seconds"] / arms["one_member"]["wall_seconds"]
    multirun = arms["multirun"]["wall_seconds"] / arms["in_one_program"]["wall_seconds"]
    within = "met" if program <= PROGRAM_TARGET else "**MISSED**"
    faster = "met" if multirun >= MULTIRUN_TARGET else "**MISSED**"
    return (f"- {log['timesteps']:,} steps per member, {log['members']} members ({log['machine']}, {log['date']}): "
            f"the program within {PROGRAM_TARGET:g}× one member: {within} ({program:.2f}×); at least "
            f"{MULTIRUN_TARGET:g}× faster than the multirun: {faster} ({multirun:.2f}×).")


def _load(path: str) -> Dict:
    with open(path) as file:
        log = json.load(file)
    missing: List[str] = [name for name in ARMS if name not in log.get("arms", {})]
    if missing:
        raise ConfigError(f"{path}: no {', '.join(missing)} arm; rerun `python benchmarks/sweep_in_one_program.py "
                          f"--log {os.path.dirname(path)}`")
    return log
