"""Sweeps through the real Hydra entry: Optuna maximises what `run_experiment` returns, in memory or in an SQLite
study that two concurrent jobs share and a later sweep resumes; the submitit launcher runs a two-job sweep on this
machine (the wiring a SLURM sweep uses), and the Ray launcher one on a local Ray.

Jobs are the tiny PPO run of tests/test_checkpointing.py with other seeds: one learner, compiled once per
session through the compilation cache.
"""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import yaml
from conftest import REPO_ROOT, run_python

SMALL_NETWORK = ["network.actor_network.pre_torso.layer_sizes=[16]",
                 "network.critic_network.pre_torso.layer_sizes=[16]"]
RUN = ["arch.total_num_envs=4", "system.rollout_length=8", "system.num_minibatches=2", "arch.num_evaluation=6",
       "arch.num_eval_episodes=2", "arch.total_timesteps=192"] + SMALL_NETWORK


def absolute_return(job_dir: pathlib.Path, seed: int) -> float:
    """What the job's run_experiment returned: the mean of its absolute-metric episodes."""
    runs = json.loads((job_dir / "metrics.json").read_text())["gymnax"]["CartPole-v1"]["ppo"]
    return float(np.mean(runs[f"seed_{seed}"]["absolute_metrics"]["episode_return"]))


def test_optuna_sweep_maximises_the_returned_value(tmp_path, compilation_cache_dir):
    sweep_dir = tmp_path / "sweep"
    result = run_python(["-m", "experiments.ppo", "-m", "hydra/sweeper=optuna", "hydra.sweeper.n_trials=2",
                         "hydra.sweeper.sampler.seed=0", "arch.seed=choice(1, 2)", f"hydra.sweep.dir={sweep_dir}",
                         *RUN], cwd=tmp_path, compilation_cache_dir=compilation_cache_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Directions: ['maximize']" in result.stdout + result.stderr
    jobs = sorted(path for path in sweep_dir.iterdir() if path.is_dir() and "_seed" in path.name)
    returns = {int(job.name.split("_seed")[1]): absolute_return(job, int(job.name.split("_seed")[1])) for job in jobs}
    assert sorted(returns) == [1, 2]  # (the sampler's seed makes the two trials differ)
    results = yaml.safe_load((sweep_dir / "optimization_results.yaml").read_text())
    best_seed = max(returns, key=returns.get)
    assert results["best_value"] == max(returns.values())
    assert results["best_params"] == {"arch.seed": best_seed}


def test_submitit_local_launcher_runs_a_two_job_sweep(tmp_path, compilation_cache_dir):
    sweep_dir = tmp_path / "sweep"
    result = run_python(["-m", "experiments.ppo", "-m", "hydra/launcher=submitit_local", "arch.seed=3,4",
                         f"hydra.sweep.dir={sweep_dir}", *RUN], cwd=tmp_path,
                        compilation_cache_dir=compilation_cache_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    for number, seed in enumerate((3, 4)):
        job_dir = sweep_dir / f"{number}_seed{seed}"
        assert np.isfinite(absolute_return(job_dir, seed))
    job_logs = sorted((sweep_dir / ".submitit").rglob("*_log.out"))
    assert len(job_logs) == 2  # each job ran in its own submitit process
    for log in job_logs:
        assert "done: 192 steps" in log.read_text()


# A study that outlives its process (hydra_plugins/stoix_like_plugins/optuna_study.py): SQLite, shared, resumed.

def _sqlite_sweep(sweep_dir: pathlib.Path, database: pathlib.Path, *extra: str) -> list:
    return ["-m", "experiments.ppo", "-m", "hydra/sweeper=optuna", f"hydra.sweeper.storage=sqlite:///{database}",
            "hydra.sweeper.study_name=shared", "hydra.sweeper.n_trials=2", "arch.seed=int(interval(1, 1000))",
            f"hydra.sweep.dir={sweep_dir}", *extra, *RUN]


def _job_objectives(*sweep_dirs: pathlib.Path) -> list:
    """What each job returned: its one seed's absolute-metric return (the IQM of a one-seed population)."""
    return sorted(absolute_return(job, int(job.name.split("_seed")[1]))
                  for sweep_dir in sweep_dirs for job in sweep_dir.iterdir() if job.is_dir() and "_seed" in job.name)


def test_two_concurrent_jobs_share_one_sqlite_study(tmp_path, compilation_cache_dir):
    import optuna

    database = tmp_path / "study.db"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
               JAX_COMPILATION_CACHE_DIR=str(compilation_cache_dir), JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
               JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="-1")
    jobs = [subprocess.Popen([sys.executable, *_sqlite_sweep(tmp_path / f"job{j}", database,
                                                             f"hydra.sweeper.sampler.seed={j}")],
                             cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for j in range(2)]
    outputs = [job.communicate(timeout=600)[0] for job in jobs]
    assert [job.returncode for job in jobs] == [0, 0], "\n".join(outputs)
    study = optuna.load_study(study_name="shared", storage=f"sqlite:///{database}")
    complete = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    assert len(study.trials) == len(complete) == 4
    assert sorted(trial.value for trial in complete) == _job_objectives(tmp_path / "job0", tmp_path / "job1")


def test_a_resumed_study_fails_the_trial_whose_process_died(tmp_path, compilation_cache_dir):
    import optuna

    database = tmp_path / "study.db"
    # a sweep killed mid-trial: its trial RUNNING in the database, its last heartbeat a few seconds old
    storage = optuna.storages.RDBStorage(f"sqlite:///{database}", heartbeat_interval=1)
    study = optuna.create_study(study_name="shared", storage=storage, direction="maximize")
    orphan = study.ask()
    storage.record_heartbeat(orphan._trial_id)
    time.sleep(3.5)  # past the grace period, twice the heartbeat interval
    result = run_python(_sqlite_sweep(tmp_path / "sweep", database, "hydra.sweeper.n_trials=1",
                                      "hydra.sweeper.heartbeat_interval=1"),
                        cwd=tmp_path, compilation_cache_dir=compilation_cache_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "trials [0] had no heartbeat" in result.stderr
    states = [trial.state for trial in optuna.load_study(study_name="shared", storage=f"sqlite:///{database}").trials]
    assert states == [optuna.trial.TrialState.FAIL, optuna.trial.TrialState.COMPLETE]


def test_a_storage_that_is_not_a_database_is_refused_in_one_line(tmp_path):
    result = run_python(["-m", "experiments.ppo", "-m", "hydra/sweeper=optuna",
                         f"hydra.sweeper.storage=journal:///{tmp_path}/study.log", "hydra.sweeper.study_name=s",
                         "arch.seed=1,2"], cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.strip().startswith("error: hydra.sweeper.storage=") and "journal" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (tmp_path / "multirun").exists()


# The Ray launcher (hydra_plugins/stoix_like_plugins/ray_launcher.py). CI installs the `ray` extra (.ci/run).

def test_ray_launcher_runs_a_sweep_on_a_local_ray_and_reports_a_failed_job(tmp_path, compilation_cache_dir):
    pytest.importorskip("ray")
    # job 1's clip_eps passes Hydra's composition and is refused inside the job (validation: exit 2 there)
    result = run_python(["-m", "experiments.ppo", "-m", "hydra/launcher=ray", "hydra.launcher.ray.init.num_cpus=2",
                         "+hydra.launcher.ray.init.object_store_memory=78643200", "arch.seed=3",
                         "system.clip_eps=0.2,-1", *RUN], cwd=tmp_path, compilation_cache_dir=compilation_cache_dir)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "job #1 (arch.seed=3 system.clip_eps=-1 " in output
    assert ") failed: RuntimeError: the job exited with code 2" in output
    sweeps = list((tmp_path / "multirun" / "ppo").iterdir())  # the basic launcher's layout: multirun/<algo>/<time>/
    assert len(sweeps) == 1
    assert sorted(path.name for path in sweeps[0].iterdir() if path.is_dir()) == ["0_seed3", "1_seed3"]
    assert np.isfinite(absolute_return(sweeps[0] / "0_seed3", 3))  # the other job finished
    for job in ("0_seed3", "1_seed3"):
        assert (sweeps[0] / job / ".hydra" / "overrides.yaml").exists()
    assert not (sweeps[0] / "1_seed3" / "metrics.json").exists()


def test_a_ray_address_that_does_not_answer_is_refused_in_one_line(tmp_path):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    result = run_python(["-m", "experiments.ppo", "-m", "hydra/launcher=ray",
                         f"hydra.launcher.ray.init.address=127.0.0.1:{port}", "hydra.launcher.connect_timeout=2",
                         "arch.seed=1,2"], cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.strip().startswith(f"error: hydra.launcher.ray.init.address=127.0.0.1:{port}: no Ray")
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert time.monotonic() - started < 60
