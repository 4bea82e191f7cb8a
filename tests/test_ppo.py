"""PPO as a whole: its shipped defaults solve CartPole on a population of seeds nobody tuned on, it stops loudly on NaN,
its observation statistics are the same global statistics in every (device, batch) slot, and the values it reads
after a rollout are those acting would have recorded."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_population_learns

from stoix_like import envs as envs_lib
from stoix_like.run import experiment
from stoix_like.learner import budget as budget_lib
from stoix_like.learner import normalization
from stoix_like.runtime import parallel
from stoix_like.envs import Wrapper
from stoix_like.systems.on_policy import policy_gradient, ppo, rollout


@pytest.mark.learning
def test_ppo_learns_cartpole_on_seeds_nobody_tuned_on(compose):
    # config/ppo.yaml as shipped, seeds 1000..1007 in one program: another machine is, for a seed, just another
    # seed. The population the defaults were tuned on (0..7) is README's row (benchmarks/learning_table.py); CI
    # checks the one nobody tuned on, the stronger claim, and spends its minutes once.
    assert_population_learns(compose, "ppo")  # seeds: learning_targets.COVERAGE


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


def test_values_read_after_the_rollout_are_the_ones_acting_would_have_recorded(compose):
    """The critic runs after the rollout, batched (rollout.step_and_successor_values), not once per env step: its
    values must be those a per-step critic would have recorded, and each successor's value must be the next
    step's value wherever the episode went on."""
    config = compose("ppo", ["arch.total_num_envs=8", "system.rollout_length=64", "arch.total_timesteps=512",
                             "arch.num_evaluation=1", "system.normalize_observations=True"])
    budget = budget_lib.make_budget(config)
    env, _ = envs_lib.make(config.env)
    parts = policy_gradient.build_actor_critic(env, jax.random.PRNGKey(3), config, budget)
    networks = parts.networks
    state = jax.tree_util.tree_map(lambda x: x[0, 0], parts.learner_state)  # one (device, batch) slot
    # statistics away from their initial identity, so that a missed normalisation would show
    state = state._replace(obs_norm=normalization.RunningStatistics(
        jnp.asarray([0.1, -0.2, 0.03, 0.5]), jnp.asarray([0.5, 2.0, 0.01, 1.5]), jnp.asarray(100.0)))
    act = policy_gradient.make_act(networks)

    def act_recording_values(params, observation, key):
        action, env_action, recorded = act(params, observation, key)
        return action, env_action, {**recorded, "value": networks.value(params, observation)}

    @jax.jit
    def values_both_ways(state):
        state, steps = rollout.collect_rollout(envs_lib.VmapWrapper(env), act_recording_values, state, 64, 1)
        values, next_values = rollout.step_and_successor_values(
            lambda observation: networks.value(state.params, observation), state.obs_norm, steps)
        return steps.policy_extras["value"], values, next_values, steps.done

    recorded, values, next_values, done = jax.device_get(values_both_ways(state))
    assert values.shape == recorded.shape == next_values.shape == (64, 8)
    assert done.any() and not done.all()  # episodes both ended and went on within the rollout
    np.testing.assert_allclose(values, recorded, rtol=1e-5, atol=1e-5)
    went_on = ~done[:-1]
    np.testing.assert_allclose(next_values[:-1][went_on], values[1:][went_on], rtol=1e-5, atol=1e-5)
    assert not np.allclose(next_values[:-1][done[:-1]], values[1:][done[:-1]])  # a reset's value is another state's


def test_each_epoch_after_the_first_learns_from_what_refresh_computes_under_its_params():
    """update_over_epochs with `refresh`: epoch 0 learns from the batch as given (computed under the same params),
    every later epoch from refresh(carry at its start, batch), never from an older epoch's refresh."""
    def update_minibatch(carry, minibatch, key):
        del key
        params, opt_state, obs_norm = carry
        return (params + 1.0, opt_state, obs_norm), minibatch.sum()  # one optimiser step per minibatch

    def refresh(carry, batch):
        params, _, _ = carry
        return batch + 100.0 * params  # a batch that names the params it was computed under

    batch = jnp.zeros((4, 2))  # (T, envs): 8 steps, 2 minibatches of 4 per epoch
    carry = (jnp.asarray(0.0), (), ())
    (params, _, _), metrics = rollout.update_over_epochs(update_minibatch, carry, batch, jax.random.PRNGKey(0),
                                                        num_epochs=3, num_minibatches=2, refresh=refresh)
    assert float(params) == 6.0
    # every step of epoch e holds 100 × the params it started from (0, 2, 4), summed over a minibatch of 4 steps
    np.testing.assert_array_equal(jax.device_get(metrics), [[0.0, 0.0], [800.0, 800.0], [1600.0, 1600.0]])
    (_, _, _), unrefreshed = rollout.update_over_epochs(update_minibatch, carry, batch, jax.random.PRNGKey(0),
                                                       num_epochs=3, num_minibatches=2)
    np.testing.assert_array_equal(jax.device_get(unrefreshed), np.zeros((3, 2)))


@pytest.mark.parametrize("epochs, changes", [(1, False), (2, True)])
def test_recomputed_advantages_change_learning_only_from_the_second_epoch(compose, epochs, changes):
    """One epoch learns from the targets computed once per rollout either way (bit for bit); from the second,
    system.recompute_advantages recomputes them under the critic that epoch starts with."""
    base = ["arch.total_num_envs=4", "system.rollout_length=16", "system.num_minibatches=2", f"system.epochs={epochs}",
            "arch.num_evaluation=1", "arch.num_eval_episodes=2", "arch.total_timesteps=256", "arch.seed=3"]
    params = []
    for recompute in (False, True):
        config = compose("ppo", base + [f"system.recompute_advantages={recompute}"])
        result = experiment.train(config, ppo.learner_setup, "ppo")
        params.append(jax.tree_util.tree_leaves(jax.device_get(result.learner_state.params)))
    same = all(np.array_equal(a, b) for a, b in zip(*params))
    assert same != changes
