"""popjax's RepeatPrevious (stoix_like/envs/popjax.py): reset and step semantics, rewards on hand-worked episodes,
the episode's end at its horizon (termination) and at a shorter time limit (truncation), jit and vmap, and the
config that builds it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stoix_like import envs as envs_lib
from stoix_like.config.compose import compose_config
from stoix_like.envs.popjax import RepeatPrevious, RepeatPreviousState, make_task
from stoix_like.errors import ConfigError
from stoix_like.claims.learning_targets import MEMORYLESS_RETURN
from stoix_like.types import StepType


def play(env: RepeatPrevious, symbols, actions):
    """The episode with these symbols, answered with these actions: its TimeSteps after each step."""
    state = RepeatPreviousState(jnp.asarray(symbols, jnp.int32), jnp.zeros((), jnp.int32))
    step = jax.jit(env.step)
    timesteps = []
    for action in actions:
        state, timestep = step(state, jnp.int32(action))
        timesteps.append(timestep)
    return timesteps


def test_reset_shows_the_first_symbol_one_hot():
    env = RepeatPrevious(num_symbols=3, lag=1, horizon=5)
    state, timestep = jax.jit(env.reset)(jax.random.PRNGKey(0))
    assert timestep.step_type == StepType.FIRST and timestep.reward == 0 and timestep.discount == 1
    assert state.symbols.shape == (5,) and int(state.time) == 0
    np.testing.assert_array_equal(timestep.observation.agent_view, np.eye(3)[int(state.symbols[0])])
    assert env.observation_shape == (3,) and env.action_space.num_actions == 3
    np.testing.assert_array_equal(timestep.observation.action_mask, np.ones(3, bool))


def test_each_step_shows_the_next_symbol():
    env = RepeatPrevious(num_symbols=4, lag=2, horizon=6)
    symbols = [3, 0, 2, 1, 1, 0]
    timesteps = play(env, symbols, [0] * 5)
    for t, timestep in enumerate(timesteps):
        np.testing.assert_array_equal(timestep.observation.agent_view, np.eye(4)[symbols[t + 1]])
        assert int(timestep.observation.step_count) == t + 1


def test_rewards_on_a_hand_worked_episode():
    """Symbols 3 0 2 1 2 0 with lag 2: from step 2 the answers should be 3, 0, 2, 1 (the symbols at steps 0..3);
    each right one pays 1 / (6 - 2) = 0.25, before step 2 nothing is asked."""
    env = RepeatPrevious(num_symbols=4, lag=2, horizon=6)
    symbols = [3, 0, 2, 1, 2, 0]
    right = play(env, symbols, [3, 0, 3, 0, 2, 1])  # steps 0, 1 unasked (even "right-looking" answers pay 0)
    np.testing.assert_allclose([float(t.reward) for t in right], [0, 0, 0.25, 0.25, 0.25, 0.25])
    assert sum(float(t.reward) for t in right) == pytest.approx(1.0)
    mixed = play(env, symbols, [1, 1, 3, 1, 2, 0])  # right at steps 2 and 4, wrong at 3 and 5
    np.testing.assert_allclose([float(t.reward) for t in mixed], [0, 0, 0.25, 0, 0.25, 0])
    # answering with the symbol shown now (a memoryless policy's best guess) earns only coincidences: step 4's 2
    now = play(env, symbols, symbols)
    np.testing.assert_allclose([float(t.reward) for t in now], [0, 0, 0, 0, 0.25, 0])


def test_the_episode_terminates_at_its_horizon():
    env = RepeatPrevious(num_symbols=2, lag=1, horizon=4)
    timesteps = play(env, [0, 1, 1, 0], [0, 0, 1, 1])
    assert [int(t.step_type) for t in timesteps] == [StepType.MID] * 3 + [StepType.LAST]
    assert [float(t.discount) for t in timesteps] == [1, 1, 1, 0]  # the task is over: nothing to bootstrap
    assert env.max_episode_steps == 4


def test_a_shorter_time_limit_truncates():
    env = RepeatPrevious(num_symbols=2, lag=1, horizon=8, max_episode_steps=3)
    timesteps = play(env, [0] * 8, [0, 0, 0])
    assert [int(t.step_type) for t in timesteps] == [StepType.MID, StepType.MID, StepType.LAST]
    assert float(timesteps[-1].discount) == 1.0  # a truncation: the episode could have gone on
    assert env.max_episode_steps == 3


def test_it_jits_and_vmaps_and_resets_differ_by_key():
    env = RepeatPrevious(num_symbols=4, lag=2, horizon=16)
    keys = jax.random.split(jax.random.PRNGKey(1), 64)
    states, timesteps = jax.jit(jax.vmap(env.reset))(keys)
    assert states.symbols.shape == (64, 16) and timesteps.observation.agent_view.shape == (64, 4)
    assert len({tuple(np.asarray(row)) for row in states.symbols}) > 60  # independent episodes
    # symbols are uniform: every one of the 4 appears about a quarter of the time
    counts = np.bincount(np.asarray(states.symbols).ravel(), minlength=4) / states.symbols.size
    np.testing.assert_allclose(counts, 0.25, atol=0.05)
    states, timesteps = jax.jit(jax.vmap(env.step))(states, jnp.zeros((64,), jnp.int32))
    assert timesteps.reward.shape == (64,) and np.all(np.asarray(states.time) == 1)


def test_a_memoryless_policy_earns_its_stated_return():
    """Answering the symbol shown now, over many episodes, earns `memoryless_return` (1 / num_symbols), the figure
    learning_targets.MEMORYLESS_RETURN gives the shipped task."""
    config = compose_config("rec_ppo", ["env=popjax/repeat_previous"])
    _, eval_env = envs_lib.make(config.env)
    task = eval_env.unwrapped
    assert isinstance(task, RepeatPrevious)
    assert task.memoryless_return == MEMORYLESS_RETURN["popjax/repeat_previous"]

    def episode_return(key):
        state, timestep = eval_env.reset(key)

        def step(carry, _):
            state, timestep = carry
            state, next_timestep = eval_env.step(state, jnp.argmax(timestep.observation.agent_view))
            return (state, next_timestep), next_timestep.reward

        _, rewards = jax.lax.scan(step, (state, timestep), None, length=task.horizon)
        return rewards.sum()

    returns = jax.jit(jax.vmap(episode_return))(jax.random.split(jax.random.PRNGKey(2), 2000))
    assert float(returns.mean()) == pytest.approx(task.memoryless_return, abs=0.02)


@pytest.mark.parametrize("kwargs, refusal", [
    ({"num_symbols": 1}, r"num_symbols=1 must be at least 2"),
    ({"lag": 16, "horizon": 16}, r"lag=16 must be at least 1 and below env\.kwargs\.horizon=16"),
])
def test_impossible_tasks_are_refused(kwargs, refusal):
    with pytest.raises(ConfigError, match=refusal):
        make_task("RepeatPrevious", **kwargs)


def test_an_unknown_task_is_refused():
    with pytest.raises(ConfigError, match=r"Unknown popjax task 'RepeatNext'\. Available: RepeatPrevious"):
        make_task("RepeatNext")
