"""A sweep in one program: `sweep.system.<key>=[v1,v2,...]` keys expand to a grid, and the grid × `arch.num_seeds`
seeds to members, each the single run it stands for.

`python -m experiments.ppo arch.num_seeds=4 'sweep.system.actor_lr=[1e-4,3e-4,1e-3]' 'sweep.system.ent_coef=[0.0,0.01]'`
trains 6 grid points × 4 seeds = 24 members, vmapped in one compiled program, the way `arch.num_seeds` alone trains
seeds. Member k of a grid point is the run `arch.seed=<seed k> system.actor_lr=<its value> ...` (its config is that
run's: `Member.config`), and it is logged as that run, in a directory of its own (stoix_like/run/member_logs.py).
Which keys can be swept so, and why the rest cannot, is validation.py's (`SWEEPABLE`, `_sweep_problems`); how a
learner reads a member's values, stoix_like/learner/hyperparams.py's. This module imports no jax.
"""

from __future__ import annotations

import copy
import itertools
from typing import Dict, List, NamedTuple

from omegaconf import DictConfig, open_dict


class Member(NamedTuple):
    """One grid point × one seed of a sweep."""

    number: int  # its place on the program's members' axis, grid-point-major (seeds inner), as a multirun numbers jobs
    point: int  # its grid point's index
    seed: int
    values: Dict[str, float]  # {system key: this point's value}
    config: DictConfig  # the single run it stands for: the point's values, arch.seed=seed, one seed, no sweep

    def label(self) -> str:
        """The point in words, e.g. `actor_lr=0.0003 ent_coef=0.01`."""
        return " ".join(f"{name}={value:g}" for name, value in self.values.items())


# keys no shipped config has, which a user adds: a sweep's grid, a PBT population's ranges
ADDED_KEY_PREFIXES = ("sweep.", "arch.pbt.ranges.")


def command_line_additions(overrides: List[str]) -> List[str]:
    """`sweep.system.actor_lr=[...]` as `++sweep.system.actor_lr=[...]` (and `arch.pbt.ranges.<key>=[...]` so):
    no shipped config has a `sweep` block (a run without one is a plain run) or a range, and Hydra's struct mode
    would want every new key written with a `+`."""
    return [f"++{override}" if override.startswith(ADDED_KEY_PREFIXES) else override for override in overrides]


def swept_values(config: DictConfig) -> Dict[str, List[float]]:
    """{system key: its values} of the config's `sweep.system.*`, in the order written; {} for a plain run."""
    sweep = config.get("sweep")
    if not sweep:
        return {}
    system = sweep.get("system") or {}
    return {str(name): [float(value) for value in values] for name, values in system.items()}


def grid_points(config: DictConfig) -> List[Dict[str, float]]:
    """Every combination of the swept values, the first key outermost."""
    values = swept_values(config)
    return [dict(zip(values, point)) for point in itertools.product(*values.values())]


def members(config: DictConfig) -> List[Member]:
    """Each grid point's seeds `arch.seed .. arch.seed + arch.num_seeds - 1`; [] for a run that sweeps nothing."""
    if not swept_values(config):
        return []
    seeds = [int(config.arch.seed) + k for k in range(int(config.arch.num_seeds))]
    found: List[Member] = []
    for point, values in enumerate(grid_points(config)):
        for seed in seeds:
            found.append(Member(len(found), point, seed, values, single_run_config(config, values, seed)))
    return found


def single_run_config(config: DictConfig, values: Dict[str, float], seed: int) -> DictConfig:
    """The config of the single run a member stands for (a copy: the sweep's own config is left as it is). A PBT
    population's member (no `sweep` block) is set up from the same: its seed and starting values."""
    single = copy.deepcopy(config)
    with open_dict(single):
        single.pop("sweep", None)
        for name, value in values.items():
            single.system[name] = value
        single.arch.seed = seed
        single.arch.num_seeds = 1
    return single

