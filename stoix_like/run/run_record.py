"""What a run records about itself beside its metrics: `<run dir>/run.json`.

`metrics.json` (marl-eval layout) holds what was measured at each evaluation; `run.json` holds what a report
needs to read it without being told: the algorithm, env and seeds, the composed config (so that a sweep's jobs
can be grouped by the keys that differ between them) and the run's timings. Process 0 writes it when the run
starts (status "running") and again when it ends (status "done"). Plain JSON, no jax: the report reads it.
"""

from __future__ import annotations

import json
import os
import platform
import time
from typing import Dict, Mapping, NamedTuple, Optional, Sequence

from stoix_like.config.spec import ConfigValue

FILE_NAME = "run.json"
FORMAT_VERSION = 1


class Timings(NamedTuple):
    wall_seconds: float  # the whole run in this process: setup, compilation, learning, evaluation
    compile_seconds: float
    learn_seconds: float  # in learn calls only
    learned_steps: int  # env steps those learn calls took, all seeds together


def task_name(env_config: ConfigValue) -> str:
    """The task a run is logged and reported under: the suite's scenario name, and which observation entries the
    agent sees where `env.observed_indices` hides some (`CartPole-v1[observed 0,2]` is another task than
    `CartPole-v1`, and its runs must not be pooled with CartPole's in a report)."""
    name = str(env_config["scenario"]["name"])
    observed = env_config.get("observed_indices")
    if observed is None:
        return name
    return f"{name}[observed {','.join(str(int(index)) for index in observed)}]"


def machine() -> Dict[str, object]:
    """What the run's wall times were measured on: a table built from logs names the machines that ran them,
    not the machine that happens to rebuild it."""
    processor = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as file:  # Linux names the model here; platform.processor() often does not
            processor = next((line.split(":", 1)[1].strip() for line in file if line.startswith("model name")),
                             processor)
    except OSError:
        pass
    return {"cpu_count": os.cpu_count(), "processor": processor, "system": platform.system()}


def started(algorithm: str, suite: str, task: str, seeds: Sequence[int], total_timesteps: int,
            config: ConfigValue) -> Dict[str, object]:
    """The record of a run that has just started; `config` is the composed config as plain containers."""
    return {"format": FORMAT_VERSION, "algorithm": algorithm, "suite": suite, "task": task,
            "seeds": [int(seed) for seed in seeds], "total_timesteps": int(total_timesteps),
            "status": "running", "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": machine(),
            "config": config}


def finished(record: Mapping[str, object], timings: Timings, resumed: bool) -> Dict[str, object]:
    """The record once the run is done: its timings (since resuming, when `resumed`)."""
    return {**record, "status": "done", "resumed": resumed, **timings._asdict()}


def write(run_dir: str, record: Mapping[str, object]) -> None:
    os.makedirs(run_dir, exist_ok=True)
    path = os.path.join(run_dir, FILE_NAME)
    with open(path + ".tmp", "w") as file:
        json.dump(record, file, indent=1)
    os.replace(path + ".tmp", path)  # a reader never sees a half-written record


def read(run_dir: str) -> Optional[Dict[str, ConfigValue]]:
    """The run's record, or None for a run that wrote none (logs from before run.json, or from elsewhere)."""
    path = os.path.join(run_dir, FILE_NAME)
    if not os.path.exists(path):
        return None
    with open(path) as file:
        return json.load(file)
