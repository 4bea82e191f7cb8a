"""Checkpoint and resume, for real: a run killed with SIGKILL and resumed ends exactly where an uninterrupted
run ends; corrupt and half-written checkpoints are skipped; incompatible ones are refused before any work;
saved params start a new run or are evaluated.

Every run is a tiny PPO on CartPole in its own interpreter (6 evaluations × 1 update × 8 steps × 4 envs), all
with the same learner, so the session's compilation cache compiles it once for all of them.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import threading
import time
from types import SimpleNamespace
from typing import Any, NamedTuple

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest
from conftest import REPO_ROOT, run_python
from omegaconf import OmegaConf

from stoix_like.learner import budget as budget_lib
from stoix_like import systems
from stoix_like.run import checkpointing
from stoix_like.errors import ConfigError
from stoix_like.systems.on_policy import ppo as ppo_system
from stoix_like.types import ActorCriticParams

SMALL_NETWORK = ["network.actor_network.pre_torso.layer_sizes=[16]",
                 "network.critic_network.pre_torso.layer_sizes=[16]"]
STEPS_PER_EVALUATION = 32  # 1 update × 8 steps × 4 envs
NUM_EVALUATION = 6
TOTAL = STEPS_PER_EVALUATION * NUM_EVALUATION
RUN = ["arch.total_num_envs=4", "system.rollout_length=8", "system.num_minibatches=2",
       f"arch.num_evaluation={NUM_EVALUATION}", "arch.num_eval_episodes=2", f"arch.total_timesteps={TOTAL}"
       ] + SMALL_NETWORK


def saving_to(directory: pathlib.Path, *more: str) -> list:
    return ["logger.checkpointing.save_model=True", f"logger.checkpointing.directory={directory}", *more]


def finalized_steps(directory: pathlib.Path) -> list:
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())


def learner_state_leaves(step_dir: pathlib.Path) -> list:
    return jax.tree_util.tree_leaves(ocp.PyTreeCheckpointer().restore(str(step_dir / "learner_state")))


def assert_identical(leaves, expected) -> None:
    assert len(leaves) == len(expected)
    for leaf, want in zip(leaves, expected):
        np.testing.assert_array_equal(leaf, want)


def eval_steps(stdout: str) -> list:
    return [int(line.split("step ")[1].split(" ")[0].replace(",", ""))
            for line in stdout.splitlines() if line.startswith("[eval]")]


def ppo(args, cwd, cache_dir, timeout: float = 600):
    return run_python(["-m", "experiments.ppo", *args], cwd=cwd, compilation_cache_dir=cache_dir, timeout=timeout)


def once_per_session(tmp_path_factory, name: str, make) -> pathlib.Path:
    """A directory that `make(directory)` fills once per test session, even under pytest-xdist.

    Each xdist worker has its own module fixtures; the first worker to claim the directory runs `make`,
    the others wait for it instead of computing the same thing on the same cores.
    """
    session_root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # workers' temp dirs sit side by side in the session's
        session_root = session_root.parent
    directory = session_root / name
    try:
        directory.mkdir()
    except FileExistsError:
        deadline = time.monotonic() + 900
        while not (directory / "DONE").exists():
            assert not (directory / "FAILED").exists(), (directory / "FAILED").read_text()
            assert time.monotonic() < deadline, f"{directory} was never made"
            time.sleep(0.5)
        return directory
    try:
        make(directory)
    except BaseException as error:
        (directory / "FAILED").write_text(f"making {directory} failed: {error!r}")
        raise
    (directory / "DONE").write_text("")
    return directory


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, compilation_cache_dir):
    """The reference: the same run, never interrupted, saving a checkpoint at each of its evaluations."""
    def make(root):
        result = ppo(RUN + saving_to(root / "checkpoints") + [f"hydra.run.dir={root / 'run'}"], root,
                     compilation_cache_dir)
        assert result.returncode == 0, result.stdout + result.stderr
        (root / "stdout.txt").write_text(result.stdout)

    root = once_per_session(tmp_path_factory, "uninterrupted", make)
    return SimpleNamespace(checkpoints=root / "checkpoints", run_dir=root / "run",
                           stdout=(root / "stdout.txt").read_text(),
                           final=learner_state_leaves(root / "checkpoints" / str(TOTAL)))


def test_checkpoints_keep_the_last_k_and_the_best_with_the_whole_run(uninterrupted):
    steps = finalized_steps(uninterrupted.checkpoints)
    run = json.loads((uninterrupted.run_dir / "metrics.json").read_text())["gymnax"]["CartPole-v1"]["ppo"]["seed_42"]
    returns = {entry["step_count"]: float(np.mean(entry["episode_return"]))
               for name, entry in run.items() if name.startswith("step_")}
    best = max(returns.values())
    best_step = max(step for step, value in returns.items() if value == best)  # ties: orbax keeps the latest
    assert set(steps) == {TOTAL - 2 * STEPS_PER_EVALUATION, TOTAL - STEPS_PER_EVALUATION, TOTAL, best_step}

    meta = json.loads((uninterrupted.checkpoints / str(TOTAL) / "meta" / "metadata").read_text())
    assert (meta["algorithm"], meta["steps_done"], meta["evaluations_done"]) == ("ppo", TOTAL, NUM_EVALUATION)
    assert meta["config"]["system"]["rollout_length"] == 8 and meta["config"]["arch"]["seed"] == 42
    assert meta["best_returns"] == [best]
    items = set(os.listdir(uninterrupted.checkpoints / str(TOTAL)))
    assert {"learner_state", "params", "eval_params", "best_params", "loop", "meta"} <= items


def test_a_killed_run_resumes_to_the_uninterrupted_parameters(uninterrupted, tmp_path, compilation_cache_dir):
    directory = tmp_path / "checkpoints"
    environment = dict(os.environ, PYTHONPATH=str(REPO_ROOT), JAX_COMPILATION_CACHE_DIR=str(compilation_cache_dir),
                       JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0", JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="-1")
    process = subprocess.Popen(
        [sys.executable, "-m", "experiments.ppo", *RUN, *saving_to(directory), f"hydra.run.dir={tmp_path / 'first'}"],
        cwd=tmp_path, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    watchdog = threading.Timer(600, process.kill)
    watchdog.start()
    output = []
    for line in process.stdout:  # SIGKILL as soon as the second checkpoint is reported: mid-training
        output.append(line)
        if line.startswith("checkpoint: ") and line.rstrip().endswith(f"/{2 * STEPS_PER_EVALUATION}"):
            process.send_signal(signal.SIGKILL)
            break
    process.wait()
    watchdog.cancel()
    assert process.returncode == -signal.SIGKILL, "".join(output)
    saved = finalized_steps(directory)
    assert 2 * STEPS_PER_EVALUATION in saved and max(saved) < TOTAL, saved
    last_checkpoint = max(saved)

    resumed = ppo(RUN + saving_to(directory, "logger.checkpointing.resume=True")
                  + [f"hydra.run.dir={tmp_path / 'second'}"], tmp_path, compilation_cache_dir)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    # it lost only the work since its last checkpoint, and did exactly the rest of the budget
    assert f"resumed from {directory / str(last_checkpoint)}" in resumed.stdout
    assert eval_steps(resumed.stdout) == list(range(last_checkpoint + STEPS_PER_EVALUATION, TOTAL + 1,
                                                    STEPS_PER_EVALUATION))
    run = json.loads((tmp_path / "second" / "metrics.json").read_text())["gymnax"]["CartPole-v1"]["ppo"]["seed_42"]
    assert [run[f"step_{i}"]["step_count"] for i in range(NUM_EVALUATION)] == list(
        range(STEPS_PER_EVALUATION, TOTAL + 1, STEPS_PER_EVALUATION))
    assert_identical(learner_state_leaves(directory / str(TOTAL)), uninterrupted.final)
    assert resumed.stdout.splitlines()[-2].split("absolute return")[1] == \
        uninterrupted.stdout.splitlines()[-2].split("absolute return")[1]


def test_corrupt_and_half_written_checkpoints_are_skipped(uninterrupted, tmp_path, compilation_cache_dir):
    directory = tmp_path / "checkpoints"
    shutil.copytree(uninterrupted.checkpoints, directory)
    for path in (directory / str(TOTAL) / "learner_state").rglob("*"):  # disk corruption in the newest step
        if path.is_file() and path.parent.name == "d":
            with open(path, "r+b") as file:
                file.truncate(8)
    (directory / f"{TOTAL + STEPS_PER_EVALUATION}.orbax-checkpoint-tmp-1" / "learner_state").mkdir(parents=True)
    previous = TOTAL - STEPS_PER_EVALUATION

    resumed = ppo(RUN + saving_to(directory, "logger.checkpointing.resume=True")
                  + [f"hydra.run.dir={tmp_path / 'run'}"], tmp_path, compilation_cache_dir)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"checkpoint {directory / str(TOTAL)} is unreadable" in resumed.stderr
    assert f"resumed from {directory / str(previous)}" in resumed.stdout
    assert_identical(learner_state_leaves(directory / str(TOTAL)), uninterrupted.final)
    set_aside = [p.name for p in directory.iterdir() if p.name.startswith(f"{TOTAL}.unreadable")]
    assert len(set_aside) == 1  # renamed out of the way, never deleted


def budget_of_the_saved_run():
    return budget_lib.exact_budget(total_timesteps=TOTAL, total_num_envs=4, n_devices=1, update_batch_size=1,
                                  rollout_length=8, num_evaluation=NUM_EVALUATION)


@pytest.mark.parametrize("algorithm, overrides, refusal", [
    ("dqn", [], "different algorithm: algorithm: 'ppo' in the checkpoint, 'dqn' here"),
    ("ppo", ["env=gymnax/acrobot"], "different env: env.scenario: 'CartPole-v1' in the checkpoint, 'Acrobot-v1'"),
    ("ppo", ["network.critic_network.pre_torso.layer_sizes=[32]"],
     r"different network: network.critic_network.pre_torso.layer_sizes: \[16\] in the checkpoint, \[32\] here"),
    ("ppo", ["arch.num_seeds=2"], r"holds seeds \[42\]; this run asks for \[42, 43\]"),
])
def test_an_incompatible_checkpoint_is_refused(uninterrupted, compose, algorithm, overrides, refusal):
    config = compose("ppo", RUN + overrides + [f"logger.checkpointing.resume_from={uninterrupted.checkpoints}"])
    seeds = [42 + k for k in range(int(config.arch.num_seeds))]
    with pytest.raises(ConfigError, match=refusal):
        checkpointing.Checkpoints(config, "unused", algorithm, budget_of_the_saved_run(),
                                  seeds)


def test_another_budget_is_refused(uninterrupted, compose):
    config = compose("ppo", RUN + [f"logger.checkpointing.resume_from={uninterrupted.checkpoints}"])
    longer = budget_lib.exact_budget(total_timesteps=2 * TOTAL, total_num_envs=4, n_devices=1, update_batch_size=1,
                                    rollout_length=8, num_evaluation=NUM_EVALUATION)
    with pytest.raises(ConfigError, match="different budget or layout: budget.total_timesteps"):
        checkpointing.Checkpoints(config, "unused", "ppo", longer, [42])


def test_refusal_is_one_line_before_any_work_and_touches_nothing(uninterrupted, tmp_path, compilation_cache_dir):
    def snapshot():
        return {str(p): p.stat().st_mtime_ns for p in uninterrupted.checkpoints.rglob("*")}

    before = snapshot()
    result = ppo(RUN + saving_to(uninterrupted.checkpoints) + [f"hydra.run.dir={tmp_path / 'run'}"], tmp_path,
                 compilation_cache_dir)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and result.stderr.startswith("error: ")
    assert "already holds checkpoints" in result.stderr and "resume=True" in result.stderr
    assert "compiled" not in result.stdout
    assert snapshot() == before


class LearnerState(NamedTuple):  # the fields load_params_from cares about: params, and everything else
    params: Any
    opt_states: Any


def live_state_like_the_saved_one(saved_params: Any, wider: bool = False) -> LearnerState:
    """A fresh learner state (1 device × 1 batch) shaped like the saved run's, or with a wider first layer."""
    def fresh(leaf):
        shape = tuple(leaf.shape[1:])  # saved params lead with the seed axis
        if wider and len(shape) == 2 and shape[1] == 16:
            shape = (shape[0], 32)
        return np.full((1, 1) + shape, -1.0, leaf.dtype)

    params = ActorCriticParams(*(jax.tree_util.tree_map(fresh, saved_params[name]) for name in ("actor", "critic")))
    return LearnerState(params=params, opt_states={"count": np.zeros((1, 1), np.int32)})


def test_load_params_from_starts_a_new_run_from_saved_params_only(uninterrupted):
    saved = ocp.PyTreeCheckpointer().restore(str(uninterrupted.checkpoints / str(TOTAL) / "params"))
    fresh = live_state_like_the_saved_one(saved)
    loaded = checkpointing.load_params(str(uninterrupted.checkpoints), None, fresh, num_seeds=1)
    for name in ("actor", "critic"):
        for leaf, want in zip(jax.tree_util.tree_leaves(getattr(loaded.params, name)),
                              jax.tree_util.tree_leaves(saved[name])):
            np.testing.assert_array_equal(leaf, want[0][None, None])  # every slot: the saved params
    assert loaded.opt_states is fresh.opt_states  # params only: everything else starts afresh

    wider = live_state_like_the_saved_one(saved, wider=True)
    refusal = r"do not fit this network: params\..* in the checkpoint, \[\[1, \d+, 32\], 'float32'\] here"
    with pytest.raises(ConfigError, match=refusal):
        checkpointing.load_params(str(uninterrupted.checkpoints), None, wider, num_seeds=1)


def test_evaluate_prints_return_statistics_of_a_saved_policy(uninterrupted, tmp_path, compilation_cache_dir):
    step = TOTAL - STEPS_PER_EVALUATION
    result = run_python(["-m", "experiments.evaluate", f"checkpoint={uninterrupted.checkpoints / str(step)}",
                         "params=latest", "num_episodes=2"], cwd=tmp_path, compilation_cache_dir=compilation_cache_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    header, line = result.stdout.strip().splitlines()[-2:]
    assert f"ppo on gymnax/CartPole-v1: checkpoint {uninterrupted.checkpoints / str(step)} ({step} steps)" in header
    assert "latest params, 2 episodes" in header
    mean = float(line.split("return ")[1].split(" ±")[0])
    assert line.startswith("[evaluate seed 42] return") and 1.0 <= mean <= 500.0 and "median" in line


def test_a_checkpoint_names_its_system_not_a_module_path(uninterrupted, monkeypatch):
    """Moving or renaming a system module never strands a saved run: the checkpoint names its registry entry."""
    from stoix_like.run.evaluate_saved import setup_of

    saved = checkpointing.read_saved_run(str(uninterrupted.checkpoints))
    assert saved.meta["format_version"] == checkpointing.FORMAT_VERSION and saved.meta["algorithm"] == "ppo"
    assert not any("stoix_like.systems" in str(value) for value in saved.meta.values() if not isinstance(value, dict))
    # the module moves: the registry follows it, and the saved run finds it there
    monkeypatch.setitem(sys.modules, "stoix_like.systems.moved_ppo", ppo_system)
    monkeypatch.setitem(systems.MODULE_OF, "ppo", "moved_ppo")
    assert setup_of(saved) is ppo_system.learner_setup
    # a version-1 checkpoint recorded a module path, which may no longer exist: it is read the same way
    version_1 = checkpointing.SavedRun(saved.root, saved.step, {**saved.meta, "format_version": 1,
                                                                "system_module": "stoix_like.systems.gone"})
    assert setup_of(version_1) is ppo_system.learner_setup
    unknown = checkpointing.SavedRun(saved.root, saved.step, {**saved.meta, "algorithm": "my_own_ppo"})
    with pytest.raises(ConfigError, match="algorithm 'my_own_ppo', which this code does not know"):
        setup_of(unknown)


def test_a_checkpoint_saved_in_the_old_vocabulary_reads_in_todays(uninterrupted):
    """Version-2 checkpoints stored the config in the names used before docs/glossary.md (PPO's had no
    system_name and no env.max_episode_steps): read today, the config and what identifies the run are upgraded,
    so such a run still resumes and evaluates."""
    import copy

    saved = checkpointing.read_saved_run(str(uninterrupted.checkpoints))
    today = saved.config
    old_meta = copy.deepcopy(saved.meta)
    old_meta["format_version"] = 2
    del old_meta["config"]["system"]["system_name"], old_meta["config"]["env"]["max_episode_steps"]
    del old_meta["env"]["max_episode_steps"]
    old = checkpointing.SavedRun(saved.root, saved.step, old_meta)
    assert old.config.system.system_name == "ppo" and old.config.env.max_episode_steps is None
    assert checkpointing.saved_description(old_meta) == checkpointing.describe_run(today, "ppo")
    assert checkpointing.saved_description(saved.meta) == checkpointing.describe_run(today, "ppo")


def test_a_checkpoint_saved_before_arch_rollout_unroll_reads_with_the_loop_it_ran(uninterrupted):
    """Version-3 checkpoints written before the key existed lack arch.rollout_unroll: read today they get 1, the
    acting loop that wrote them, and the rest of the config is untouched."""
    import copy

    saved = checkpointing.read_saved_run(str(uninterrupted.checkpoints))
    before_the_key = copy.deepcopy(saved.meta)
    del before_the_key["config"]["arch"]["rollout_unroll"]
    read = checkpointing.SavedRun(saved.root, saved.step, before_the_key).config
    assert read.arch.rollout_unroll == 1
    assert OmegaConf.to_container(read) == OmegaConf.to_container(saved.config)
    assert "rollout_unroll" not in before_the_key["config"]["arch"]  # reading changed nothing in the metadata


@pytest.mark.parametrize("overrides, refusal", [
    (["logger.checkpointing.resume=True"], "resume=True needs logger.checkpointing.directory"),
    (["logger.checkpointing.resume=True", "logger.checkpointing.directory=/tmp", "logger.checkpointing.resume_from=/x"],
     "Pass one of them"),
    (["logger.checkpointing.resume_from=/no/such/checkpoint"], "no checkpoint at /no/such/checkpoint"),
    (["logger.checkpointing.keep_last=0"], "keep_last=0 must be at least 1"),
])
def test_contradictory_checkpoint_settings_are_refused(compose, overrides, refusal):
    with pytest.raises(ConfigError, match=refusal):
        checkpointing.Checkpoints(compose("ppo", RUN + overrides), "unused", "ppo", budget_of_the_saved_run(), [42])


def test_resuming_an_older_step_into_its_own_directory_is_refused(uninterrupted, compose):
    older = uninterrupted.checkpoints / str(TOTAL - STEPS_PER_EVALUATION)
    config = compose("ppo", RUN + saving_to(uninterrupted.checkpoints, f"logger.checkpointing.resume_from={older}"))
    with pytest.raises(ConfigError, match=f"would overwrite its later steps \\({TOTAL}\\)"):
        checkpointing.Checkpoints(config, "unused", "ppo", budget_of_the_saved_run(), [42])
