"""Loggers: what TensorBoard and Neptune (offline) really wrote, read back; token hygiene; failures mid-run.

No training here: the `Logger` the experiment loop talks to is fed a few fake updates and evaluations.
"""

from __future__ import annotations

import json
import pathlib
import struct
import sys
import time
import warnings

import numpy as np
import pytest

from stoix_like.run import logging as logging_lib
from stoix_like.errors import ConfigError

TOKEN = "test-token-must-never-appear-0123456789"


def feed(logger: logging_lib.Logger, seed: int = 42) -> None:
    """Two evaluations and the absolute metric, as the loop would log them."""
    for index, step in enumerate((100, 200)):
        logger.progress(seed, step, 200, 10.0 + index, 5000.0, 1.0, {"actor_loss": 0.5 - index, "entropy": 0.6})
        logger.evaluation("eval", seed, step, {"episode_return": np.array([20.0, 30.0 + index]),
                                               "episode_length": np.array([20, 31])},
                          {"steps_per_second": 5000.0})
    logger.evaluation("absolute", seed, 200, {"episode_return": np.array([25.0, 35.0]),
                                              "episode_length": np.array([25, 35])}, {})


def read_tensorboard(log_dir: pathlib.Path) -> dict:
    """{tag: [(step, value), ...]} from tfevents files (TFRecord framing around Event protos)."""
    from tensorboardX.proto import event_pb2

    scalars: dict = {}
    files = sorted(log_dir.rglob("events.out.tfevents.*"))
    assert files, f"no event file under {log_dir}"
    for path in files:
        data = path.read_bytes()
        offset = 0
        while offset < len(data):
            (length,) = struct.unpack("<Q", data[offset:offset + 8])
            record = data[offset + 12: offset + 12 + length]
            offset += 12 + length + 4
            event = event_pb2.Event.FromString(record)
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    scalars.setdefault(value.tag, []).append((event.step, value.simple_value))
    return scalars


def neptune_operations(root: pathlib.Path) -> list:
    files = sorted((root / ".neptune").rglob("data-*.log"))
    assert files, f"neptune wrote nothing under {root / '.neptune'}"
    return [json.loads(line)["obj"] for path in files for line in path.read_text().splitlines() if line.strip()]


def test_tensorboard_has_a_scalar_for_every_logged_metric(compose, tmp_path):
    config = compose("ppo", ["logger.kind.tensorboard.enabled=True", "logger.use_console=False"])
    logger = logging_lib.Logger(config, str(tmp_path), "ppo", seeds=[42])
    feed(logger)
    logger.close()

    scalars = read_tensorboard(tmp_path / "tensorboard")
    train = {f"train/{name}" for name in ("episode_return", "steps_per_second", "actor_loss", "entropy")}
    evaluation = {f"{label}/{metric}_{statistic}" for label in ("eval", "absolute")
                  for metric in ("episode_return", "episode_length") for statistic in ("mean", "std", "min", "max")}
    assert train | evaluation <= set(scalars)
    assert scalars["train/actor_loss"] == [(100, 0.5), (200, -0.5)]
    assert scalars["eval/episode_return_mean"] == [(100, 25.0), (200, 25.5)]
    assert scalars["absolute/episode_return_max"] == [(200, 35.0)]


def test_each_seed_is_logged_apart(compose, tmp_path, capsys):
    config = compose("ppo", ["logger.kind.tensorboard.enabled=True"])
    logger = logging_lib.Logger(config, str(tmp_path), "ppo", seeds=[42, 43])
    feed(logger, seed=42)
    feed(logger, seed=43)
    logger.close()

    assert {"seed_42/train/episode_return", "seed_43/eval/episode_return_mean"} <= set(
        read_tensorboard(tmp_path / "tensorboard"))
    runs = json.loads((tmp_path / "metrics.json").read_text())["gymnax"]["CartPole-v1"]["ppo"]
    assert sorted(runs) == ["seed_42", "seed_43"]
    for run in runs.values():
        assert [run[f"step_{i}"]["step_count"] for i in range(2)] == [100, 200]
        assert run["absolute_metrics"]["episode_return"] == [25.0, 35.0]
    assert "[eval seed 43] step 200" in capsys.readouterr().out


def test_neptune_offline_writes_what_was_logged_and_never_the_token(compose, tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)  # offline mode writes ./.neptune/
    monkeypatch.setenv("NEPTUNE_API_TOKEN", TOKEN)
    config = compose("ppo", ["logger.kind.neptune.enabled=True", "logger.kind.neptune.mode=offline",
                             "logger.kind.neptune.tags=[test]"])
    logger = logging_lib.Logger(config, str(tmp_path / "run"), "ppo", seeds=[42])
    feed(logger)
    logger.close()

    operations = neptune_operations(tmp_path)
    series = {}
    for operation in operations:
        if operation["type"] == "LogFloats":
            series.setdefault("/".join(operation["path"]), []).extend(
                (value["step"], value["value"]) for value in operation["values"])
    assert series["train/actor_loss"] == [(100, 0.5), (200, -0.5)]
    assert series["eval/episode_return_mean"] == [(100, 25.0), (200, 25.5)]
    assert series["absolute/episode_return_mean"] == [(200, 30.0)]
    assigned = {"/".join(op["path"]): op.get("value") for op in operations if op["type"].startswith("Assign")}
    assert assigned["config/system/rollout_length"] == 125

    output = capfd.readouterr()
    written = [path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()]
    assert TOKEN not in output.out + output.err
    assert not any(TOKEN.encode() in content for content in written)


def test_neptune_async_without_a_token_is_a_clear_error_at_start(compose, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NEPTUNE_API_TOKEN", raising=False)
    config = compose("ppo", ["logger.kind.neptune.enabled=True", "logger.kind.neptune.project=team/project"])
    with pytest.raises(ConfigError, match="NEPTUNE_API_TOKEN"):
        logging_lib.Logger(config, str(tmp_path / "run"), "ppo", seeds=[42])
    with pytest.raises(ConfigError, match="mode='sometimes' must be one of"):
        logging_lib.Logger(compose("ppo", ["logger.kind.neptune.enabled=True", "logger.kind.neptune.mode=sometimes"]),
                           str(tmp_path / "run"), "ppo", seeds=[42])
    assert not (tmp_path / ".neptune").exists() and not (tmp_path / "run").exists()


def test_a_failing_logger_warns_once_and_training_goes_on(compose, tmp_path, monkeypatch, capsys):
    config = compose("ppo", ["logger.kind.tensorboard.enabled=True"])
    logger = logging_lib.Logger(config, str(tmp_path), "ppo", seeds=[42])

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(logging_lib.TensorBoardLogger, "scalars", disk_full)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        feed(logger)  # every sink call after the failure must be skipped, not raised
        logger.close()
    messages = [str(warning.message) for warning in caught]
    assert len([m for m in messages if "TensorBoardLogger failed" in m]) == 1
    assert "No space left on device" in messages[0] and "training goes on" in messages[0]
    # the other sinks kept working
    run = json.loads((tmp_path / "metrics.json").read_text())["gymnax"]["CartPole-v1"]["ppo"]["seed_42"]
    assert "absolute_metrics" in run
    assert "[absolute] step 200" in capsys.readouterr().out


def test_only_process_zero_logs(compose, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(logging_lib.parallel, "is_main_process", lambda: False)
    config = compose("ppo", ["logger.kind.tensorboard.enabled=True", "logger.kind.neptune.enabled=True",
                             "logger.kind.neptune.mode=offline"])
    logger = logging_lib.Logger(config, str(tmp_path / "run"), "ppo", seeds=[42])
    logger.message("not on process 1")
    feed(logger)
    logger.close()
    assert capsys.readouterr().out == ""
    assert list(tmp_path.iterdir()) == []


def wandb_records(run_dir: pathlib.Path) -> list:
    """The protobuf records of the offline W&B run under `run_dir` (its .wandb file is a LevelDB-style log:
    a 7-byte header, then 32 KiB blocks of records, each with a 7-byte header: crc, length, kind)."""
    from wandb.proto import wandb_internal_pb2

    (path,) = run_dir.glob("wandb/offline-run-*/run-*.wandb")
    data, block = path.read_bytes(), 32 * 1024
    assert data[:4] == b":W&B"
    records, offset, pending = [], 7, b""
    while offset + 7 <= len(data):
        if block - offset % block < 7:  # a block's tail too short for a header is padding
            offset += block - offset % block
            continue
        _, length, kind = struct.unpack("<IHB", data[offset:offset + 7])
        if (kind == 0 and length == 0) or offset + 7 + length > len(data):  # the end, or a record still being written
            break
        pending += data[offset + 7: offset + 7 + length]
        offset += 7 + length
        if kind in (1, 4):  # a whole record, or the last piece of one
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append(record)
            pending = b""
    return records


def test_wandb_offline_writes_the_same_metrics_as_tensorboard(compose, tmp_path, monkeypatch, capfd):
    pytest.importorskip("wandb", reason="the wandb extra: pip install -e '.[wandb]'")
    monkeypatch.setenv("WANDB_API_KEY", TOKEN)
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "elsewhere"))  # the run's own dir= must win
    config = compose("ppo", ["logger.kind.wandb.enabled=True", "logger.kind.wandb.mode=offline",
                             "logger.kind.wandb.project=stoix", "logger.kind.wandb.entity=team",
                             "logger.kind.tensorboard.enabled=True", "logger.use_console=False"])
    logger = logging_lib.Logger(config, str(tmp_path / "run"), "ppo", seeds=[42])
    feed(logger)
    logger.close()

    # wandb's service writes the file on its own: finish() can return before the last records reach the disk
    deadline = time.monotonic() + 60
    while True:
        records = wandb_records(tmp_path / "run")
        if any(record.WhichOneof("record_type") == "exit" for record in records) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    (run,) = [record.run for record in records if record.WhichOneof("record_type") == "run"]
    assert (run.project, run.entity) == ("stoix", "team")
    assert json.loads({item.key: item.value_json for item in run.config.update}["system"])["rollout_length"] == 125
    series: dict = {}
    for record in records:
        if record.WhichOneof("record_type") == "history":
            for item in record.history.item:
                name = item.key or "/".join(item.nested_key)
                if not name.startswith("_"):  # wandb's own: _step, _runtime, _timestamp
                    series.setdefault(name, []).append((record.history.step.num, json.loads(item.value_json)))
    tensorboard = read_tensorboard(tmp_path / "run" / "tensorboard")
    assert set(series) == set(tensorboard)
    for name, points in tensorboard.items():
        assert [step for step, _ in series[name]] == [step for step, _ in points], name
        assert [value for _, value in series[name]] == pytest.approx([value for _, value in points]), name

    output = capfd.readouterr()
    written = [path.read_bytes() for path in (tmp_path / "run").rglob("*") if path.is_file()]
    assert TOKEN not in output.out + output.err
    assert not any(TOKEN.encode() in content for content in written)


def test_wandb_refusals_are_one_line_before_any_work(compose, tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    online = compose("ppo", ["logger.kind.wandb.enabled=True", "logger.kind.wandb.mode=online"])
    monkeypatch.setitem(sys.modules, "wandb", None)  # as if the extra were not installed
    with pytest.raises(ConfigError, match=r'needs the wandb package: pip install -e "\.\[wandb\]"') as error:
        logging_lib.Logger(online, str(tmp_path / "run"), "ppo", seeds=[42])
    assert "\n" not in str(error.value)
    monkeypatch.delitem(sys.modules, "wandb")
    pytest.importorskip("wandb")
    with pytest.raises(ConfigError, match="WANDB_API_KEY"):
        logging_lib.Logger(online, str(tmp_path / "run"), "ppo", seeds=[42])
    assert not (tmp_path / "run").exists()
