"""arch=sebulba: PPO's actor threads on one forced CPU device, its learner on another; the exact budget, the logged
policy lag and steps/s, checkpoints, and a failing actor that ends the run with its error and leaves no thread.

The device count must be fixed before jax is imported, so the runs happen in a fresh interpreter (one per script).
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from conftest import REPO_ROOT, compose_config, run_python
from stoix_like.config import validation

TWO_CPU_DEVICES = {"XLA_FLAGS": "--xla_force_host_platform_device_count=2", "JAX_PLATFORMS": "cpu"}
# 2 evaluations × 8 updates × 32 steps × 4 envs = 2,048 steps; small networks compile fast
SMALL = ["arch=sebulba", "env=gymnasium/cartpole", "arch.total_num_envs=4", "system.rollout_length=32",
         "arch.total_timesteps=2048", "arch.num_evaluation=2", "arch.num_eval_episodes=3", "system.num_minibatches=2",
         "arch.actor_device_ids=[0]", "arch.learner_device_ids=[1]", "arch.num_actor_threads=2",
         "network.actor_network.pre_torso.layer_sizes=[16]", "network.critic_network.pre_torso.layer_sizes=[16]"]

SMOKE = r'''
import json, sys, threading
import jax, numpy as np
sys.path.insert(0, sys.argv[2])
from conftest import compose_config
from stoix_like.run.sebulba import loop
from stoix_like.systems.on_policy import ppo

assert jax.device_count() == 2, jax.devices()
overrides = json.loads(sys.argv[3])
saving = ["logger.checkpointing.save_model=True", "logger.checkpointing.directory=" + sys.argv[1] + "/checkpoints"]
config = compose_config("ppo", overrides + saving, base_exp_path=sys.argv[1] + "/first")
result = loop.run(config, ppo.sebulba_setup, "ppo")
params_devices = {d.id for leaf in jax.tree_util.tree_leaves(result.learner_state.params) for d in leaf.devices()}
threads_after_first = [t.name for t in threading.enumerate()]
# Resume from the first evaluation's checkpoint (the last one set aside): the actors restart from the restored
# params, and the run learns the second half of the budget only.
import pathlib, shutil
steps = sorted(int(p.name) for p in pathlib.Path(sys.argv[1], "checkpoints").iterdir() if p.name.isdigit())
assert steps == [1024, 2048], steps
shutil.move(str(pathlib.Path(sys.argv[1], "checkpoints", "2048")), sys.argv[1] + "/set_aside")
config = compose_config("ppo", overrides + ["logger.checkpointing.resume=True",
                                            "logger.checkpointing.directory=" + sys.argv[1] + "/checkpoints"],
                        base_exp_path=sys.argv[1] + "/resumed")
resumed = loop.run(config, ppo.sebulba_setup, "ppo")
print(json.dumps({"steps_done": result.steps_done, "learned_steps": result.learned_steps,
                  "absolute": result.absolute_return, "params_devices": sorted(params_devices),
                  "threads": threads_after_first, "resumed_steps_done": resumed.steps_done,
                  "resumed_learned_steps": resumed.learned_steps,
                  "threads_after_resume": [t.name for t in threading.enumerate()]}))
'''


def _run_script(tmp_path: pathlib.Path, script: str, *args: str) -> subprocess.CompletedProcess:
    path = tmp_path / "script.py"
    path.write_text(script)
    return run_python([str(path), str(tmp_path), str(REPO_ROOT / "tests"), *args], cwd=tmp_path,
                      env=TWO_CPU_DEVICES, timeout=300)


def _last_json(stdout: str) -> dict:
    return json.loads([line for line in stdout.splitlines() if line.startswith("{")][-1])


def test_sebulba_ppo_runs_the_exact_budget_on_its_learner_device(tmp_path):
    completed = _run_script(tmp_path, SMOKE, json.dumps(SMALL))
    assert completed.returncode == 0, completed.stderr[-3000:]
    result = _last_json(completed.stdout)
    assert result["steps_done"] == 2048
    assert result["learned_steps"] == 2048  # counted from the rollouts the learner received, not from arithmetic
    assert result["params_devices"] == [1]  # the learner's state lives on arch.learner_device_ids only
    assert result["threads"] == ["MainThread"]
    assert (result["resumed_steps_done"], result["resumed_learned_steps"]) == (2048, 1024)
    assert result["threads_after_resume"] == ["MainThread"]
    resumed_log = "\n".join(path.read_text() for path in (tmp_path / "resumed").rglob("ppo.log"))
    assert "resumed from" in resumed_log
    log = "\n".join(path.read_text() for path in (tmp_path / "first").rglob("ppo.log"))
    for measured in ("policy_lag_mean", "policy_lag_max", "actor_steps_per_second", "learner_steps_per_second"):
        assert measured in log, measured
    assert "[absolute]" in log
    # exactly arch.num_eval_episodes episodes per evaluation (3), and 10× that for the absolute metric
    metrics = json.loads(next((tmp_path / "first").rglob("metrics.json")).read_text())
    per_seed = metrics["gymnasium"]["CartPole-v1"]["ppo"]["seed_42"]
    assert [len(per_seed[f"step_{k}"]["episode_return"]) for k in range(2)] == [3, 3]
    assert len(per_seed["absolute_metrics"]["episode_return"]) == 30


FAILING = r'''
import json, sys, threading, time
import gymnasium
sys.path.insert(0, sys.argv[2])
from conftest import compose_config
from stoix_like.run.sebulba import loop
from stoix_like.systems.on_policy import ppo

CLOSED = []

from gymnasium.envs.classic_control.cartpole import CartPoleEnv

class FailingCartPole(CartPoleEnv):
    """CartPole whose step raises once the actors have taken a few hundred steps (mid-run, mid-rollout)."""
    steps = 0
    def step(self, action):
        FailingCartPole.steps += 1
        if FailingCartPole.steps == 300:
            raise RuntimeError("injected actor failure")
        return super().step(action)
    def close(self):
        CLOSED.append(id(self))
        super().close()

gymnasium.register("FailingCartPole-v0", entry_point=FailingCartPole, max_episode_steps=500)
config = compose_config("ppo", json.loads(sys.argv[3]) + ["env.scenario.name=FailingCartPole-v0"],
                        base_exp_path=sys.argv[1])
start = time.perf_counter()
try:
    loop.run(config, ppo.sebulba_setup, "ppo")
    outcome = "no error"
except RuntimeError as error:
    outcome = str(error) + " | " + " ".join(getattr(error, "__notes__", []))
print(json.dumps({"outcome": outcome, "seconds_after_failure": time.perf_counter() - start,
                  "threads": [t.name for t in threading.enumerate()], "closed": len(CLOSED),
                  "steps": FailingCartPole.steps}))
'''


def test_a_failing_actor_ends_the_run_with_its_error_and_no_thread_left(tmp_path):
    # a budget far beyond the failure, so only the failure can end the run
    overrides = [o for o in SMALL if not o.startswith("arch.total_timesteps")] + ["arch.total_timesteps=204800"]
    completed = _run_script(tmp_path, FAILING, json.dumps(overrides))
    assert completed.returncode == 0, completed.stderr[-3000:]
    result = _last_json(completed.stdout)
    assert result["outcome"].startswith("injected actor failure"), result
    assert "raised in Sebulba thread 'actor-" in result["outcome"]
    assert result["threads"] == ["MainThread"]
    # every env closed: 2 actor threads × 2 envs and 3 eval envs
    assert result["closed"] == 2 * 2 + 3
    # the other thread stopped too: it did not go on stepping its envs long after the failure
    assert result["steps"] < 300 + 2 * 32 * 2 * 4


@pytest.mark.parametrize("overrides, expected", [
    (["arch.num_actor_threads=3"], "arch.total_num_envs=4 must split evenly over 3 actor threads"),
    (["arch.learner_device_ids=[0,0]"], "names a device twice"),
    (["arch.num_seeds=2"], "arch=sebulba trains one seed per run"),
    (["env=gymnax/cartpole"], "arch=sebulba steps CPU envs"),
])
def test_bad_sebulba_configs_are_refused_in_one_line(overrides, expected):
    config = compose_config("ppo", ["arch=sebulba", "env=gymnasium/cartpole", *overrides])
    problems = validation.problems(config)
    assert problems and expected in problems[0], problems


def test_the_systems_validation_lets_onto_cpu_suites_are_those_with_a_sebulba_learner():
    """validation.SEBULBA_SYSTEMS refuses a CPU suite to every other system before it loads: the list must be the
    registry's systems whose module has a `sebulba_setup` (read from the source: importing all would take long)."""
    import importlib.util

    from stoix_like import systems

    def source(name: str) -> str:
        spec = importlib.util.find_spec(systems.module_name(name))
        assert spec is not None and spec.origin is not None, name
        return pathlib.Path(spec.origin).read_text()

    with_sebulba = {name for name in systems.MODULE_OF if "\ndef sebulba_setup(" in source(name)}
    assert with_sebulba == set(validation.SEBULBA_SYSTEMS), with_sebulba


def test_cpu_envs_are_refused_by_anakin():
    problems = validation.problems(compose_config("ppo", ["env=gymnasium/cartpole"]))
    assert problems and "use arch=sebulba" in problems[0], problems


def test_a_device_that_does_not_exist_exits_2_with_one_line(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-m", "experiments.ppo", "arch=sebulba", "env=gymnasium/cartpole",
         "arch.learner_device_ids=[7]", f"hydra.run.dir={tmp_path}"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
        env={**__import__("os").environ, "PYTHONPATH": str(REPO_ROOT), "JAX_PLATFORMS": "cpu"})
    assert completed.returncode == 2, completed.stderr[-2000:]
    lines = [line for line in completed.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "arch.learner_device_ids=[7]: device 7 does not exist" in lines[0], lines


INTERRUPTED = r'''
import json, sys, threading, time
sys.path.insert(0, sys.argv[2])
from conftest import compose_config
from stoix_like.run.sebulba import loop
from stoix_like.systems.on_policy import ppo

config = compose_config("ppo", json.loads(sys.argv[3]), base_exp_path=sys.argv[1] + "/run")
try:
    loop.run(config, ppo.sebulba_setup, "ppo")
    outcome = "finished"
except KeyboardInterrupt:
    outcome = "interrupted"
print(json.dumps({"outcome": outcome, "threads": [t.name for t in threading.enumerate()],
                  "interrupted_at": time.time()}), flush=True)
'''


def test_ctrl_c_stops_every_thread_within_seconds(tmp_path):
    import os
    import signal
    import time

    overrides = [o for o in SMALL if not o.startswith("arch.total_timesteps")] + ["arch.total_timesteps=2048000"]
    script = tmp_path / "script.py"
    script.write_text(INTERRUPTED)
    env = {**os.environ, **TWO_CPU_DEVICES, "PYTHONPATH": str(REPO_ROOT)}
    process = subprocess.Popen([sys.executable, str(script), str(tmp_path), str(REPO_ROOT / "tests"),
                                json.dumps(overrides)], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 240
        while time.time() < deadline:  # the actors are running once the learner's first update is done
            logs = list((tmp_path / "run").rglob("ppo.log"))
            if logs and "compiled the learner" in logs[0].read_text():
                break
            assert process.poll() is None, process.communicate()[1][-3000:]
            time.sleep(0.5)
        else:
            pytest.fail("the run never started learning")
        sent = time.time()
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, stderr[-3000:]
    result = _last_json(stdout)
    assert result["outcome"] == "interrupted"
    assert result["threads"] == ["MainThread"]
    assert result["interrupted_at"] - sent < 10


def test_ctrl_c_is_a_request_the_learner_raises_at_its_next_wait():
    """A KeyboardInterrupt raised where SIGINT lands can be lost (in a gc callback, Python prints it as "ignored"
    and goes on): within a Sebulba run the handler only records it, and the learner raises it when it next waits."""
    import queue
    import signal

    from stoix_like.run.sebulba.threads import Supervisor, stop_on_ctrl_c

    default = signal.getsignal(signal.SIGINT)
    supervisor = Supervisor(shutdown_timeout_seconds=1.0)
    with pytest.raises(KeyboardInterrupt):
        with stop_on_ctrl_c(supervisor):
            signal.raise_signal(signal.SIGINT)  # the first press is recorded, not raised here
            assert supervisor.interrupted and supervisor.stop.is_set()
            with pytest.raises(KeyboardInterrupt):
                supervisor.get(queue.Queue())  # the learner's next wait raises it
            with pytest.raises(KeyboardInterrupt):
                signal.raise_signal(signal.SIGINT)  # a second press raises at once
    assert signal.getsignal(signal.SIGINT) is default

    calm = Supervisor(shutdown_timeout_seconds=1.0)
    with stop_on_ctrl_c(calm):  # no press: the block neither raises nor leaves a handler behind
        pass
    assert not calm.interrupted and signal.getsignal(signal.SIGINT) is default
