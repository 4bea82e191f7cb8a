"""The continuous-control family: SAC, TD3, DDPG, D4PG.

Unit checks (hand-worked numbers, never the function under test as the reference) of the squashed-Gaussian
density, the action rescaling, the critic targets under truncation and termination, and the wrong-action-space
error; then one learning check per algorithm on gymnax Pendulum-v1: the shipped default, a population of seeds, and
a smoke run of SAC's entry point on brax/ant (the others' learners meet brax in test_brax_smoke.py).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_population_learns, unoptimized_xla

from stoix_like.learner import replay
from stoix_like.envs.environment import ContinuousActionSpace
from stoix_like.errors import ConfigError
from stoix_like.networks.factory import build_actor
from stoix_like.ops import losses
from stoix_like import systems
from stoix_like.systems import off_policy
from stoix_like.systems.actor_critic import deterministic_policy_gradient
from stoix_like.systems.actor_critic import sac
from stoix_like.systems.actor_critic import td3
from stoix_like.systems.actor_critic.sac import SACParams
from stoix_like.types import ActorCriticParams, Observation, OnlineAndTarget

ALGORITHMS = ["sac", "td3", "ddpg", "d4pg"]
PENDULUM_BOX = ContinuousActionSpace(low=np.full((1,), -2.0, np.float32), high=np.full((1,), 2.0, np.float32))


def observations(views) -> Observation:
    views = jnp.asarray(views, jnp.float32)
    return Observation(views, jnp.ones(views.shape[:1] + (1,), bool), jnp.zeros(views.shape[:1], jnp.int32))


def gaussian_log_density(x, mean, std):
    return -0.5 * ((x - mean) / std) ** 2 - np.log(std) - 0.5 * np.log(2.0 * np.pi)


# ----------------------------------------------------------------------------------------------------
# The squashed Gaussian actor
# ----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sac_actor():
    from conftest import compose_config

    config = compose_config("sac", ["network.actor_network.pre_torso.layer_sizes=[16]"])
    box = ContinuousActionSpace(low=np.asarray([-2.0, 0.0], np.float32), high=np.asarray([2.0, 1.0], np.float32))
    actor = build_actor(config.network, box)
    # large output weights so that the means and scales differ from their near-zero initial values
    params = actor.init(jax.random.PRNGKey(0), observations(np.zeros((1, 3))))
    params = jax.tree_util.tree_map(lambda x: x * 30.0, params)
    return actor, params, box


def test_sac_actor_log_prob_matches_direct_density(sac_actor):
    actor, params, _ = sac_actor
    observation = observations(np.random.default_rng(0).normal(size=(64, 3)))
    policy = actor.apply(params, observation)
    action, log_prob = sac.sample_action_and_log_prob(policy, jax.random.PRNGKey(1))

    # change of variables a = tanh(u): p(a) = N(atanh(a); mean, std) / (1 - a²), per dimension, in float64
    a = np.asarray(action, np.float64)
    assert np.all(np.abs(a) <= 1.0)
    keep = np.all(np.abs(a) < 0.999, axis=-1)  # atanh loses all precision near ±1 in a float32 action
    assert keep.sum() > 32
    a, mean, std = a[keep], np.asarray(policy.loc, np.float64)[keep], np.asarray(policy.scale, np.float64)[keep]
    direct = np.sum(gaussian_log_density(np.arctanh(a), mean, std) - np.log1p(-a**2), axis=-1)
    np.testing.assert_allclose(np.asarray(log_prob)[keep], direct, rtol=1e-4, atol=1e-3)


def test_squashed_gaussian_density_integrates_to_one():
    """The tanh correction has the right sign: the density over the action interval has mass 1."""
    from stoix_like.networks.distributions import TanhGaussian

    actions = np.linspace(-1.0, 1.0, 200_001)[1:-1]
    policy = TanhGaussian(jnp.full((actions.size, 1), 0.7), jnp.full((actions.size, 1), 1.3), -1.0, 1.0)
    density = np.exp(np.asarray(policy.log_prob(jnp.asarray(np.arctanh(actions)[:, None], jnp.float32)), np.float64))
    assert abs(np.trapezoid(density, actions) - 1.0) < 2e-3


def test_sac_stores_the_normalised_action_and_steps_the_env_with_the_rescaled_one(sac_actor):
    actor, params, _ = sac_actor
    act = sac.make_act(actor.apply)
    sac_params = SACParams(params, None, jnp.zeros(()))
    stored, env_action = act(sac_params, observations(np.ones((256, 3))), jax.random.PRNGKey(2), jnp.asarray(0))
    stored, env_action = np.asarray(stored), np.asarray(env_action)
    assert np.all(np.abs(stored) <= 1.0)
    np.testing.assert_allclose(env_action[:, 0], 2.0 * stored[:, 0], rtol=1e-5, atol=1e-6)  # [-1, 1] -> [-2, 2]
    np.testing.assert_allclose(env_action[:, 1], 0.5 * (stored[:, 1] + 1.0), rtol=1e-5, atol=1e-6)  # -> [0, 1]


def test_deterministic_actor_acts_uniformly_in_warmup_then_with_noise_around_its_action():
    from conftest import compose_config

    config = compose_config("td3", ["network.actor_network.pre_torso.layer_sizes=[8]"])
    actor = build_actor(config.network, PENDULUM_BOX)
    actor_params = actor.init(jax.random.PRNGKey(0), observations(np.zeros((1, 3))))
    params = ActorCriticParams(OnlineAndTarget(actor_params, actor_params), None)
    act = deterministic_policy_gradient.make_act(actor.apply, config.system, warmup_steps=100)
    observation = observations(np.ones((4096, 3)))
    policy_action = np.asarray(actor.apply(actor_params, observation).mode())

    warmup_stored, warmup_env = act(params, observation, jax.random.PRNGKey(1), jnp.asarray(99))
    assert abs(float(np.std(warmup_stored)) - 1.0 / math.sqrt(3.0)) < 0.02  # uniform on [-1, 1]
    np.testing.assert_allclose(np.asarray(warmup_env), 2.0 * np.asarray(warmup_stored), rtol=1e-5, atol=1e-6)

    stored, env_action = act(params, observation, jax.random.PRNGKey(1), jnp.asarray(100))
    noise = np.asarray(stored) - policy_action
    assert abs(float(np.std(noise)) - float(config.system.exploration_noise)) < 0.01
    np.testing.assert_allclose(np.asarray(env_action), 2.0 * np.asarray(stored), rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------------------------------
# Critic targets: truncation keeps the bootstrap, termination drops it
# ----------------------------------------------------------------------------------------------------


def sequence(rewards, discounts, lasts, next_views) -> replay.Transition:
    """One sampled sequence (batch of 1, n steps) of 1-D observations."""
    n = len(rewards)
    return replay.Transition(
        observation=observations(np.zeros((n, 1)))._replace(step_count=jnp.zeros((n,), jnp.int32)),
        action=jnp.zeros((n, 1)),
        reward=jnp.asarray(rewards, jnp.float32),
        discount=jnp.asarray(discounts, jnp.float32),
        last=jnp.asarray(lasts),
        next_observation=observations(np.asarray(next_views, np.float32)[:, None]),
    )


def batch_of(*sequences) -> replay.Transition:
    return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *sequences)


def two_critics(params, observation, action):
    """Q_c(s, a) = (c + 1) · s, for critics c = 0, 1: the min over critics of a negative s is 2s."""
    del params, action
    return jnp.stack([observation.agent_view[:, 0], 2.0 * observation.agent_view[:, 0]])


@pytest.mark.parametrize("n_step", [1, 3])
def test_td3_critic_target_bootstraps_through_truncation_but_not_termination(n_step):
    gamma = 0.9
    pad = n_step - 1  # steps after the episode end belong to the next episode and must be ignored
    truncated = sequence([1.0] + [100.0] * pad, [1.0] + [1.0] * pad, [True] + [False] * pad, [-5.0] + [7.0] * pad)
    terminated = sequence([1.0] + [100.0] * pad, [0.0] + [1.0] * pad, [True] + [False] * pad, [-5.0] + [7.0] * pad)
    ongoing = sequence([1.0] * n_step, [1.0] * n_step, [False] * n_step, [-3.0] * n_step)
    batch = replay.n_step_transition(batch_of(truncated, terminated, ongoing), gamma)

    np.testing.assert_allclose(np.asarray(batch.discount), [gamma, 0.0, gamma**n_step], rtol=1e-6)
    target = td3.critic_target(two_critics, None, batch, batch.action)
    ongoing_reward = sum(gamma**k for k in range(n_step))
    # truncated: r + γ · min_c Q_c(next_obs) = 1 + 0.9 · (2 · -5) = -8
    np.testing.assert_allclose(np.asarray(target), [1.0 + gamma * -10.0, 1.0, ongoing_reward + gamma**n_step * -6.0],
                               rtol=1e-6)


def test_clipped_double_q_target_by_hand():
    q_t = jnp.asarray([[1.0, 5.0, -2.0], [3.0, 2.0, -4.0]])
    r_t = jnp.asarray([1.0, 1.0, 0.0])
    discount_t = jnp.asarray([0.9, 0.0, 0.5])
    np.testing.assert_allclose(losses.clipped_double_q_target(r_t, discount_t, q_t), [1.9, 1.0, -2.0], rtol=1e-6)
    penalty = jnp.asarray([0.5, 0.5, -1.0])  # SAC's α·log π(a'|s'), subtracted from the next value
    np.testing.assert_allclose(losses.clipped_double_q_target(r_t, discount_t, q_t, penalty), [1.45, 1.0, -1.5],
                               rtol=1e-6)


def test_a_saturated_deterministic_actor_gets_its_gradient_back_only_inward():
    """tanh_returning_inward: tanh forward; backward, a gradient that moves the action back inside the box passes
    undamped, one that pushes it further out is damped by tanh's slope, as plain tanh damps every gradient."""
    from stoix_like.networks.heads import tanh_returning_inward

    x = jnp.asarray([-40.0, -40.0, 0.5, 40.0])
    np.testing.assert_array_equal(tanh_returning_inward(x), jnp.tanh(x))
    # the loss's gradient on y = tanh(x) is `cotangent`; a descent step moves y by -cotangent
    cotangent = jnp.asarray([-1.0, 1.0, -1.0, 2.0])  # inward, outward, outward from the interior, inward
    _, pullback = jax.vjp(tanh_returning_inward, x)
    (grad,) = pullback(cotangent)
    slope = 1.0 - jnp.tanh(x) ** 2
    np.testing.assert_allclose(grad, [-1.0, 1.0 * slope[1], -1.0 * slope[2], 2.0], rtol=1e-6)
    (interior_inward,) = pullback(jnp.asarray([0.0, 0.0, 1.0, 0.0]))
    assert float(interior_inward[2]) == 1.0  # inward is inward anywhere: towards 0, as through the identity
    assert float(jax.grad(lambda v: jnp.sum(jnp.tanh(v) * cotangent))(x)[0]) == 0.0  # plain tanh: nothing comes back


def test_categorical_td_learning_loss_by_hand():
    atoms = jnp.asarray([0.0, 1.0, 2.0])
    logits_tm1 = jnp.log(jnp.asarray([[0.2, 0.5, 0.3], [0.2, 0.5, 0.3]]))
    certain_at_one = jnp.asarray([[-1e4, 0.0, -1e4]] * 2)  # Z_target(s_t) = 1 surely
    # truncated (discount kept): support 0.5 + 0.5 · atoms = [0.5, 1, 1.5], all mass at 1 -> atom 1
    # terminated (discount 0):  support [0.5, 0.5, 0.5], mass at 0.5 -> half to atom 0, half to atom 1
    loss = losses.categorical_td_learning_loss(logits_tm1, atoms, jnp.asarray([0.5, 0.5]), jnp.asarray([0.5, 0.0]),
                                               certain_at_one)
    np.testing.assert_allclose(loss, [-math.log(0.5), -(0.5 * math.log(0.2) + 0.5 * math.log(0.5))], rtol=1e-5)


# ----------------------------------------------------------------------------------------------------
# Bad input and the replay ratio line
# ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_discrete_actions_are_a_config_error(algorithm, compose):
    config = compose(algorithm, ["env=gymnax/cartpole"])
    system = systems.system_module(algorithm)
    with pytest.raises(ConfigError, match="CartPole-v1 has discrete actions; .* needs continuous ones"):
        system.run_experiment(config)


def test_replay_ratio_line(compose):
    from stoix_like.learner import budget as budget_lib

    config = compose("sac", ["arch.total_num_envs=16", "system.rollout_length=2", "system.gradient_steps_per_update=4",
                             "system.total_batch_size=256"])
    budget = budget_lib.make_budget(config)
    line = off_policy.replay_ratio_line(config.system, budget, replay.n_step_batches(config.system))
    assert "4 gradient steps on 1024 sampled transitions per 32 env steps" in line
    assert "0.125 gradient steps and 32 sampled transitions per env step" in line


@pytest.mark.parametrize("scale, target", [(None, -1.0), (0.5, -0.5)])
def test_sac_s_temperature_aims_at_the_configured_entropy(compose, monkeypatch, scale, target):
    """Pendulum has one action dimension: the default aims at the SAC paper's −|A|, and
    `system.target_entropy_scale=0.5` at brax's −|A|/2."""
    import stoix_like.envs as envs_lib
    from stoix_like.learner import budget as budget_lib

    aimed_at = []
    build = sac.make_learn_from_batch

    def recording(*args, target_entropy, **kwargs):
        aimed_at.append(target_entropy)
        return build(*args, target_entropy=target_entropy, **kwargs)

    monkeypatch.setattr(sac, "make_learn_from_batch", recording)
    config = compose("sac", ["arch.total_num_envs=2", "arch.total_timesteps=50328", "system.total_buffer_size=256"]
                     + ([] if scale is None else [f"system.target_entropy_scale={scale}"]))
    sac.learner_setup(envs_lib.make(config.env)[0], jax.random.PRNGKey(0), config, budget_lib.make_budget(config))
    assert aimed_at == [target]


# ----------------------------------------------------------------------------------------------------
# Learning: each shipped default (gymnax Pendulum-v1, 50,304 steps) as a population of seeds in one program
# must meet its target in stoix_like/claims/learning_targets.py: an IQM bar and at most one seed below a floor.
# (td3's is re-measured by the learning table's benchmark, moved out of CI for its time: learning_targets.COVERAGE)
# ----------------------------------------------------------------------------------------------------

@pytest.mark.learning
def test_sac_learns_pendulum(compose):
    assert_population_learns(compose, "sac")


@pytest.mark.learning
def test_ddpg_learns_pendulum(compose):
    assert_population_learns(compose, "ddpg")


@pytest.mark.learning
def test_d4pg_learns_pendulum(compose):
    assert_population_learns(compose, "d4pg")


# ----------------------------------------------------------------------------------------------------
# Brax: the real entry points on brax/ant, tiny everything (brax compiles slowly on a CPU)
# ----------------------------------------------------------------------------------------------------

TINY_OFF_POLICY_BRAX_RUN = [
    "env.max_episode_steps=16", "arch.total_num_envs=2", "arch.num_evaluation=1", "arch.num_eval_episodes=2",
    "system.rollout_length=4", "system.warmup_rollout_length=0", "arch.total_timesteps=16",
    "system.gradient_steps_per_update=1", "system.total_buffer_size=64",
]

BRAX_SMOKE = [
    "env=brax/ant", *TINY_OFF_POLICY_BRAX_RUN, "system.total_batch_size=8",
    "network.actor_network.pre_torso.layer_sizes=[16]", "network.q_network.pre_torso.layer_sizes=[16]",
]


def test_sac_runs_on_brax_ant(python_subprocess, tmp_path):
    # the family's one entry-point run on brax, evaluation included; TD3's, DDPG's and D4PG's learners meet brax in
    # test_brax_smoke.py, compiled in one process without the ~70 CPU-seconds an entry point's evaluator costs
    result = python_subprocess(["-m", "experiments.sac", *BRAX_SMOKE], cwd=tmp_path, env=unoptimized_xla())
    assert result.returncode == 0, result.stderr[-3000:]
    assert "replay ratio:" in result.stdout
    assert "[absolute]" in result.stdout and "done: 16 steps" in result.stdout, result.stdout[-3000:]


