"""Sweeps through the real Hydra entry: Optuna maximises what `run_experiment` returns, and the submitit
launcher runs a two-job sweep on this machine (the wiring a SLURM sweep uses).

Jobs are the tiny PPO run of tests/test_checkpointing.py with other seeds: one learner, compiled once per
session through the compilation cache.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import yaml
from conftest import run_python

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
