"""Loggers: a readable console and a marl-eval JSON file. Only process 0 logs.

A logger that fails mid-run (disk full, ...) warns once and is switched off; training goes on.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import warnings
from typing import Any, Dict, List, Mapping

import numpy as np

from stoix_like import parallel


def summarize(values: np.ndarray) -> Dict[str, float]:
    values = np.asarray(values, np.float64)
    if values.size == 0:
        return {"mean": float("nan"), "std": float("nan"), "min": float("nan"), "max": float("nan")}
    return {"mean": float(values.mean()), "std": float(values.std()), "min": float(values.min()),
            "max": float(values.max())}


def _format_duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else (f"{minutes}m{secs:02d}s" if minutes else f"{secs}s")


class ConsoleLogger:
    def __init__(self, stream=None):
        self._stream = stream or sys.stdout

    def _write(self, line: str) -> None:
        print(line, file=self._stream, flush=True)

    def message(self, line: str) -> None:
        self._write(line)

    def progress(self, step: int, total: int, train_return: float, steps_per_second: float,
                 eta_seconds: float, extra: Mapping[str, float]) -> None:
        losses = " ".join(f"{name} {value:.3g}" for name, value in extra.items())
        self._write(
            f"[train] step {step:,}/{total:,} ({100.0 * step / total:5.1f}%) | return {train_return:8.2f} | "
            f"{steps_per_second:,.0f} steps/s | ETA {_format_duration(eta_seconds)}" + (f" | {losses}" if losses else "")
        )

    def evaluation(self, label: str, step: int, stats: Mapping[str, Dict[str, float]]) -> None:
        ret, length = stats["episode_return"], stats["episode_length"]
        self._write(
            f"[{label}] step {step:,} | return {ret['mean']:.2f} ± {ret['std']:.2f} "
            f"(min {ret['min']:.1f}, max {ret['max']:.1f}) | length {length['mean']:.1f}"
        )


class JsonLogger:
    """marl-eval layout: env → task → algorithm → seed_k → step_i → {step_count, metric: [values]}."""

    def __init__(self, path: str, env_name: str, task_name: str, algorithm: str, seed: int):
        self.path = path
        self._data: Dict[str, Any] = {env_name: {task_name: {algorithm: {}}}}
        self._run = self._data[env_name][task_name][algorithm].setdefault(f"seed_{seed}", {})
        self._next_index = 0

    def evaluation(self, step: int, per_episode: Mapping[str, np.ndarray], extra: Mapping[str, float]) -> None:
        entry: Dict[str, Any] = {"step_count": int(step)}
        entry.update({name: np.asarray(values, np.float64).tolist() for name, values in per_episode.items()})
        entry.update({name: [float(value)] for name, value in extra.items()})
        self._run[f"step_{self._next_index}"] = entry
        self._next_index += 1
        self._flush()

    def absolute(self, per_episode: Mapping[str, np.ndarray]) -> None:
        self._run["absolute_metrics"] = {name: np.asarray(v, np.float64).tolist() for name, v in per_episode.items()}
        self._flush()

    def _flush(self) -> None:
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self._data, f)
        os.replace(tmp, self.path)  # a reader never sees a half-written file


class Logger:
    """The loggers a run asked for, called from the experiment loop."""

    def __init__(self, config: Any, run_dir: str, algorithm: str):
        self.run_dir = run_dir
        self.enabled = parallel.is_main_process()
        self._sinks: List[Any] = []
        self.console = ConsoleLogger() if config.logger.use_console else None
        self.json = None
        if config.logger.use_json:
            self.json = JsonLogger(
                os.path.join(run_dir, "metrics.json"),
                env_name=str(config.env.suite),
                task_name=str(config.env.scenario.name),
                algorithm=algorithm,
                seed=int(config.arch.seed),
            )
        self._failed: set = set()

    def _call(self, sink: Any, method: str, *args: Any) -> None:
        if not self.enabled or sink is None or id(sink) in self._failed:
            return
        try:
            getattr(sink, method)(*args)
        except (OSError, ValueError) as error:
            self._failed.add(id(sink))
            warnings.warn(f"{type(sink).__name__} failed ({error}); it is switched off and training goes on.")

    def message(self, line: str) -> None:
        self._call(self.console, "message", line)

    def progress(self, *args: Any) -> None:
        self._call(self.console, "progress", *args)

    def evaluation(self, label: str, step: int, per_episode: Mapping[str, np.ndarray],
                   extra: Mapping[str, float]) -> Dict[str, Dict[str, float]]:
        stats = {name: summarize(values) for name, values in per_episode.items()}
        self._call(self.console, "evaluation", label, step, stats)
        if label == "absolute":
            self._call(self.json, "absolute", per_episode)
        else:
            self._call(self.json, "evaluation", step, per_episode, extra)
        return stats


class Stopwatch:
    def __init__(self):
        self.start = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.start
