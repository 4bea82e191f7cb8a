"""`python -m experiments.ppo ...` through the real Hydra entry, in a subprocess, as a user runs it.

Budgets are tiny (a couple of updates of a few steps): these check the wiring from the command line to the
run directory on every suite, and how bad command lines fail, not learning. Subprocesses share one jax
compilation cache, so the CartPole learner compiled by one test is reused by the multirun test.
"""

from __future__ import annotations

import json
import pathlib
import re

import pytest
import yaml
from conftest import unoptimized_xla

SMALL_NETWORK = ["network.actor_network.pre_torso.layer_sizes=[16]",
                 "network.critic_network.pre_torso.layer_sizes=[16]"]
# 2 evaluations × 1 update × 8 steps × 4 envs = 64 steps; 2 minibatches of 16 transitions
TINY = ["arch.total_num_envs=4", "system.rollout_length=8", "system.num_minibatches=2", "arch.num_evaluation=2",
        "arch.num_eval_episodes=2", "arch.total_timesteps=64"] + SMALL_NETWORK
TINY_CARTPOLE = ["env=gymnax/cartpole"] + TINY

RUNS = {
    "gymnax/cartpole": (TINY_CARTPOLE, ("gymnax", "CartPole-v1")),
    "gymnax/pendulum": (["env=gymnax/pendulum"] + TINY, ("gymnax", "Pendulum-v1")),
    "jumanji/snake": (["env=jumanji/snake"] + TINY, ("jumanji", "Snake-v1")),
    # 2 evaluations × 1 update × 4 steps × 2 envs = 16 steps, 10-step episodes
    "brax/ant": (["env=brax/ant", "env.max_episode_steps=10", "arch.total_num_envs=2",
                  "system.rollout_length=4", "system.num_minibatches=2", "arch.num_evaluation=2",
                  "arch.num_eval_episodes=2", "arch.total_timesteps=16"] + SMALL_NETWORK, ("brax", "ant")),
}


@pytest.fixture
def run_ppo(python_subprocess, tmp_path):
    """`run_ppo(*command_line, env=None)`: `python -m experiments.ppo ...` in a fresh directory (Hydra writes
    there), with `env` added to the subprocess's environment."""

    def _run(*command_line: str, env=None):
        return python_subprocess(["-m", "experiments.ppo", *command_line], cwd=tmp_path, env=env)

    return _run


def override_value(overrides, key: str) -> int:
    return int(next(item.split("=", 1)[1] for item in overrides if item.startswith(key + "=")))


def logs_dirs(stdout: str) -> list[pathlib.Path]:
    return [pathlib.Path(match) for match in re.findall(r"^logs: (.+)$", stdout, flags=re.MULTILINE)]


def check_marl_eval_metrics(run_dir: pathlib.Path, suite: str, task: str, seed: int, overrides) -> None:
    """metrics.json: env → task → algorithm → seed_k → step_i → {step_count, metric: [per episode]}."""
    total_timesteps = override_value(overrides, "arch.total_timesteps")
    num_evaluation = override_value(overrides, "arch.num_evaluation")
    num_eval_episodes = override_value(overrides, "arch.num_eval_episodes")
    data = json.loads((run_dir / "metrics.json").read_text())
    assert list(data) == [suite] and list(data[suite]) == [task] and list(data[suite][task]) == ["ppo"]
    assert list(data[suite][task]["ppo"]) == [f"seed_{seed}"]
    run = data[suite][task]["ppo"][f"seed_{seed}"]
    assert set(run) == {f"step_{i}" for i in range(num_evaluation)} | {"absolute_metrics"}
    step_counts = [run[f"step_{i}"]["step_count"] for i in range(num_evaluation)]
    assert step_counts == [total_timesteps * (i + 1) // num_evaluation for i in range(num_evaluation)]
    for i in range(num_evaluation):
        assert len(run[f"step_{i}"]["episode_return"]) == num_eval_episodes
        assert len(run[f"step_{i}"]["episode_length"]) == num_eval_episodes
    absolute = run["absolute_metrics"]["episode_return"]
    assert len(absolute) == 10 * num_eval_episodes  # shared.ABSOLUTE_METRIC_EPISODE_FACTOR
    assert all(isinstance(value, float) for value in absolute)
    # the final params' return beside it, over as many episodes: what a user keeps, judged as the best params are
    final = run["absolute_metrics"]["final_episode_return"]
    assert len(final) == len(absolute) and all(isinstance(value, float) for value in final)
    assert set(run["absolute_metrics"]) == {"episode_return", "episode_length", "final_episode_return",
                                            "final_episode_length"}


@pytest.mark.parametrize("env_name", [
    # brax on CPU: ~70 CPU-seconds, mostly compiling its physics step (in the learner and both evaluators)
    pytest.param(name, marks=pytest.mark.slow) if name.startswith("brax/") else name for name in RUNS])
def test_ppo_runs_end_to_end(run_ppo, env_name):
    overrides, (suite, task) = RUNS[env_name]
    completed = run_ppo(*overrides, env=unoptimized_xla() if suite == "brax" else None)
    assert completed.returncode == 0, completed.stderr[-3000:]
    total_timesteps = override_value(overrides, "arch.total_timesteps")
    assert re.search(rf"^done: {total_timesteps:,} steps \|", completed.stdout, flags=re.MULTILINE), completed.stdout
    (run_dir,) = logs_dirs(completed.stdout)
    check_marl_eval_metrics(run_dir, suite, task, seed=42, overrides=overrides)


def test_multirun_writes_one_directory_per_job(run_ppo):
    completed = run_ppo("-m", "arch.seed=0,1", *TINY_CARTPOLE)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert len(re.findall(r"^done: 64 steps", completed.stdout, flags=re.MULTILINE)) == 2
    run_dirs = logs_dirs(completed.stdout)
    assert len(run_dirs) == 2 and run_dirs[0] != run_dirs[1]
    for seed, run_dir in enumerate(run_dirs):
        assert run_dir.name == f"{seed}_seed{seed}"  # hydra.sweep.subdir in config/hydra_settings.yaml
        check_marl_eval_metrics(run_dir, "gymnax", "CartPole-v1", seed=seed, overrides=TINY_CARTPOLE)
        # the console lines are in the job's own log, the file Hydra opens for it
        assert re.search(r"^done: 64 steps \|", (run_dir / "ppo.log").read_text(), flags=re.MULTILINE)
    # a report reads the sweep as one group: the jobs differ only in their seeds
    from stoix_like.report import runs

    (group,) = runs.group_runs(runs.load_runs([str(run_dirs[0].parent)]))
    assert (group.label, group.env, group.seed_numbers) == ("ppo", "gymnax/CartPole-v1", [0, 1])


# ------------------------------------------------------------------------------------- bad command lines

def test_misspelt_key_fails_naming_the_key(run_ppo):
    completed = run_ppo("system.actorlr=1")
    assert completed.returncode != 0
    assert "system.actorlr" in completed.stderr.strip().splitlines()[0]
    assert "Traceback" not in completed.stderr
    assert "done:" not in completed.stdout


def test_misspelt_key_is_reported_in_one_line(run_ppo):
    completed = run_ppo("system.actorlr=1")
    assert completed.returncode == 2
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1, completed.stderr
    assert "system.actorlr" in lines[0] and "did you mean system.actor_lr" in lines[0]


def test_unknown_env_fails_naming_it(run_ppo):
    completed = run_ppo("env=gymnax/nope")
    assert completed.returncode != 0
    assert "unknown env 'gymnax/nope'" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_unknown_env_lists_the_available_envs(run_ppo):
    completed = run_ppo("env=gymnax/nope")
    assert completed.returncode == 2
    assert "gymnax/cartpole" in completed.stderr and "brax/ant" in completed.stderr, completed.stderr


def test_bad_budget_exits_2_naming_the_nearest_budgets(run_ppo):
    completed = run_ppo("arch.total_timesteps=12345")
    assert completed.returncode == 2, completed.stderr[-3000:]
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: arch.total_timesteps=12345")
    # the default takes 10 evaluations × 125 steps × 4 envs = 5,000 steps per update round
    assert "nearest budgets that work: 10000, 15000" in lines[0]
    assert "compiled" not in completed.stdout  # refused before any compilation


def test_cfg_job_prints_the_composed_config(run_ppo, tmp_path):
    completed = run_ppo("--cfg", "job", "env=gymnax/pendulum", "arch.total_timesteps=1234")
    assert completed.returncode == 0, completed.stderr[-3000:]
    config = yaml.safe_load(completed.stdout)
    assert config["arch"]["total_timesteps"] == 1234  # printed as composed, not validated
    assert config["env"]["scenario"]["name"] == "Pendulum-v1"
    assert config["system"]["rollout_length"] > 0 and "actor_network" in config["network"]
    assert "hydra" not in config
    assert not (tmp_path / "outputs").exists()  # nothing ran



def cached_programs(directory: pathlib.Path) -> set[str]:
    """The compiled programs in a jax compilation cache directory (jax keeps an access-time file beside each)."""
    return {path.name for path in directory.glob("*-cache")} if directory.exists() else set()


def test_a_command_line_run_keeps_its_compiled_programs_for_the_next_one(tmp_path):
    """The persistent compilation cache is on by default for command-line runs: the first run writes every program
    it compiles, and a second identical run compiles nothing new (every program loads) and ends exactly as the
    first."""
    from conftest import run_python

    def run(cache: pathlib.Path) -> str:
        # no cache the user configured (it would take precedence): the default one, in `cache`
        environment = {"STOIX_LIKE_CACHE_DIR": str(cache), "JAX_COMPILATION_CACHE_DIR": ""}
        process = run_python(["-m", "experiments.ppo", *TINY_CARTPOLE], cwd=tmp_path, env=environment)
        assert process.returncode == 0, process.stderr[-2000:]
        return re.search(r"\| best eval return .*$", process.stdout, flags=re.MULTILINE).group(0)

    cache = tmp_path / "cache"
    first_returns = run(cache)
    written = cached_programs(cache)
    # the learner and the evaluator (two `_fun`s), the network init and the initial state
    assert {"jit__fun", "jit_init", "jit__initial_learner_state"} <= {name.rsplit("-", 2)[0] for name in written}, written
    assert len([name for name in written if name.startswith("jit__fun-")]) == 2, written
    assert run(cache) == first_returns  # the same programs: the same returns, to the last digit
    assert cached_programs(cache) == written  # nothing compiled afresh: every program was loaded


def test_the_compilation_cache_switch_leaves_jax_alone_when_off_and_defers_to_the_user_s(tmp_path):
    """`arch.compilation_cache=False` configures no cache; a cache the user set is kept whatever the switch says."""
    from conftest import run_python

    script = ("import sys; from stoix_like.runtime import compilation_cache as c; import jax; "
              "print(c.use_user_cache(sys.argv[1] == 'on'), jax.config.jax_compilation_cache_dir or None)")
    default_directory = tmp_path / "default"
    environment = {"STOIX_LIKE_CACHE_DIR": str(default_directory), "JAX_COMPILATION_CACHE_DIR": ""}
    off = run_python(["-c", script, "off"], cwd=tmp_path, env=environment)
    assert off.stdout.split() == ["None", "None"], off.stderr[-2000:]
    assert not default_directory.exists()
    on = run_python(["-c", script, "on"], cwd=tmp_path, env=environment)
    assert on.stdout.split() == [str(default_directory)] * 2, on.stderr[-2000:]
    users = str(tmp_path / "users")
    kept = run_python(["-c", script, "off"], cwd=tmp_path, env={**environment, "JAX_COMPILATION_CACHE_DIR": users})
    assert kept.stdout.split() == [users] * 2, kept.stderr[-2000:]


def test_a_run_with_the_cache_off_sets_up_without_a_persistent_cache(tmp_path):
    """`arch.compilation_cache=False` keeps the setup's process-private cache off too: nothing is written."""
    from conftest import run_python

    script = ("import os, sys, jax; from stoix_like.runtime import compilation_cache as c\n"
              "with c.setup_programs_cached(sys.argv[1] == 'on'):\n"
              "    jax.jit(lambda x: x * 3.0)(1.0)\n"
              "d = c._private_directory\n"
              "print(d, jax.config.jax_compilation_cache_dir or None, len(os.listdir(d)) if d else 0)")
    environment = {"JAX_COMPILATION_CACHE_DIR": ""}
    off = run_python(["-c", script, "off"], cwd=tmp_path, env=environment)
    assert off.stdout.split() == ["None", "None", "0"], off.stderr[-2000:]
    on = run_python(["-c", script, "on"], cwd=tmp_path, env=environment)  # the same program, cached
    private, configured, written = on.stdout.split()
    assert private == configured != "None" and int(written) > 0, on.stdout + on.stderr[-2000:]
