"""SPO (stoix_like/systems/search/spo.py) and its particle bookkeeping (stoix_like/ops/smc.py).

Resampling and the effective sample size are checked on hand-worked cases; the plan weighs particles by their TD
errors, keeps a resampled particle's first action, and stops a particle where its episode ends (a truncation
bootstrapping, a termination not); bad input is refused before anything compiles; short runs run with either action
kind; and a CI population learns CartPole.
"""

from __future__ import annotations

import math
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_population_clears
from omegaconf import OmegaConf
from test_alphazero import IllegalThirdAction, WalkState

from stoix_like.config import validation
from stoix_like.envs.environment import Environment
from stoix_like.envs.wrappers import AutoReset, EpisodeMetrics, VmapWrapper, transition
from stoix_like.errors import ConfigError
from stoix_like.networks.actor_critic import PolicyAndValue
from stoix_like.networks.distributions import MaskedCategorical
from stoix_like.ops import smc
from stoix_like.systems.search import spo
from stoix_like.types import Observation

# ------------------------------------------------------------------------------------------ ops/smc.py by hand


def log(weights) -> jnp.ndarray:
    return jnp.log(jnp.asarray(weights, jnp.float32))


def test_the_effective_sample_size_of_hand_worked_weights():
    # uniform: N; one particle holding everything: 1; (1/2, 1/4, 1/4): 1 / (1/4 + 1/16 + 1/16) = 8/3
    np.testing.assert_allclose(smc.effective_sample_size(jnp.zeros(5)), 5.0, rtol=1e-6)
    np.testing.assert_allclose(smc.effective_sample_size(log([1.0, 0.0, 0.0])), 1.0, rtol=1e-6)
    np.testing.assert_allclose(smc.effective_sample_size(log([0.5, 0.25, 0.25])), 8 / 3, rtol=1e-6)
    # unnormalised log-weights: only their differences count
    np.testing.assert_allclose(smc.effective_sample_size(log([0.5, 0.25, 0.25]) + 100.0), 8 / 3, rtol=1e-5)


def test_the_weight_entropy_of_hand_worked_weights():
    np.testing.assert_allclose(smc.weight_entropy(jnp.zeros(4)), math.log(4), rtol=1e-6)
    np.testing.assert_allclose(smc.weight_entropy(log([1.0, 0.0, 0.0])), 0.0, atol=1e-7)
    np.testing.assert_allclose(smc.weight_entropy(log([0.5, 0.5, 0.0])), math.log(2), rtol=1e-6)


@pytest.mark.parametrize("weights, offset, ancestors", [
    # positions (u + j) / 4 = 0.025, 0.275, 0.525, 0.775 against the cumulative weights 0.5, 0.75, 1, 1
    ([0.5, 0.25, 0.25, 0.0], 0.1, [0, 0, 1, 2]),
    # 0.125, 0.375, 0.625, 0.875 against 0.1, 0.3, 0.6, 1.0
    ([0.1, 0.2, 0.3, 0.4], 0.5, [1, 2, 3, 3]),
    # uniform weights: every particle once, whatever the offset
    ([0.25, 0.25, 0.25, 0.25], 0.99, [0, 1, 2, 3]),
    # one particle holding everything: it is every ancestor
    ([0.0, 0.0, 1.0, 0.0], 0.0, [2, 2, 2, 2]),
])
def test_systematic_resampling_by_hand(weights, offset, ancestors):
    np.testing.assert_array_equal(smc.systematic_ancestors(log(weights), jnp.asarray(offset)), ancestors)


def test_systematic_resampling_draws_each_particle_floor_or_ceiling_of_n_times_its_weight():
    weights = np.asarray([0.05, 0.4, 0.3, 0.15, 0.1])
    for seed in range(50):
        ancestors = np.asarray(smc.systematic_resample(jax.random.PRNGKey(seed), log(weights)))
        counts = np.bincount(ancestors, minlength=5)
        assert counts.sum() == 5
        assert np.all(counts >= np.floor(5 * weights)) and np.all(counts <= np.ceil(5 * weights)), counts


# ------------------------------------------------------------------------------------------------- the plan
# A toy env: AlphaZero's tests' walk on the integers, here with two actions (+0, +1), each rewarding its own size;
# the episode ends when the position reaches `end_at` (terminating or truncating, as asked). Its observation is the
# position.


class Walk(IllegalThirdAction):
    def __init__(self, end_at: int = 100, terminates: bool = False):
        super().__init__(num_actions=2, legal=(True, True))
        self._end_at, self._terminates = end_at, terminates

    def step(self, state: WalkState, action):
        state = WalkState(state.position + action, state.time + 1)
        ended = state.position >= self._end_at
        return state, transition(action.astype(jnp.float32), ended & self._terminates, ended & ~self._terminates,
                                 self._observation(state))


GAMMA = 0.9


def networks(logits, value_is_position: bool) -> PolicyAndValue:
    """A stand-in policy with fixed `logits` and V(s) = the position (or 0)."""

    def policy(params, observation: Observation):
        return MaskedCategorical(jnp.broadcast_to(jnp.asarray(logits, jnp.float32), observation.action_mask.shape),
                                 observation.action_mask)

    def value(params, observation: Observation):
        position = observation.agent_view[..., 0]
        return position if value_is_position else jnp.zeros_like(position)

    return PolicyAndValue(policy=policy, value=value)


def plan_walk(env: Environment, logits, value_is_position=False, num_particles=16, search_depth=1,
              resample_period=100, temperature=1.0, batch=2):
    system = OmegaConf.create(dict(num_particles=num_particles, search_depth=search_depth,
                                   resample_period=resample_period, advantage_temperature=temperature,
                                   gamma=GAMMA))
    train_env = AutoReset(EpisodeMetrics(env))
    env_state, timestep = VmapWrapper(train_env).reset(jax.random.split(jax.random.PRNGKey(0), batch))
    plan = spo.smc_planner(train_env, networks(logits, value_is_position), system)
    return jax.jit(plan)(None, jax.random.PRNGKey(1), env_state, timestep)


def test_one_step_weighs_each_particle_by_its_td_error_over_the_temperature():
    # V = 0, one step: log w_i = r_i / η = a_i / 2, so the weights are softmax(first actions / 2)
    action, env_action, recorded = plan_walk(Walk(), logits=[0.0, 0.0], temperature=2.0)
    first_actions, weights = recorded["policy_target"]
    assert first_actions.shape == weights.shape == (2, 16)
    assert len(np.unique(np.asarray(first_actions))) == 2  # the uniform policy drew both actions
    np.testing.assert_allclose(weights, jax.nn.softmax(first_actions / 2.0, axis=-1), rtol=1e-6)
    np.testing.assert_array_equal(action, env_action)  # a discrete action is its own env action
    for row in range(2):
        assert int(action[row]) in set(np.asarray(first_actions[row]).tolist())


def test_a_resampled_particle_keeps_its_ancestor_s_first_action():
    # a cold temperature makes the first step's +1 particles hold all the weight; resampled after it, every
    # particle descends from one of them, whatever it does at the second step
    _, _, recorded = plan_walk(Walk(), logits=[0.0, 0.0], search_depth=2, resample_period=1, temperature=0.01)
    first_actions, _ = recorded["policy_target"]
    np.testing.assert_array_equal(first_actions, np.ones((2, 16)))
    # without resampling the first actions stay as drawn, both kinds
    _, _, recorded = plan_walk(Walk(), logits=[0.0, 0.0], search_depth=2, resample_period=2, temperature=0.01)
    assert len(np.unique(np.asarray(recorded["policy_target"][0]))) == 2


@pytest.mark.parametrize("terminates, smc_return", [
    # always +1, the episode ending at position 2, V(s) = position: r + γ·r + γ²·V(2) at the truncation, then
    # nothing of the auto-reset's next episode
    (False, 1 + GAMMA + GAMMA ** 2 * 2),
    # a termination bootstraps nothing
    (True, 1 + GAMMA),
])
def test_a_particle_stops_where_its_episode_ends(terminates, smc_return):
    sure = [-30.0, 30.0]  # +1 always
    _, _, recorded = plan_walk(Walk(end_at=2, terminates=terminates), logits=sure, value_is_position=True,
                               search_depth=4)
    statistics = recorded["statistics"]
    assert set(statistics) == set(spo.SMC_STATISTICS)
    np.testing.assert_allclose(statistics["smc_value_minus_network_value"], [smc_return] * 2, rtol=1e-5)
    np.testing.assert_array_equal(statistics["particles_alive"], [0.0, 0.0])
    # every particle did the same: uniform weights
    np.testing.assert_allclose(statistics["effective_sample_size"], [16.0, 16.0], rtol=1e-5)
    np.testing.assert_allclose(recorded["search_value"], [0.0, 0.0])  # the critic's root value: V(0)


# ------------------------------------------------------------------------------------------ bad input, and runs


@pytest.mark.parametrize("override", ["system.num_particles=0", "system.search_depth=0", "system.resample_period=0",
                                      "system.advantage_temperature=0"])
def test_bad_plan_settings_are_refused_before_anything_compiles(compose, override):
    with pytest.raises(ConfigError, match=override):
        validation.validate(compose("spo", [override]))


SHORT = ["arch.total_timesteps=2048", "arch.num_evaluation=2", "arch.total_num_envs=4", "arch.num_eval_episodes=2",
         "system.num_particles=4", "system.search_depth=3", "system.epochs=1", "system.num_minibatches=2"]


@pytest.mark.parametrize("env", ["gymnax/cartpole", "gymnax/pendulum"])
def test_a_short_run_runs_with_either_action_kind(compose, env):
    assert np.isfinite(spo.run_experiment(compose("spo", [f"env={env}", *SHORT])))


# The shipped CartPole budget (config/spo.yaml: 102,400 steps) takes ~170 s for 8 seeds on 2 cores, beyond the CI
# budget, so CI checks a smaller claim that can still fail: a fifth of the steps lift 4 seeds far above a random
# policy's ~22. The target itself (IQM >= 475, at most one seed below 400) is measured by
# `benchmarks/learning_table.py --algorithms spo`, its figures in config/spo.yaml.
# Measured: IQM 430.6 [95% CI 254.5, 500.0] over seeds 0..3 (500.0, 254.5, 361.2, 500.0); the test took 80 s and
# 86 s on 2 cores shared with other jobs (40 s of it compiling, 21 s learning), above the ~70 s aimed at.
# The reduced budget, 20,480 steps (5 evaluations x 8 updates x 32 steps x 16 envs),
# and its bar are declared in learning_targets.COVERAGE, which README's table prints.


@pytest.mark.learning
@pytest.mark.slow
def test_spo_learns_cartpole(compose):
    assert_population_clears(compose, "spo")
