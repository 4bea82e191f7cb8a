"""Read runs' logs and group them for a report. Core only (numpy, omegaconf): no extra needed.

A run directory holds `metrics.json` (marl-eval layout: env → task → algorithm → seed_k → step_i) and, from runs
of this project, `run.json` (stoix_like/run/run_record.py: the composed config and timings). A report is given run
directories, `metrics.json` files, globs of either, or folders holding any number of them (a Hydra multirun sweep,
the learning table's results), and is never told the algorithm, env or seeds: they are read from the logs.

Runs are grouped per env, then per *group*: one algorithm with one config. A group's label is the algorithm plus
the config keys whose values differ between that algorithm's runs in that env (a sweep's swept keys), seeds
aside: the jobs of `-m arch.seed=0,1,2 system.actor_lr=1e-3,3e-4` make two groups of three seeds each.
"""

from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
from omegaconf import OmegaConf

from stoix_like.run import run_record
from stoix_like.errors import ConfigError
from stoix_like.types import JSONValue

METRICS_FILE = "metrics.json"
RETURN = "episode_return"
# the final params' return beside the absolute metric (stoix_like/run/logging.py, END_OF_RUN_PREFIX)
FINAL_PARAMS_RETURN = "final_episode_return"
# Config keys that never tell two groups apart: which seeds ran, where and how it logged, how processes met.
NOT_A_DIFFERENCE = ("arch.seed", "arch.num_seeds", "logger.", "hydra.", "arch.multihost", "arch.coordinator_address",
                    "arch.num_processes", "arch.process_id", "arch.multihost_init_timeout_seconds",
                    "arch.heartbeat_timeout_seconds", "arch.collective_timeout_seconds")


@dataclass(frozen=True)
class SeedLog:
    """One seed's evaluations, as its run logged them."""

    seed: int
    steps: np.ndarray  # (evaluations,) env steps of this seed at each evaluation
    eval_returns: np.ndarray  # (evaluations,) mean return of each evaluation's episodes
    absolute_return: Optional[float]  # mean return of its best params over the end-of-run episodes; None if unfinished
    # mean return of its final params over as many episodes; None if unfinished, or logged before runs recorded it
    final_params_return: Optional[float] = None

    @property
    def absolute_or_last_return(self) -> float:
        """The absolute return, or the last evaluation's for a run that did not finish."""
        return self.absolute_return if self.absolute_return is not None else float(self.eval_returns[-1])

    @property
    def best_eval_return(self) -> float:
        return float(np.max(self.eval_returns))


@dataclass
class RunLog:
    """One algorithm on one env in one run directory."""

    directory: str
    algorithm: str
    suite: str
    task: str
    seeds: List[SeedLog]
    record: Optional[Dict[str, JSONValue]]  # run.json, when the run wrote one
    config: Dict[str, JSONValue] = field(default_factory=dict)  # its config, flattened: {"system.actor_lr": 3e-4, ...}

    @property
    def env(self) -> str:
        return f"{self.suite}/{self.task}"


@dataclass
class Group:
    """One line of a figure and one row of a table: an algorithm (with one config) on one env, its seeds pooled
    over the runs that trained them."""

    label: str
    algorithm: str
    suite: str
    task: str
    seeds: List[SeedLog]  # in seed order
    runs: List[RunLog]
    notes: List[str] = field(default_factory=list)  # what a reader should know (a seed seen twice, an unfinished run)

    @property
    def env(self) -> str:
        return f"{self.suite}/{self.task}"

    @property
    def seed_numbers(self) -> List[int]:
        return [seed.seed for seed in self.seeds]

    def absolute_returns(self) -> np.ndarray:
        """(seeds,) each seed's absolute return (its last evaluation's, if its run did not finish)."""
        return np.array([seed.absolute_or_last_return for seed in self.seeds])

    def final_params_returns(self) -> Optional[np.ndarray]:
        """(seeds,) each seed's final params' return over the absolute metric's episodes; None unless every seed
        logged one."""
        values = [seed.final_params_return for seed in self.seeds]
        return None if any(value is None for value in values) else np.array(values, np.float64)

    @property
    def machines(self) -> List[str]:
        """The machines its runs recorded (run.json's `machine`), in words; "not recorded" for runs without."""
        named = {f"{m['cpu_count']}-core {m['processor']}" if (m := (run.record or {}).get("machine"))
                 else "not recorded" for run in self.runs}
        return sorted(named)

    @property
    def started(self) -> Optional[str]:
        """The day its last run started (run.json's `started`), YYYY-MM-DD."""
        days = [started[:10] for run in self.runs if (started := (run.record or {}).get("started"))]
        return max(days) if days else None

    def best_eval_returns(self) -> np.ndarray:
        return np.array([seed.best_eval_return for seed in self.seeds])

    @property
    def finished(self) -> bool:
        return all(seed.absolute_return is not None for seed in self.seeds)

    def curves(self) -> Tuple[np.ndarray, np.ndarray]:
        """(steps (evaluations,), returns (seeds, evaluations)) on the evaluation steps every seed reached."""
        common = sorted(set.intersection(*(set(seed.steps.tolist()) for seed in self.seeds)))
        returns = np.array([[dict(zip(seed.steps.tolist(), seed.eval_returns))[step] for step in common]
                            for seed in self.seeds])
        return np.array(common), returns

    @property
    def steps_per_seed(self) -> int:
        return max(int(seed.steps[-1]) for seed in self.seeds)

    @property
    def solved_return(self) -> Optional[float]:
        """The env's solved threshold, from the config the runs saved (env.solved_return)."""
        values = {value for run in self.runs if (value := run.config.get("env.solved_return")) is not None}
        return float(values.pop()) if len(values) == 1 else None

    def _timings(self, name: str) -> Optional[float]:
        """A timing summed over the group's runs; None unless every run recorded it."""
        values = [value for run in self.runs if run.record and (value := run.record.get(name)) is not None]
        return float(sum(values)) if values and len(values) == len(self.runs) else None

    @property
    def wall_seconds(self) -> Optional[float]:
        """The runs' wall time, summed over the runs the seeds came from (None unless every run recorded it)."""
        return self._timings("wall_seconds")

    @property
    def steps_per_second(self) -> Optional[float]:
        """Env steps per second of learning, all seeds together (compilation and evaluation left out)."""
        steps, seconds = self._timings("learned_steps"), self._timings("learn_seconds")
        return steps / seconds if steps is not None and seconds else None


def find_run_files(paths: Sequence[str]) -> List[str]:
    """Every `metrics.json` named by `paths` (files, directories searched downwards, or globs of either)."""
    found: List[str] = []
    for path in paths:
        matches = sorted(glob.glob(path, recursive=True)) if glob.has_magic(path) else [path]
        if not matches or not all(os.path.exists(match) for match in matches):
            raise ConfigError(f"{path}: no such run directory or file; give run directories, metrics.json files, "
                              "sweep directories or globs of them.")
        for match in matches:
            if os.path.isfile(match):
                found.append(os.path.abspath(match))
            else:
                found += sorted(os.path.abspath(os.path.join(folder, METRICS_FILE))
                                for folder, _, files in os.walk(match) if METRICS_FILE in files)
    unique = list(dict.fromkeys(found))
    if not unique:
        raise ConfigError(f"no {METRICS_FILE} under {', '.join(paths)}: a run writes one with logger.use_json=True.")
    return unique


def load_runs(paths: Sequence[str]) -> List[RunLog]:
    """Every (algorithm, env) logged under `paths`."""
    return [run for path in find_run_files(paths) for run in read_metrics(path)]


def read_metrics(metrics_path: str) -> Iterator[RunLog]:
    directory = os.path.dirname(metrics_path)
    with open(metrics_path) as file:
        data = json.load(file)
    record = run_record.read(directory)
    config = flatten(record["config"]) if record and isinstance(record.get("config"), dict) else {}
    for suite, tasks in data.items():
        for task, algorithms in tasks.items():
            for algorithm, seeds in algorithms.items():
                logs = [log for key, entries in seeds.items() if (log := _seed_log(key, entries)) is not None]
                if logs:
                    yield RunLog(directory, algorithm, suite, task, sorted(logs, key=lambda log: log.seed),
                                 record, config)


def _seed_log(key: str, entries: Dict[str, JSONValue]) -> Optional[SeedLog]:
    """A seed's evaluations in step order; None for a seed with none logged yet."""
    steps = sorted((int(name.split("_")[1]), entry) for name, entry in entries.items() if name.startswith("step_"))
    if not key.startswith("seed_") or not steps:
        return None
    absolute = entries.get("absolute_metrics", {}).get(RETURN)
    final = entries.get("absolute_metrics", {}).get(FINAL_PARAMS_RETURN)
    return SeedLog(seed=int(key.split("_", 1)[1]),
                   steps=np.array([entry["step_count"] for _, entry in steps]),
                   eval_returns=np.array([float(np.mean(entry[RETURN])) for _, entry in steps]),
                   absolute_return=float(np.mean(absolute)) if absolute else None,
                   final_params_return=float(np.mean(final)) if final else None)


def flatten(tree: Dict[str, JSONValue], prefix: str = "") -> Dict[str, JSONValue]:
    """{"system": {"actor_lr": 1e-3}} -> {"system.actor_lr": 1e-3}; lists become tuples (comparable, hashable)."""
    flat: Dict[str, JSONValue] = {}
    for name, value in tree.items():
        if isinstance(value, dict):
            flat.update(flatten(value, f"{prefix}{name}."))
        else:
            flat[f"{prefix}{name}"] = tuple(value) if isinstance(value, list) else value
    return flat


def differing_keys(runs: Sequence[RunLog]) -> List[str]:
    """The config keys whose values differ between `runs` (seeds, logging and process keys aside)."""
    keys = sorted(set().union(*(run.config for run in runs)))
    return [key for key in keys if not key.startswith(NOT_A_DIFFERENCE)
            and len({repr(run.config.get(key)) for run in runs}) > 1]


def group_runs(runs: Sequence[RunLog]) -> List[Group]:
    """Runs grouped by env, algorithm and the config keys that differ between the algorithm's runs in that env;
    sorted by env, then label. A seed trained twice in one group counts once: the latest run's."""
    groups: List[Group] = []
    for env_algorithm in sorted({(run.suite, run.task, run.algorithm) for run in runs}):
        same = [run for run in runs if (run.suite, run.task, run.algorithm) == env_algorithm]
        keys = differing_keys(same)
        by_label: Dict[str, List[RunLog]] = {}
        for run in same:
            label = " ".join([run.algorithm] + [f"{key}={_shown(run.config.get(key))}" for key in keys])
            by_label.setdefault(label, []).append(run)
        for label, members in by_label.items():
            groups.append(_pool(label, members))
    return sorted(groups, key=lambda group: (group.suite, group.task, group.label))


def _pool(label: str, runs: List[RunLog]) -> Group:
    """The group's seeds from all its runs; a seed in several runs is taken from the one that started last."""
    runs = sorted(runs, key=lambda run: ((run.record or {}).get("started", ""), os.path.getmtime(run.directory)))
    seeds: Dict[int, SeedLog] = {}
    notes = []
    for run in runs:
        for seed in run.seeds:
            if seed.seed in seeds:
                notes.append(f"seed {seed.seed} appears in several runs; the latest ({run.directory}) is used")
            seeds[seed.seed] = seed
    used = [run for run in runs if any(seeds[seed.seed] is seed for seed in run.seeds)]
    unfinished = [seed.seed for seed in seeds.values() if seed.absolute_return is None]
    if unfinished:
        notes.append(f"seeds {', '.join(map(str, sorted(unfinished)))} did not finish: their last evaluation "
                     "stands in for the absolute return")
    first = runs[0]
    return Group(label, first.algorithm, first.suite, first.task, [seeds[seed] for seed in sorted(seeds)], used, notes)


def _shown(value: object) -> str:
    return "null" if value is None else str(list(value) if isinstance(value, tuple) else value)


def env_option_of(suite: str, task: str) -> Optional[str]:
    """The `env=` option (config/env/<suite>/<name>.yaml) whose suite and scenario are these, if one is."""
    from stoix_like.config.compose import CONFIG_DIR

    for path in sorted(glob.glob(os.path.join(CONFIG_DIR, "env", "*", "*.yaml"))):
        env = OmegaConf.load(path)
        if OmegaConf.select(env, "suite") == suite and run_record.task_name(env) == task:
            return os.path.relpath(path, os.path.join(CONFIG_DIR, "env"))[: -len(".yaml")].replace(os.sep, "/")
    return None
