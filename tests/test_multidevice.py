"""The real PPO learner on 2 (forced host) devices: every (device, batch) slot ends with identical params,
and observation statistics are merged over devices as well as the update batch.

Each slot acts in its own envs with its own keys, so identical params after several updates show that
gradients really are averaged over "batch" and "device" (and that the optimiser and learning-rate schedule
advance in step). The device count must be fixed before jax is imported, so the learner runs in a fresh
interpreter; one subprocess covers both layouts and hands back its results as an npz.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from conftest import run_python

# Runs in the subprocess: argv = [output npz, json list of (layout name, overrides), tests/ folder].
SCRIPT = r'''
import json
import sys

import jax
import numpy as np

sys.path.insert(0, sys.argv[3])  # tests/, for compose_config
from conftest import compose_config
from stoix_like import envs as envs_lib
from stoix_like.learner import budget as budget_lib
from stoix_like.learner import normalization
from stoix_like.runtime import parallel
from stoix_like.systems.on_policy import ppo

assert jax.device_count() == 2, jax.devices()
results = {}
for name, overrides in json.loads(sys.argv[2]):
    config = compose_config("ppo", overrides)
    budget = budget_lib.make_budget(config)
    train_env, _ = envs_lib.make(config.env)
    setup = ppo.learner_setup(train_env, jax.random.PRNGKey(int(config.arch.seed)), config, budget)
    learn = parallel.distribute(setup.learner_fn)
    initial_params = jax.device_get(setup.learner_state.params)
    state, steps = setup.learner_state, 0
    for _ in range(budget.num_evaluation):
        state, outputs = learn(state)
        # episode metrics are (devices, update batch, updates, rollout_length, envs): one entry per env step
        steps += outputs.episode_metrics["episode_return"].size
    results[f"{name}/steps"] = steps
    results[f"{name}/budget"] = budget.total_timesteps
    results[f"{name}/slots"] = budget.n_devices * budget.update_batch_size
    results[f"{name}/observations"] = np.asarray(state.timestep.observation.agent_view)
    for prefix, params in (("final", jax.device_get(state.params)), ("initial", initial_params)):
        for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
            results[f"{name}/{prefix}{jax.tree_util.keystr(path)}"] = np.asarray(leaf)

# observation statistics from different data in each of 2 devices × 2 batch elements
offsets = np.arange(4, dtype=np.float32).reshape(2, 2, 1, 1, 1)
data = 3.0 * offsets + (1.0 + offsets) * np.random.default_rng(0).normal(size=(2, 2, 6, 3, 4)).astype(np.float32)
update = jax.pmap(jax.vmap(normalization.update, axis_name=parallel.BATCH_AXIS), axis_name=parallel.DEVICE_AXIS)
stats = jax.device_get(update(parallel.broadcast_to_devices_and_batch(normalization.init((4,)), 2), data))
results.update({"normalization/data": data, "normalization/mean": stats.mean, "normalization/var": stats.var,
                "normalization/count": stats.count})
np.savez(sys.argv[1], **results)
'''

COMMON = ["arch.total_num_envs=4", "system.rollout_length=8", "system.num_minibatches=2", "arch.num_evaluation=2",
          "network.actor_network.pre_torso.layer_sizes=[16]", "network.critic_network.pre_torso.layer_sizes=[16]"]
LAYOUTS = {
    # 2 devices × 1 batch × 2 envs; 2 evaluations × 2 updates × 8 steps × 4 envs
    "devices": COMMON + ["arch.update_batch_size=1", "arch.total_timesteps=128"],
    # 2 devices × 2 batch × 1 env; 2 evaluations × 1 update × 8 steps × 4 envs
    "devices_and_batch": COMMON + ["arch.update_batch_size=2", "arch.total_timesteps=64"],
}


@pytest.fixture(scope="module")
def two_device_results(tmp_path_factory):
    directory = tmp_path_factory.mktemp("multidevice")
    script, output = directory / "learn_on_two_devices.py", directory / "results.npz"
    script.write_text(SCRIPT)
    completed = run_python(
        [str(script), str(output), json.dumps(list(LAYOUTS.items())), str(pathlib.Path(__file__).parent)],
        cwd=directory, env={"XLA_FLAGS": "--xla_force_host_platform_device_count=2", "JAX_PLATFORMS": "cpu"},
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    with np.load(output) as data:
        return {key: data[key] for key in data.files}


def params_of(results, layout: str, prefix: str):
    start = f"{layout}/{prefix}"
    return {key[len(start):]: value for key, value in results.items() if key.startswith(start)}


@pytest.mark.parametrize("layout, slots", [("devices", 2), ("devices_and_batch", 4)])
def test_every_slot_ends_with_identical_params(two_device_results, layout, slots):
    assert int(two_device_results[f"{layout}/slots"]) == slots
    final, initial = params_of(two_device_results, layout, "final"), params_of(two_device_results, layout, "initial")
    assert final and final.keys() == initial.keys()
    for name, leaf in final.items():
        flat = leaf.reshape((slots,) + leaf.shape[2:])  # (devices, batch, ...) -> (slots, ...)
        for slot in range(1, slots):
            np.testing.assert_array_equal(flat[slot], flat[0], err_msg=f"{name}: slot {slot} differs from slot 0")
    # the params did move, so equality is not just the shared initialisation
    assert any(not np.allclose(final[name], initial[name]) for name in final)


@pytest.mark.parametrize("layout, slots", [("devices", 2), ("devices_and_batch", 4)])
def test_every_slot_acts_in_its_own_envs(two_device_results, layout, slots):
    observations = two_device_results[f"{layout}/observations"]
    flat = observations.reshape((slots, -1))
    assert len({row.tobytes() for row in flat}) == slots  # different data per slot, yet the same params


@pytest.mark.parametrize("layout", LAYOUTS)
def test_env_steps_equal_the_budget(two_device_results, layout):
    assert int(two_device_results[f"{layout}/steps"]) == int(two_device_results[f"{layout}/budget"])
    expected = {"devices": 128, "devices_and_batch": 64}[layout]
    assert int(two_device_results[f"{layout}/budget"]) == expected


def test_observation_statistics_span_devices_and_batch(two_device_results):
    data = two_device_results["normalization/data"]  # (devices, batch, time, envs, obs)
    everything = data.reshape(-1, data.shape[-1]).astype(np.float64)
    np.testing.assert_array_equal(two_device_results["normalization/count"], len(everything))
    for field, expected, rtol in (("mean", everything.mean(axis=0), 1e-5), ("var", everything.var(axis=0), 1e-4)):
        slots = two_device_results[f"normalization/{field}"].reshape(4, -1)
        for slot in slots:
            np.testing.assert_array_equal(slot, slots[0], err_msg=f"{field} differs between slots")
        np.testing.assert_allclose(slots[0], expected, rtol=rtol, atol=1e-5)
