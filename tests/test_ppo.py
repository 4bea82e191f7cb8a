"""PPO as a whole: its shipped defaults solve CartPole on a population of seeds nobody tuned on, it stops loudly on NaN,
and its observation statistics are the same global statistics in every (device, batch) slot."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_population_learns

from stoix_like import experiment, normalization, parallel
from stoix_like.envs import Wrapper
from stoix_like.systems.on_policy import ppo


def test_ppo_learns_cartpole_on_seeds_nobody_tuned_on(compose):
    # config/ppo.yaml as shipped, seeds 1000..1007 in one program: another machine is, for a seed, just another
    # seed. The population the defaults were tuned on (0..7) is README's row (benchmarks/learning_table.py); CI
    # checks the one nobody tuned on, the stronger claim, and spends its minutes once.
    assert_population_learns(compose, "ppo", first_seed=1000, num_seeds=8)


class RewardTurnsNaN(Wrapper):
    """Every env's rewards become NaN after its first `clean_steps` steps: a failure at a known update."""

    def __init__(self, env, clean_steps: int):
        super().__init__(env)
        self._clean_steps = clean_steps

    def reset(self, key):
        state, timestep = self._env.reset(key)
        return (state, jnp.zeros((), jnp.int32)), timestep

    def step(self, state, action):
        inner_state, steps_taken = state
        inner_state, timestep = self._env.step(inner_state, action)
        steps_taken = steps_taken + 1
        reward = jnp.where(steps_taken > self._clean_steps, jnp.nan, timestep.reward)
        return (inner_state, steps_taken), timestep._replace(reward=reward)


def test_nan_stops_the_run_naming_the_update(compose):
    # 2 evaluations × 2 updates × 8 steps: rewards turn NaN in update 3, the first of the second learn call
    config = compose("ppo", ["arch.total_num_envs=4", "system.rollout_length=8", "system.num_minibatches=2",
                             "arch.num_evaluation=2", "arch.num_eval_episodes=2", "arch.total_timesteps=128"])

    def poisoned_learner_setup(env, key, config, budget):
        return ppo.learner_setup(RewardTurnsNaN(env, clean_steps=2 * 8), key, config, budget)

    with pytest.raises(FloatingPointError, match=r"became NaN/inf at update 3 of 4"):
        experiment.run(config, poisoned_learner_setup, algorithm="ppo")


def test_observation_statistics_are_global_and_identical_in_every_slot():
    n_devices, batch, obs_shape = jax.local_device_count(), 3, (4,)
    rng = np.random.default_rng(0)

    def slot_data(num_steps):
        # a different distribution per slot, so a statistic that missed a slot would be visibly wrong
        offsets = np.arange(n_devices * batch, dtype=np.float32).reshape(n_devices, batch, 1, 1, 1)
        noise = rng.normal(size=(n_devices, batch, num_steps, 2) + obs_shape).astype(np.float32)
        return 3.0 * offsets + (1.0 + offsets) * noise  # (devices, batch, time, envs, obs)

    update = jax.pmap(jax.vmap(normalization.update, axis_name=parallel.BATCH_AXIS), axis_name=parallel.DEVICE_AXIS)
    stats = parallel.broadcast_to_devices_and_batch(normalization.init(obs_shape), batch)
    batches = [slot_data(5), slot_data(3)]  # two updates of different sizes: the running merge is tested too
    for data in batches:
        stats = update(stats, data)
    stats = jax.device_get(stats)

    everything = np.concatenate([data.reshape((-1,) + obs_shape) for data in batches]).astype(np.float64)
    assert stats.count.shape == (n_devices, batch)
    np.testing.assert_array_equal(stats.count, len(everything))
    for field in ("mean", "var"):
        slots = getattr(stats, field).reshape((n_devices * batch,) + obs_shape)
        for slot in slots[1:]:
            np.testing.assert_array_equal(slot, slots[0], err_msg=f"{field} differs between slots")
    np.testing.assert_allclose(stats.mean[0, 0], everything.mean(axis=0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(stats.var[0, 0], everything.var(axis=0), rtol=1e-4)
