"""Sampled AlphaZero (stoix_like/systems/search/sampled_alphazero.py) and its sampled-policy correction
(stoix_like/ops/sampled_policy.py).

The correction is checked on hand-worked cases; the search's model steps the env with each node's own draws; bad
input is refused before anything compiles; a short run runs; and a CI population learns Pendulum.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_population_clears

from stoix_like.envs import factory
from stoix_like.envs.wrappers import VmapWrapper
from stoix_like.errors import ConfigError
from stoix_like.networks.distributions import TanhGaussian
from stoix_like.ops.sampled_policy import empirical_distribution, sampled_prior_logits
from stoix_like.systems.search import mcts, sampled_alphazero


def probs(logits) -> np.ndarray:
    return np.exp(np.asarray(logits, np.float64))


# ---------------------------------------------------------------------------------- the sampled-policy correction


def test_sampling_from_the_prior_leaves_the_empirical_distribution():
    # β = π: (β̂/β)·π = β̂, whatever π says of the draws; three distinct draws and one drawn twice (β̂ 2/4 there)
    log_pi = jnp.log(jnp.asarray([[0.1, 0.2, 0.3, 0.4], [0.5, 0.125, 0.125, 0.25]]))
    empirical = jnp.asarray([[0.25, 0.25, 0.25, 0.25], [0.5, 0.25, 0.25, 0.0]])
    np.testing.assert_allclose(probs(sampled_prior_logits(log_pi, log_pi, empirical)), empirical, atol=1e-6)


def test_sampling_uniformly_leaves_the_prior_renormalised_over_the_draws():
    # β uniform over 10 actions (log β = log 0.1 at every draw), three distinct draws of π = 0.1, 0.3, 0.2: the
    # corrected prior is π over the draws renormalised, 0.1/0.6, 0.3/0.6, 0.2/0.6
    log_beta = jnp.full((1, 3), math.log(0.1))
    log_pi = jnp.log(jnp.asarray([[0.1, 0.3, 0.2]]))
    empirical = jnp.full((1, 3), 1 / 3)
    np.testing.assert_allclose(probs(sampled_prior_logits(log_beta, log_pi, empirical)), [[1 / 6, 1 / 2, 1 / 3]],
                               atol=1e-6)


def test_duplicate_draws_add_up():
    # draws a, b, a, c (one dimension each): β̂ puts a's 2/4 at its first index and 0 at its duplicate
    draws = jnp.asarray([[[0.5], [-1.0], [0.5], [2.0]]])
    np.testing.assert_allclose(empirical_distribution(draws), [[0.5, 0.25, 0.0, 0.25]])
    # β(a, b, c) = 0.5, 0.25, 0.25 and π(a, b, c) = 0.2, 0.6, 0.2: (β̂/β)·π = 0.2, 0.6, 0.2 (β̂ = β here), the
    # duplicate never chosen
    log_beta = jnp.log(jnp.asarray([[0.5, 0.25, 0.5, 0.25]]))
    log_pi = jnp.log(jnp.asarray([[0.2, 0.6, 0.2, 0.2]]))
    deduplicated = probs(sampled_prior_logits(log_beta, log_pi, empirical_distribution(draws)))
    np.testing.assert_allclose(deduplicated, [[0.2, 0.6, 0.0, 0.2]], atol=1e-6)
    # the same draws each carrying its own 1/4: a's two indices hold together what its first held alone
    per_draw = probs(sampled_prior_logits(log_beta, log_pi, jnp.full((1, 4), 0.25)))
    np.testing.assert_allclose(per_draw[0, 0] + per_draw[0, 2], deduplicated[0, 0], atol=1e-6)
    np.testing.assert_allclose(per_draw[0, [1, 3]], deduplicated[0, [1, 3]], atol=1e-6)


# ----------------------------------------------------------------------------------------------- the search


def pendulum():
    train_env, _ = factory.make({"suite": "gymnax", "scenario": {"name": "Pendulum-v1"}, "kwargs": {},
                                 "max_episode_steps": None})
    return train_env


K = 5


def test_each_node_draws_its_own_actions_and_the_model_steps_the_env_with_them():
    env = pendulum()
    batched = VmapWrapper(env)
    env_state, timestep = batched.reset(jax.random.split(jax.random.PRNGKey(0), 3))
    searched = sampled_alphazero.sampled_policy(K, env.action_space, ent_coef=0.0)

    def expand(params, key, observation):
        batch = observation.agent_view.shape[0]
        policy = TanhGaussian(jnp.full((batch, 1), 0.3), jnp.full((batch, 1), 0.5), jnp.asarray([-2.0]),
                              jnp.asarray([2.0]))
        return searched.expand(policy, jnp.zeros(batch), observation, key)

    root = mcts.network_root(expand, None, jax.random.PRNGKey(1), env_state, timestep)
    draws = root.embedding.actions
    assert draws.shape == (3, K, 1)
    assert len(np.unique(np.asarray(draws))) == 3 * K  # every node its own draws
    # drawn from the policy itself (β = π), distinct: the corrected prior is uniform over the draws
    np.testing.assert_allclose(probs(root.prior_logits), np.full((3, K), 1 / K), atol=1e-6)
    assert bool(jnp.all(root.embedding.action_mask))

    recurrent_fn = mcts.env_model(env, expand, 0.9, searched.env_action)
    chosen = jnp.asarray([0, 3, 4])
    output, child = recurrent_fn(None, jax.random.PRNGKey(2), chosen, root.embedding)
    # search action k is the node's k-th draw, squashed into Pendulum's [-2, 2]
    torques = 2.0 * np.tanh(np.asarray(draws)[np.arange(3), np.asarray(chosen)])
    real_state, real_timestep = batched.step(env_state, jnp.asarray(torques))
    jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6), child.env_state, real_state)
    np.testing.assert_allclose(output.reward, real_timestep.reward, rtol=1e-6)
    assert not np.allclose(np.asarray(child.actions), np.asarray(draws))  # the child drew afresh


# ------------------------------------------------------------------------------------------ bad input, and runs


# A discrete env, no draws per node and bad search settings are refused as Sampled MuZero's are:
# tests/test_sampled_muzero.py checks both sampled systems.


def test_a_short_run_runs(compose):
    config = compose("sampled_az", ["arch.total_timesteps=2048", "arch.num_evaluation=2", "arch.total_num_envs=4",
                                    "arch.num_eval_episodes=2", "system.num_sampled_actions=3",
                                    "system.num_simulations=4", "system.epochs=1", "system.num_minibatches=2"])
    assert np.isfinite(sampled_alphazero.run_experiment(config))


# The shipped budget (config/sampled_az.yaml: 307,200 steps) takes ~100 s for 4 seeds on 2 cores, beyond the CI
# budget, so CI checks a smaller claim that can still fail: about a quarter of the steps lift 4 seeds far above a
# random policy's ~-1,200. The target itself (IQM >= -300, at most one seed below -400) is measured by
# `benchmarks/learning_table.py --algorithms sampled_az`, its figures in config/sampled_az.yaml.
# At 81,920 steps the bar was luck: seeds 0..3 gave IQM -403.7 at first, then (2026-11-27, a float-order change of
# the optimiser) -603.6 on the flat optimiser and -583.5 on the old per-leaf one, seeds spread from -246 to -795. So
# CI trains 122,880 steps: seeds 0..3 IQM -431.2 [95% CI -469.2, -274.3], untuned seeds 1000..1003 IQM -286.1
# [-322.8, -259.5], ~75 s on 2 cores; the bar is unchanged.
# The reduced budget, 122,880 steps (5 evaluations x 48 updates x 32 steps x 16 envs),
# and its bar are declared in learning_targets.COVERAGE, which README's table prints.


@pytest.mark.learning
@pytest.mark.slow
def test_sampled_alphazero_learns_pendulum(compose):
    assert_population_clears(compose, "sampled_az")
