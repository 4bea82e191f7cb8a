"""Replay (stoix_like.learner.replay, systems/off_policy.py): the n-step view of sampled sequences, buffers that cannot
work refused early, prioritized replay's importance weights and priorities, and whole sequences reaching a learner.

Expected n-step numbers are worked out by hand in the comments.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flashbax.buffers import sum_tree

from stoix_like import envs as envs_lib
from stoix_like.learner import budget as budget_lib
from stoix_like.runtime import parallel
from stoix_like.learner import replay
from stoix_like.errors import ConfigError
from stoix_like.learner.system_contract import LearnerOutput
from stoix_like.systems import off_policy
from stoix_like.types import Observation


def sequences(rewards, discounts, lasts):
    """(B, n) sequences whose next observations are 10 × (row + 1) + step, so the chosen one is readable."""
    rewards = jnp.asarray(rewards, jnp.float32)
    batch, n = rewards.shape
    next_view = 10.0 * (jnp.arange(batch)[:, None] + 1) + jnp.arange(n)[None, :]

    def observation(view):
        return Observation(agent_view=view[..., None], action_mask=jnp.ones((batch, n, 2), bool),
                           step_count=jnp.zeros((batch, n), jnp.int32))

    return replay.Transition(
        observation=observation(next_view - 1.0), action=jnp.arange(batch * n, dtype=jnp.int32).reshape(batch, n),
        reward=rewards, discount=jnp.asarray(discounts, jnp.float32), last=jnp.asarray(lasts, bool),
        next_observation=observation(next_view))


def test_n_step_transition_stops_at_episode_ends_and_bootstraps_only_truncations():
    # gamma = 0.5, n = 3, rewards 1, 2, 4 in every row.
    batch = sequences(
        rewards=[[1, 2, 4]] * 4,
        discounts=[[1, 0, 1],   # row 0: terminated at step 1
                   [1, 1, 1],   # row 1: truncated at step 1 (last, discount still 1)
                   [1, 1, 1],   # row 2: no episode end
                   [1, 1, 1]],  # row 3: truncated at step 0
        lasts=[[0, 1, 0], [0, 1, 0], [0, 0, 0], [1, 0, 0]],
    )
    n_step = replay.n_step_transition(batch, gamma=0.5)

    # row 0: 1 + 0.5·2 = 2; the sum stops at the termination; discount 0.5² · 0 = 0; next obs of step 1 (11).
    # row 1: the same sum 2, but the truncation bootstraps: discount 0.5² · 1 = 0.25; next obs 21.
    # row 2: 1 + 0.5·2 + 0.25·4 = 3; discount 0.5³ = 0.125; next obs of step 2 (32).
    # row 3: 1 (reward 2 and 4 belong to the next episode); discount 0.5; next obs of step 0 (40).
    np.testing.assert_allclose(n_step.reward, [2.0, 2.0, 3.0, 1.0])
    np.testing.assert_allclose(n_step.discount, [0.0, 0.25, 0.125, 0.5])
    np.testing.assert_allclose(n_step.next_observation.agent_view[:, 0], [11.0, 21.0, 32.0, 40.0])
    np.testing.assert_array_equal(n_step.last, [True, True, False, True])
    # the first step's observation and action are the ones the loss differentiates
    np.testing.assert_allclose(n_step.observation.agent_view[:, 0], [9.0, 19.0, 29.0, 39.0])
    np.testing.assert_array_equal(n_step.action, [0, 3, 6, 9])


def test_one_step_transition_is_the_stored_step():
    batch = sequences(rewards=[[3.0]], discounts=[[0.0]], lasts=[[1]])
    n_step = replay.n_step_transition(batch, gamma=0.9)
    np.testing.assert_allclose(n_step.reward, [3.0])
    np.testing.assert_allclose(n_step.discount, [0.0])


def buffer_error(compose, overrides) -> str:
    config = compose("dqn", overrides)
    with pytest.raises(ConfigError) as error:
        replay.make_buffer(config.system, budget_lib.make_budget(config), replay.n_step_batches(config.system))
    message = str(error.value)
    assert "\n" not in message
    return message


def test_buffer_smaller_than_a_batch_is_refused(compose):
    message = buffer_error(compose, ["system.total_buffer_size=64", "system.total_batch_size=128"])
    assert "system.total_buffer_size=64" in message and "system.total_batch_size=128" in message


def test_a_total_batch_that_does_not_split_over_the_slots_is_refused(compose):
    # 1 device × 2 batch slots: 65 transitions cannot be shared equally
    message = buffer_error(compose, ["arch.update_batch_size=2", "system.total_batch_size=65"])
    assert message.startswith("system.total_batch_size=65 must be a positive multiple of n_devices × "
                              "arch.update_batch_size = 1 × 2 = 2") and "try system.total_batch_size=64 or 66" in message


def test_each_slot_samples_its_share_of_the_total_batch(compose, monkeypatch):
    built = {}
    monkeypatch.setattr(replay.fbx, "make_trajectory_buffer", lambda **kwargs: built.update(kwargs))
    config = compose("dqn", ["arch.update_batch_size=2", "system.total_batch_size=64"])
    replay.make_buffer(config.system, budget_lib.make_budget(config), replay.n_step_batches(config.system))
    assert built["sample_batch_size"] == 32


def test_n_step_longer_than_the_collected_rollout_is_refused(compose):
    # 16 envs × 2 warm-up steps, then 10 evaluations × 1 update × 2 steps × 16 envs
    message = buffer_error(compose, ["system.n_step=5", "system.rollout_length=2", "system.warmup_rollout_length=2",
                                     "arch.total_timesteps=352"])
    assert "system.n_step=5" in message


def random_act(params, observation, key, global_env_steps):
    action = jax.random.randint(key, observation.action_mask.shape[:1], 0, 2)
    return action, action


def skeleton_alone(config, learn_from_batch, batches: replay.BatchView, prioritized: bool = False):
    """The off-policy skeleton with random CartPole actions and a stand-in learner: (final state, LearnerOutput)."""
    train_env, _ = envs_lib.make(config.env)
    setup = off_policy.make_system_setup(train_env, jax.random.PRNGKey(0), config, budget_lib.make_budget(config),
                                     params=(), opt_states=(), act=random_act, learn_from_batch=learn_from_batch,
                                     batches=batches, eval_policy=None, eval_params=None, prioritized=prioritized)
    return parallel.distribute(setup.learner_fn)(setup.learner_state)


def test_prioritized_replay_weights_its_samples_and_takes_the_learners_priorities(compose):
    # the off-policy skeleton alone, with a stand-in learner whose priority for a transition is 1 + |cart
    # position|: different transitions get different priorities, so importance weights must differ too
    config = compose("rainbow", ["arch.total_num_envs=2", "arch.num_evaluation=1", "arch.total_timesteps=40",
                                 "system.rollout_length=4", "system.warmup_rollout_length=8", "system.gradient_steps_per_update=2",
                                 "system.total_batch_size=8", "system.total_buffer_size=64"])
    # 8 warm-up steps × 2 envs, then 3 updates × 4 steps × 2 envs

    def learn_from_batch(params, opt_states, batch, weights, key, update_count):
        priorities = 1.0 + jnp.abs(batch.observation.agent_view[:, 0])
        return off_policy.BatchUpdate(params, opt_states, {"max_weight": jnp.max(weights),
                                                           "min_weight": jnp.min(weights)}, priorities)

    state, outputs = skeleton_alone(config, learn_from_batch, replay.n_step_batches(config.system), prioritized=True)
    assert isinstance(outputs, LearnerOutput)
    metrics = jax.device_get(outputs.train_metrics)
    # importance weights are normalised by their batch maximum; once the learner's priorities are in, they differ
    np.testing.assert_allclose(metrics["max_weight"], 1.0, rtol=1e-6)
    assert metrics["min_weight"].reshape(-1)[-1] < 1.0

    tree = jax.tree_util.tree_map(lambda x: x[0, 0], jax.device_get(state.buffer_state.sum_tree_state))
    stored = np.asarray(sum_tree.get(tree, jnp.arange(tree.capacity)))
    # new items enter with the largest priority seen so far; sampled ones now carry the learner's own
    assert len(np.unique(stored[stored > 0])) > 1


def test_sequence_batches_reach_the_learner_as_consecutive_time_major_steps(compose):
    # the skeleton with sequence batches and a stand-in learner that measures what it is given: sequences of 5
    # consecutive steps of one env, where each step's successor is the next step's observation unless it ended there
    config = compose("awr", ["arch.total_num_envs=2", "arch.num_evaluation=1", "arch.total_timesteps=56",
                             "system.rollout_length=4", "system.warmup_rollout_length=24",
                             "system.gradient_steps_per_update=3", "system.total_batch_size=8",
                             "system.sequence_length=5", "system.total_buffer_size=64"])
    # 24 warm-up steps × 2 envs, then 4 updates × 4 steps × 2 envs

    def learn_from_batch(params, opt_states, batch, weights, key, update_count):
        assert batch.reward.shape == (5, 8) and weights.shape == (8,)  # time-major (L, B); one weight per sequence
        view, next_view = batch.observation.agent_view, batch.next_observation.agent_view
        continues = jnp.all(next_view[:-1] == view[1:], axis=-1)
        steps_on = batch.observation.step_count[1:] == batch.observation.step_count[:-1] + 1
        ended = batch.last[:-1]
        metrics = {"successor_is_next_step": jnp.mean(jnp.where(ended, True, continues & steps_on)),
                   "restarts_after_an_end": jnp.mean(jnp.where(ended, batch.observation.step_count[1:] == 0, True)),
                   "episode_ends": jnp.sum(ended)}
        return off_policy.BatchUpdate(params, opt_states, metrics, jnp.zeros(8))

    _, outputs = skeleton_alone(config, learn_from_batch, replay.sequence_batches(config.system))
    metrics = jax.device_get(outputs.train_metrics)
    np.testing.assert_array_equal(metrics["successor_is_next_step"], 1.0)
    np.testing.assert_array_equal(metrics["restarts_after_an_end"], 1.0)
    assert metrics["episode_ends"].sum() > 0  # random CartPole episodes end within the sampled windows
