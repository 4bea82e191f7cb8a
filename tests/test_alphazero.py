"""AlphaZero and the search family's shared module (stoix_like/systems/search/mcts.py).

The env-as-model search makes exactly the env's own transitions; episode ends are cut from the tree with the
truncation's bootstrap in the reward; illegal actions are never expanded, under either search policy; the tree
statistics are what a hand-built chain says; bad input is refused before anything compiles; and the shipped
defaults learn CartPole on a population of seeds.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_population_learns

from stoix_like.envs import factory
from stoix_like.envs.environment import DiscreteActionSpace, Environment
from stoix_like.envs.wrappers import AutoReset, EpisodeMetrics, VmapWrapper, restart, transition
from stoix_like.errors import ConfigError
from stoix_like.systems.search import alphazero, mcts
from stoix_like.types import Observation

GAMMA = 0.9


def observation_sum_value(params, observation: Observation):
    """A stand-in network: uniform prior, V(s) = the sum of the observation (so the bootstrap is checkable)."""
    del params
    logits = jnp.zeros(observation.action_mask.shape, jnp.float32)
    return logits, jnp.sum(observation.agent_view, axis=-1)


def every_action(prior_and_value):
    """The search's expansion from a stand-in network `(params, observation) -> (logits, value)`: every action of
    the env, masked as the observation says (AlphaZero's)."""

    def expand(params, key, observation: Observation):
        del key
        logits, value = prior_and_value(params, observation)
        return mcts.Expansion(logits, value, observation.action_mask, ())

    return expand


def cartpole(max_episode_steps=None) -> Environment:
    train_env, _ = factory.make({"suite": "gymnax", "scenario": {"name": "CartPole-v1"}, "kwargs": {},
                                 "max_episode_steps": max_episode_steps})
    return train_env


def test_the_env_model_makes_the_env_s_own_transitions():
    env = cartpole()
    batched = VmapWrapper(env)
    env_state, timestep = batched.reset(jax.random.split(jax.random.PRNGKey(0), 5))
    actions = jnp.asarray([0, 1, 1, 0, 1])
    recurrent_fn = mcts.env_model(env, every_action(observation_sum_value), GAMMA)
    embedding = mcts.EnvEmbedding(env_state, timestep.observation.action_mask)

    output, next_embedding = recurrent_fn(None, jax.random.PRNGKey(1), actions, embedding)
    real_state, real_timestep = batched.step(env_state, actions)

    jax.tree_util.tree_map(np.testing.assert_array_equal, next_embedding.env_state, real_state)
    np.testing.assert_array_equal(output.reward, real_timestep.reward)  # no episode ended: the reward as it is
    np.testing.assert_allclose(output.discount, GAMMA * real_timestep.discount)
    np.testing.assert_allclose(output.value, real_timestep.observation.agent_view.sum(-1), rtol=1e-6)
    np.testing.assert_array_equal(next_embedding.action_mask, real_timestep.observation.action_mask)


def test_an_episode_end_is_cut_from_the_tree_with_the_truncation_s_bootstrap():
    # a one-step time limit: the first step ends every episode, by truncation (discount 1) unless it terminates
    env = cartpole(max_episode_steps=1)
    batched = VmapWrapper(env)
    env_state, timestep = batched.reset(jax.random.split(jax.random.PRNGKey(0), 4))
    recurrent_fn = mcts.env_model(env, every_action(observation_sum_value), GAMMA)
    output, _ = recurrent_fn(None, jax.random.PRNGKey(1), jnp.zeros(4, jnp.int32),
                             mcts.EnvEmbedding(env_state, timestep.observation.action_mask))
    _, real = batched.step(env_state, jnp.zeros(4, jnp.int32))
    assert bool(jnp.all(real.last())) and bool(jnp.all(real.discount == 1.0))
    # r + γ·V(true successor), and nothing below: discount 0 (the auto-reset's next episode never reaches the root)
    successor_value = real.extras["next_obs"].agent_view.sum(-1)
    np.testing.assert_allclose(output.reward, real.reward + GAMMA * successor_value, rtol=1e-6)
    np.testing.assert_array_equal(output.discount, np.zeros(4))


# ----------------------------------------------------------------------------------------------------------
# A toy env: a walk on the integers with three actions (+0, +1, +2), of which +2 is always illegal; taking it
# anyway makes the reward NaN, which any search value it reaches would show.
# ----------------------------------------------------------------------------------------------------------


class WalkState(NamedTuple):
    position: jax.Array
    time: jax.Array


class IllegalThirdAction(Environment):
    def __init__(self, num_actions: int = 3, legal: tuple = (True, True, False)):
        self._num_actions = num_actions
        self._legal = jnp.asarray(legal)

    def _observation(self, state: WalkState) -> Observation:
        return Observation(agent_view=state.position[None].astype(jnp.float32), action_mask=self._legal,
                           step_count=state.time)

    def reset(self, key):
        state = WalkState(jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32))
        return state, restart(self._observation(state))

    def step(self, state: WalkState, action):
        state = WalkState(state.position + action, state.time + 1)
        reward = jnp.where(self._legal[action], 1.0, jnp.nan)
        return state, transition(reward, state.position >= 50, state.time >= 100, self._observation(state))

    @property
    def action_space(self):
        return DiscreteActionSpace(self._num_actions)

    @property
    def observation_shape(self):
        return (1,)

    @property
    def max_episode_steps(self):
        return 100


def search_toy(env: Environment, search_policy: str, num_simulations: int, max_depth=None, batch: int = 2,
               prior_and_value=observation_sum_value):
    train_env = AutoReset(EpisodeMetrics(env))
    env_state, timestep = VmapWrapper(train_env).reset(jax.random.split(jax.random.PRNGKey(0), batch))
    expand = every_action(prior_and_value)
    root = mcts.network_root(expand, None, jax.random.PRNGKey(2), env_state, timestep)
    recurrent_fn = mcts.env_model(train_env, expand, GAMMA)
    return jax.jit(lambda key: mcts.run_search(search_policy, None, key, root, recurrent_fn, num_simulations,
                                               max_depth))(jax.random.PRNGKey(3))


def favour_the_illegal_action(params, observation: Observation):
    """A network that wants the illegal action most, and values states poorly: an unmasked PUCT would try it."""
    del params
    logits = jnp.broadcast_to(jnp.asarray([0.0, 0.0, 5.0]), observation.action_mask.shape)
    return logits, -jnp.sum(observation.agent_view, axis=-1)


@pytest.mark.parametrize("search_policy", mcts.SEARCH_POLICIES)
def test_illegal_actions_are_never_expanded(search_policy):
    output = search_toy(IllegalThirdAction(), search_policy, num_simulations=24,
                        prior_and_value=favour_the_illegal_action)
    tree = output.search_tree
    # no node, root or interior, has a child through the illegal action, so no NaN reward entered the tree
    assert not np.any(np.asarray(tree.children_visits[..., 2]))
    assert np.all(np.isfinite(np.asarray(tree.node_values)))
    np.testing.assert_array_equal(output.action_weights[:, 2], 0.0)
    assert not np.any(np.asarray(output.action) == 2)
    assert np.all(np.asarray(mcts.node_depths(tree)).max(-1) >= 2)  # the search did go below the root


def test_tree_statistics_of_a_chain():
    # one action: each simulation goes one step deeper, so 5 simulations build a chain of depth 5, or of 2 when
    # max_depth stops them there; every visit goes to the one action (entropy 0)
    env = IllegalThirdAction(num_actions=1, legal=(True,))
    for max_depth, depth in ((2, 2), (None, 5)):
        output = search_toy(env, "muzero", num_simulations=5, max_depth=max_depth)
        statistics = mcts.search_statistics(output, jnp.zeros(2))
        np.testing.assert_array_equal(statistics["tree_depth"], [depth, depth])
        np.testing.assert_array_equal(statistics["visit_entropy"], [0.0, 0.0])
    # the whole chain's root value: the mean of the root's V = 0 and the 5 returns of depth d = 1..5, each
    # 1 + γ + ... + γ^(d−1) (rewards of 1), the leaf's V adding nothing (the one action, +0, stays at position 0)
    returns = [sum(GAMMA ** k for k in range(d)) for d in range(1, 6)]
    np.testing.assert_allclose(statistics["search_value_minus_network_value"], [np.mean([0.0, *returns])] * 2,
                               rtol=1e-5)


# ----------------------------------------------------------------------------------------------------------
# Bad input, and learning
# ----------------------------------------------------------------------------------------------------------


def test_continuous_actions_are_a_config_error(compose):
    config = compose("az", ["env=gymnax/pendulum"])
    with pytest.raises(ConfigError, match="Pendulum-v1 has continuous actions; az searches over discrete ones") as error:
        alphazero.run_experiment(config)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("override, named", [("system.num_simulations=0", "system.num_simulations=0"),
                                             ("system.max_depth=0", "system.max_depth=0"),
                                             ("system.search_policy=alphago", "system.search_policy=alphago")])
def test_bad_search_settings_are_refused_before_anything_compiles(compose, override, named):
    from stoix_like.config import validation

    with pytest.raises(ConfigError, match=named):
        validation.validate(compose("az", [override]))


@pytest.mark.learning
@pytest.mark.slow
def test_alphazero_learns_cartpole(compose):
    # config/az.yaml as shipped (its budget included) must meet its target in stoix_like/claims/learning_targets.py on a
    # population of seeds in one program. 4 seeds, not 8, to fit the CI budget (the search makes each env step
    # num_simulations env steps and network passes); benchmarks/learning_table.py --algorithms az runs all 8.
    assert_population_learns(compose, "az")
