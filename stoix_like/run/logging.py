"""Loggers: a readable console (saved as `<run dir>/<algorithm>.log` too), a marl-eval JSON file, the run's
record (`run.json`), TensorBoard, Neptune and Weights & Biases. Only process 0 logs.

Each sink is built from `config.logger` and fed by the one `Logger` the experiment loop talks to. A sink that
fails mid-run (disk full, network down) warns once and is switched off; training goes on. With several
seeds every line, JSON entry and scalar carries its seed.
"""

from __future__ import annotations

import json
import math
import os
import sys
import types
import warnings
from typing import IO, Dict, List, Literal, Mapping, Optional, Protocol, Sequence, Tuple, get_args

import numpy as np
from omegaconf import DictConfig, OmegaConf

from stoix_like.runtime import parallel
from stoix_like.run import run_record
from stoix_like.errors import ConfigError
from stoix_like.types import JSONValue

NeptuneMode = Literal["async", "sync", "offline", "debug", "read-only"]
NEPTUNE_MODES: Tuple[NeptuneMode, ...] = get_args(NeptuneMode)
NEPTUNE_TOKEN_VARIABLE = "NEPTUNE_API_TOKEN"
WANDB_KEY_VARIABLE = "WANDB_API_KEY"


def summarize(values: np.ndarray) -> Dict[str, float]:
    values = np.asarray(values, np.float64)
    if values.size == 0:
        return {"mean": float("nan"), "std": float("nan"), "min": float("nan"), "max": float("nan")}
    return {"mean": float(values.mean()), "std": float(values.std()), "min": float(values.min()),
            "max": float(values.max())}


def format_duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else (f"{minutes}m{secs:02d}s" if minutes else f"{secs}s")


def plain_config(config: DictConfig) -> JSONValue:
    """The config as plain containers, interpolations resolved where they can be outside Hydra."""
    try:
        return OmegaConf.to_container(config, resolve=True)
    except Exception:  # noqa: BLE001 - e.g. ${hydra:...} outside a Hydra run: keep it as written
        return OmegaConf.to_container(config, resolve=False)


def _seed_label(seed: Optional[int]) -> str:
    return "" if seed is None else f" seed {seed}"


class ConsoleLogger:
    """Readable lines on stdout (unless `show` is off), each appended to `log_path` as well, so that the run
    directory keeps them (under Hydra that is the file Hydra opens for the job, `<run dir>/<algorithm>.log`,
    which would otherwise hold only library warnings: these lines never go through `logging`)."""

    def __init__(self, log_path: Optional[str], show: bool = True, stream: Optional[IO[str]] = None):
        self._stream = (stream or sys.stdout) if show else None
        self._file: Optional[IO[str]] = None
        if log_path is not None:
            os.makedirs(os.path.dirname(log_path) or ".", exist_ok=True)
            self._file = open(log_path, "a", encoding="utf-8")

    def _write(self, line: str) -> None:
        if self._stream is not None:
            print(line, file=self._stream, flush=True)
        if self._file is not None:
            print(line, file=self._file, flush=True)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()

    def message(self, line: str) -> None:
        self._write(line)

    def progress(self, step: int, total: int, train_return: float, steps_per_second: float,
                 eta_seconds: float, extra: Mapping[str, float], seed: Optional[int]) -> None:
        losses = " ".join(f"{name} {value:.3g}" for name, value in extra.items())
        self._write(
            f"[train{_seed_label(seed)}] step {step:,}/{total:,} ({100.0 * step / total:5.1f}%) | return "
            f"{train_return:8.2f} | {steps_per_second:,.0f} steps/s | ETA {format_duration(eta_seconds)}"
            + (f" | {losses}" if losses else "")
        )

    def evaluation(self, label: str, step: int, stats: Mapping[str, Dict[str, float]], seed: Optional[int]) -> None:
        ret, length = stats["episode_return"], stats["episode_length"]
        self._write(
            f"[{label}{_seed_label(seed)}] step {step:,} | return {ret['mean']:.2f} ± {ret['std']:.2f} "
            f"(min {ret['min']:.1f}, max {ret['max']:.1f}) | length {length['mean']:.1f}"
        )


# The end-of-run evaluations and where metrics.json keeps them: both under a seed's `absolute_metrics`, the final
# params' metrics renamed so that marl-eval's absolute metric stays the best params' own.
END_OF_RUN_PREFIX = {"absolute": "", "final": "final_"}


class JsonLogger:
    """marl-eval layout: env → task → algorithm → seed_k → step_i → {step_count, metric: [values]}."""

    def __init__(self, path: str, env_name: str, task_name: str, algorithm: str, seeds: Sequence[int]):
        self.path = path
        self._data: Dict[str, JSONValue] = {env_name: {task_name: {algorithm: {f"seed_{seed}": {} for seed in seeds}}}}
        self._runs = self._data[env_name][task_name][algorithm]

    def evaluation(self, step: int, per_episode: Mapping[str, np.ndarray], extra: Mapping[str, float],
                   seed: int) -> None:
        entry: Dict[str, JSONValue] = {"step_count": int(step)}
        entry.update({name: np.asarray(values, np.float64).tolist() for name, values in per_episode.items()})
        entry.update({name: [float(value)] for name, value in extra.items()})
        run = self._runs[f"seed_{seed}"]
        run[f"step_{sum(key.startswith('step_') for key in run)}"] = entry
        self._flush()

    def absolute(self, per_episode: Mapping[str, np.ndarray], seed: int, prefix: str = "") -> None:
        """An end-of-run evaluation under the seed's `absolute_metrics`: the best params' metrics as they are
        (marl-eval's absolute metric), the final params' as `final_<metric>` beside them."""
        metrics = self._runs[f"seed_{seed}"].setdefault("absolute_metrics", {})
        metrics.update({f"{prefix}{name}": np.asarray(v, np.float64).tolist() for name, v in per_episode.items()})
        self._flush()

    def state(self) -> Dict[str, JSONValue]:
        return self._data

    def restore(self, data: Dict[str, JSONValue]) -> None:
        """Continue a resumed run's log: the entries written before its last checkpoint come first."""
        for env_name, tasks in data.items():
            for task_name, algorithms in tasks.items():
                for algorithm, runs in algorithms.items():
                    mine = self._data.get(env_name, {}).get(task_name, {}).get(algorithm)
                    if mine is not None:
                        for seed_key, entries in runs.items():
                            mine[seed_key] = dict(entries)
        self._flush()

    def _flush(self) -> None:
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self._data, f)
        os.replace(tmp, self.path)  # a reader never sees a half-written file


class RunRecordLogger:
    """`<run dir>/run.json` (stoix_like/run/run_record.py): written as the run starts, then with its timings."""

    def __init__(self, run_dir: str, record: Dict[str, object]):
        self.run_dir = run_dir
        self._record = record

    def start(self) -> None:
        run_record.write(self.run_dir, self._record)

    def finish(self, timings: run_record.Timings, resumed: bool) -> None:
        run_record.write(self.run_dir, run_record.finished(self._record, timings, resumed))


class ScalarSink(Protocol):
    """A sink of named numbers over steps: TensorBoard, Neptune."""

    def scalars(self, prefix: str, step: int, values: Mapping[str, float]) -> None: ...

    def close(self) -> None: ...


class TensorBoardLogger:
    """A scalar per logged number under <run dir>/tensorboard: `train/...`, `eval/...`, `absolute/...`."""

    def __init__(self, log_dir: str, config: DictConfig):
        from tensorboardX import SummaryWriter

        self.log_dir = log_dir
        self._writer = SummaryWriter(logdir=log_dir)
        self._writer.add_text("config", "```\n" + OmegaConf.to_yaml(config) + "\n```", 0)

    def scalars(self, prefix: str, step: int, values: Mapping[str, float]) -> None:
        for name, value in values.items():
            self._writer.add_scalar(f"{prefix}/{name}", float(value), int(step))
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


class NeptuneLogger:
    """A Neptune run: the composed config as parameters, every logged number as a series.

    The API token is read from $NEPTUNE_API_TOKEN only: it is never in the config, never printed, never logged.
    """

    def __init__(self, settings: DictConfig, config: DictConfig, algorithm: str):
        mode, token = neptune_mode(settings), os.environ.get(NEPTUNE_TOKEN_VARIABLE)
        project = settings.project or os.environ.get("NEPTUNE_PROJECT")
        self._token = token
        try:
            with warnings.catch_warnings():  # the 1.x client and its dependencies announce deprecations on import
                warnings.simplefilter("ignore", DeprecationWarning)
                warnings.filterwarnings("ignore", message=".*neptune-client.* package has been deprecated")
                import neptune
                from neptune.utils import stringify_unsupported

            self._run = neptune.init_run(
                project=project, api_token=token, mode=mode, name=f"{algorithm} {run_record.task_name(config.env)}",
                tags=[str(tag) for tag in settings.tags], source_files=[], git_ref=False,
                capture_stdout=False, capture_stderr=False, capture_hardware_metrics=False,
            )
            self._run["config"] = stringify_unsupported(plain_config(config))
        except Exception as error:  # noqa: BLE001 - one line to the user, with the token (if any) redacted
            raise ConfigError(f"logger.kind.neptune could not start a run: {self._redact(error)}") from None

    def _redact(self, error: BaseException) -> str:
        message = f"{type(error).__name__}: {error}".splitlines()[0]
        return message.replace(self._token, "***") if self._token else message

    def scalars(self, prefix: str, step: int, values: Mapping[str, float]) -> None:
        for name, value in values.items():
            self._run[f"{prefix}/{name}"].append(float(value), step=int(step))

    def close(self) -> None:
        self._run.stop()


def neptune_mode(settings: DictConfig) -> NeptuneMode:
    """`logger.kind.neptune.mode`, refused unless it is one of the modes the Neptune client knows."""
    mode = str(settings.mode)
    for known in NEPTUNE_MODES:
        if mode == known:
            return known
    raise ConfigError(f"logger.kind.neptune.mode={mode!r} must be one of {', '.join(NEPTUNE_MODES)}.")


def check_neptune_settings(settings: DictConfig) -> None:
    """The mistakes that would otherwise surface only at the first log, reported before any work."""
    mode = neptune_mode(settings)
    if mode in ("async", "sync", "read-only"):
        if not os.environ.get(NEPTUNE_TOKEN_VARIABLE):
            raise ConfigError(
                f"logger.kind.neptune.mode={mode} needs a Neptune API token in the {NEPTUNE_TOKEN_VARIABLE} "
                f"environment variable (it is never read from the config); or set logger.kind.neptune.mode=offline.")
        if not (settings.project or os.environ.get("NEPTUNE_PROJECT")):
            raise ConfigError(f"logger.kind.neptune.mode={mode} needs logger.kind.neptune.project=WORKSPACE/PROJECT "
                              f"(or the NEPTUNE_PROJECT environment variable).")


class WandbLogger:
    """A Weights & Biases run: the composed config, and every logged number under the names TensorBoard uses.

    The API key is read by wandb from $WANDB_API_KEY only: it is never in the config, never printed or logged.
    `mode=offline` writes `<run dir>/wandb/offline-run-*` without a network (`wandb sync` uploads it later).
    """

    def __init__(self, settings: DictConfig, config: DictConfig, algorithm: str, run_dir: str):
        wandb = import_wandb()
        os.makedirs(run_dir, exist_ok=True)
        self._run = wandb.init(
            project=settings.project, entity=settings.entity, mode=str(settings.mode), dir=run_dir,
            name=f"{algorithm} {run_record.task_name(config.env)}", tags=[str(tag) for tag in settings.tags],
            config=plain_config(config), settings=wandb.Settings(console="off", silent=True))

    def scalars(self, prefix: str, step: int, values: Mapping[str, float]) -> None:
        self._run.log({f"{prefix}/{name}": float(value) for name, value in values.items()}, step=int(step))

    def close(self) -> None:
        self._run.finish()


def import_wandb() -> types.ModuleType:
    """The wandb module, or a one-line ConfigError naming the extra that installs it."""
    try:
        import wandb
    except ImportError:
        raise ConfigError("logger.kind.wandb.enabled=True needs the wandb package: pip install -e \".[wandb]\" "
                          "(or pip install wandb).") from None
    return wandb


def check_wandb_settings(settings: DictConfig) -> None:
    """Refused before any work: W&B without its package, or online without an API key in the environment."""
    import_wandb()
    if str(settings.mode) == "online" and not os.environ.get(WANDB_KEY_VARIABLE):
        raise ConfigError(
            f"logger.kind.wandb.mode=online needs a W&B API key in the {WANDB_KEY_VARIABLE} environment variable "
            f"(it is never read from the config); or set logger.kind.wandb.mode=offline.")


class Logger:
    """The loggers a run asked for, called from the experiment loop. On processes other than 0 it does nothing."""

    def __init__(self, config: DictConfig, run_dir: str, algorithm: str, seeds: Sequence[int]):
        self.run_dir = run_dir
        self.enabled = parallel.is_main_process()
        self._seeds = list(seeds)
        self._failed: set[int] = set()  # ids of the sinks switched off
        self.console: Optional[ConsoleLogger] = None
        self.json: Optional[JsonLogger] = None
        self.record: Optional[RunRecordLogger] = None
        self._scalar_sinks: List[ScalarSink] = []
        kinds = config.logger.kind
        if kinds.neptune.enabled:
            check_neptune_settings(kinds.neptune)
        if kinds.wandb.enabled:
            check_wandb_settings(kinds.wandb)
        if not self.enabled:  # no sink is built, so no file or remote run appears outside process 0
            return
        self.console = ConsoleLogger(os.path.join(run_dir, f"{algorithm}.log"), show=bool(config.logger.use_console))
        if config.logger.use_json:
            self.json = JsonLogger(os.path.join(run_dir, "metrics.json"), env_name=str(config.env.suite),
                                   task_name=run_record.task_name(config.env), algorithm=algorithm, seeds=seeds)
            # beside the metrics, what a report needs to read them without being told (stoix_like/run/run_record.py)
            self.record = RunRecordLogger(run_dir, run_record.started(
                algorithm, str(config.env.suite), run_record.task_name(config.env), seeds,
                int(config.arch.total_timesteps), plain_config(config)))
            self._call(self.record, "start")
        if kinds.tensorboard.enabled:
            self._scalar_sinks.append(TensorBoardLogger(os.path.join(run_dir, "tensorboard"), config))
        if kinds.neptune.enabled:
            self._scalar_sinks.append(NeptuneLogger(kinds.neptune, config, algorithm))
        if kinds.wandb.enabled:
            self._scalar_sinks.append(WandbLogger(kinds.wandb, config, algorithm, run_dir))

    def finish(self, timings: run_record.Timings, resumed: bool) -> None:
        """The run is done: its record gets its timings."""
        self._call(self.record, "finish", timings, resumed)

    def _call(self, sink: Optional[object], method: str, *args: object) -> None:
        if not self.enabled or sink is None or id(sink) in self._failed:
            return
        try:
            getattr(sink, method)(*args)
        except Exception as error:  # noqa: BLE001 - a logger must never stop training
            self._failed.add(id(sink))
            warnings.warn(f"{type(sink).__name__} failed ({type(error).__name__}: {error}); it is switched off "
                          f"and training goes on.", stacklevel=3)

    def _prefix(self, label: str, seed: int) -> str:
        return label if len(self._seeds) == 1 else f"seed_{seed}/{label}"

    def _shown_seed(self, seed: int) -> Optional[int]:
        return None if len(self._seeds) == 1 else seed

    def message(self, line: str) -> None:
        self._call(self.console, "message", line)

    def progress(self, seed: int, step: int, total: int, train_return: float, steps_per_second: float,
                 eta_seconds: float, train_means: Mapping[str, float], member: int = 0) -> None:
        """`member`: the seed's place in the run's list (a sweep's members repeat seeds: member_logs.py)."""
        self._call(self.console, "progress", step, total, train_return, steps_per_second, eta_seconds, train_means,
                   self._shown_seed(seed))
        scalars = {"episode_return": train_return, "steps_per_second": steps_per_second, **train_means}
        for sink in self._scalar_sinks:
            self._call(sink, "scalars", self._prefix("train", seed), step, scalars)

    def evaluation(self, label: str, seed: int, step: int, per_episode: Mapping[str, np.ndarray],
                   extra: Mapping[str, float], member: int = 0) -> Dict[str, Dict[str, float]]:
        """Log one evaluation ("eval" during training; "absolute", the best params, and "final", the final params,
        at the end); returns its statistics. `member`: as in `progress`."""
        stats = {name: summarize(values) for name, values in per_episode.items()}
        self._call(self.console, "evaluation", label, step, stats, self._shown_seed(seed))
        if label in END_OF_RUN_PREFIX:
            self._call(self.json, "absolute", per_episode, seed, END_OF_RUN_PREFIX[label])
        else:
            self._call(self.json, "evaluation", step, per_episode, extra, seed)
        scalars = {f"{name}_{statistic}": value for name, by_statistic in stats.items()
                   for statistic, value in by_statistic.items()}
        for sink in self._scalar_sinks:
            self._call(sink, "scalars", self._prefix(label, seed), step, scalars)
        return stats

    def json_state(self) -> Optional[Dict[str, JSONValue]]:
        return self.json.state() if self.json is not None else None

    def restore_json(self, state: Optional[Dict[str, JSONValue]]) -> None:
        if state:
            self._call(self.json, "restore", state)

    def close(self) -> None:
        for sink in self._scalar_sinks:
            self._call(sink, "close")
        self._call(self.console, "close")
