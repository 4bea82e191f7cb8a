"""AWR (stoix_like/systems/actor_critic/awr.py): its weights and loss by hand, TD(λ) over a replayed sequence at
truncations and terminations, the fixed point of its weighted regression for both action kinds, bad input refused
before compiling; then the learning populations (CartPole-v1 and Pendulum-v1 shipped defaults) and brax smoke runs.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_population_learns

from stoix_like.config import validation
from stoix_like.learner import budget as budget_lib
from stoix_like.runtime import parallel
from stoix_like.learner import replay
from stoix_like.envs.environment import ContinuousActionSpace, DiscreteActionSpace
from stoix_like.errors import ConfigError
from stoix_like.networks.factory import build_actor, build_critic
from stoix_like.ops import losses
from stoix_like.learner.optim import make_optimizer
from stoix_like.systems.actor_critic import awr
from stoix_like.types import ActorCriticOptStates, ActorCriticParams, ActorCriticUpdateFns, Observation

# ----------------------------------------------------------------------------------------------------
# The weights and the loss, by hand
# ----------------------------------------------------------------------------------------------------


def test_advantage_weights_exponentiate_and_clip():
    advantages = jnp.asarray([0.0, 1.0, -1.0, 10.0])
    # β = 0.5: exp(0) = 1, exp(2), exp(-2), and exp(20) clipped to w_max = 20
    weights = losses.advantage_weights(advantages, temperature=0.5, max_weight=20.0)
    np.testing.assert_allclose(weights, [1.0, math.exp(2.0), math.exp(-2.0), 20.0], rtol=1e-6)


def test_advantage_weights_standardise_over_the_batch_first():
    # mean 2, std 1: standardised advantages -1 and 1 (up to the 1e-5 in the denominator), whatever their scale
    weights = losses.advantage_weights(jnp.asarray([1.0, 3.0]), temperature=1.0, max_weight=20.0, standardize=True)
    np.testing.assert_allclose(weights, [math.exp(-1.0), math.exp(1.0)], rtol=1e-4)
    scaled = losses.advantage_weights(jnp.asarray([100.0, 300.0]), temperature=1.0, max_weight=20.0, standardize=True)
    np.testing.assert_allclose(scaled, weights, rtol=1e-4)


def test_weighted_log_likelihood_loss_by_hand_and_its_gradient_reaches_only_the_log_prob():
    log_prob, weights = jnp.asarray([-1.0, -2.0]), jnp.asarray([3.0, 0.5])
    # -(3 · -1 + 0.5 · -2) / 2 = 2
    np.testing.assert_allclose(losses.weighted_log_likelihood_loss(log_prob, weights), 2.0, rtol=1e-6)
    grad_log_prob, grad_weights = jax.grad(losses.weighted_log_likelihood_loss, argnums=(0, 1))(log_prob, weights)
    np.testing.assert_allclose(grad_log_prob, [-1.5, -0.25], rtol=1e-6)
    np.testing.assert_allclose(grad_weights, [0.0, 0.0])


# ----------------------------------------------------------------------------------------------------
# TD(λ) over replayed sequences: time-major, cut at episode ends, bootstrapped at truncations and the end
# ----------------------------------------------------------------------------------------------------


def observations(views, num_actions: int = 2) -> Observation:
    views = jnp.asarray(views, jnp.float32)
    return Observation(views, jnp.ones(views.shape[:-1] + (num_actions,), bool), jnp.zeros(views.shape[:-1], jnp.int32))


def test_sequence_batches_are_the_sampled_sequences_time_major():
    batches = replay.sequence_batches(config_like(sequence_length=3))
    assert (batches.length_key, batches.sequence_length, batches.steps_per_item) == ("system.sequence_length", 3, 3)
    rewards = jnp.arange(6, dtype=jnp.float32).reshape(2, 3)  # (B, L) as sampled: row b is b·3 + t
    sampled = replay.Transition(observations(rewards[..., None]), jnp.zeros((2, 3), jnp.int32), rewards,
                                jnp.ones((2, 3)), jnp.zeros((2, 3), bool), observations(rewards[..., None] + 1.0))
    batch = batches.to_batch(sampled)
    np.testing.assert_array_equal(batch.reward, [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]])
    assert batch.observation.agent_view.shape == (3, 2, 1) and batch.observation.action_mask.shape == (3, 2, 2)


def config_like(**values):
    from omegaconf import OmegaConf

    return OmegaConf.create(values)


def test_td_lambda_targets_stop_at_episode_ends_and_bootstrap_only_truncations():
    # γ = 0.5, λ = 1, rewards 1, 2, 3 and successor values 10, 20, 30 in both columns:
    #   column 0 truncated at t = 0:  G2 = 3 + 0.5·30 = 18, G1 = 2 + 0.5·18 = 11, G0 = 1 + 0.5·10 = 6
    #   column 1 terminated at t = 0: G0 = 1 (nothing follows), G1 and G2 as in column 0
    rewards = jnp.asarray([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])
    sequences = replay.Transition(
        observation=observations(jnp.zeros((3, 2, 1))), action=jnp.zeros((3, 2), jnp.int32), reward=rewards,
        discount=jnp.asarray([[1.0, 0.0], [1.0, 1.0], [1.0, 1.0]]),
        last=jnp.asarray([[True, True], [False, False], [False, False]]),
        next_observation=observations(jnp.zeros((3, 2, 1))))
    next_values = jnp.asarray([[10.0, 10.0], [20.0, 20.0], [30.0, 30.0]])
    targets = awr.sequence_lambda_returns(sequences, next_values, gamma=0.5, gae_lambda=1.0)
    np.testing.assert_allclose(targets, [[6.0, 1.0], [11.0, 11.0], [18.0, 18.0]], rtol=1e-6)
    # λ = 0: one-step targets r + γ·d·V(s')
    one_step = awr.sequence_lambda_returns(sequences, next_values, gamma=0.5, gae_lambda=0.0)
    np.testing.assert_allclose(one_step, [[6.0, 1.0], [12.0, 12.0], [18.0, 18.0]], rtol=1e-6)


# ----------------------------------------------------------------------------------------------------
# The weighted regression's fixed point, for both heads
# ----------------------------------------------------------------------------------------------------

DISCRETE = DiscreteActionSpace(num_actions=2)
PENDULUM_BOX = ContinuousActionSpace(low=np.full((1,), -2.0, np.float32), high=np.full((1,), 2.0, np.float32))


def bandit_sequences(action_space, batch: int = 64) -> replay.Transition:
    """One state; half the replayed actions earn 1 and end the episode, the other half earn 0. Sequences of 1."""
    good = jnp.arange(batch) % 2 == 0
    if isinstance(action_space, DiscreteActionSpace):
        action, num_mask = good.astype(jnp.int32), 2
    else:  # pre-tanh actions +1 (good) and -1, what replay keeps for a tanh-Gaussian
        action, num_mask = jnp.where(good, 1.0, -1.0)[:, None], 1
    observation = observations(jnp.ones((1, batch, 3)), num_mask)
    return replay.Transition(observation=observation, action=action[None], reward=good.astype(jnp.float32)[None],
                             discount=jnp.zeros((1, batch)), last=jnp.ones((1, batch), bool),
                             next_observation=observation)


def trained_on_bandit(action_space, steps: int = 600):
    from conftest import compose_config

    config = compose_config("awr", ["network.actor_network.pre_torso.layer_sizes=[16]",
                                    "network.critic_network.pre_torso.layer_sizes=[16]",
                                    "system.actor_lr=1e-2", "system.critic_lr=1e-2"])
    actor, critic = build_actor(config.network, action_space), build_critic(config.network)
    batch = bandit_sequences(action_space)
    one_observation = jax.tree_util.tree_map(lambda x: x[0, :1], batch.observation)
    params = ActorCriticParams(actor.init(jax.random.PRNGKey(0), one_observation),
                               critic.init(jax.random.PRNGKey(1), one_observation))
    optimizer = make_optimizer(1e-2, 10.0, steps, False)
    opt_states = ActorCriticOptStates(optimizer.init(params.actor), optimizer.init(params.critic))
    learn_from_batch = awr.make_learn_from_batch(actor.apply, critic.apply,
                                                ActorCriticUpdateFns(optimizer.update, optimizer.update), config)

    def train(params, opt_states):
        def step(carry, key):
            update = learn_from_batch(*carry, batch, jnp.ones(64), key, jnp.zeros((), jnp.int32))
            return (update.params, update.opt_states), update.metrics

        return jax.lax.scan(step, (params, opt_states), jax.random.split(jax.random.PRNGKey(2), steps))

    # the learner averages over the "batch" and "device" axes: bind both, of size one
    on_one_slot = jax.vmap(jax.vmap(train, axis_name=parallel.BATCH_AXIS), axis_name=parallel.DEVICE_AXIS)
    add_axes = lambda tree: jax.tree_util.tree_map(lambda x: x[None, None], tree)
    (params, _), metrics = jax.jit(on_one_slot)(add_axes(params), add_axes(opt_states))
    params = jax.tree_util.tree_map(lambda x: x[0, 0], params)
    return actor.apply(params.actor, one_observation), critic.apply(params.critic, one_observation), metrics


def test_discrete_policy_settles_where_the_weights_put_it():
    # Standardised advantages are exactly ±1 (one state, one value): weights e and 1/e, so the weighted
    # maximum-likelihood policy is π(good) = e / (e + 1/e) = 0.881; V regresses on the mean reward 0.5.
    policy, value, _ = trained_on_bandit(DISCRETE)
    probabilities = jax.nn.softmax(policy.logits[0])
    np.testing.assert_allclose(float(probabilities[1]), math.e / (math.e + 1 / math.e), atol=0.005)
    np.testing.assert_allclose(float(value[0]), 0.5, atol=0.005)


def test_tanh_gaussian_policy_fits_the_weighted_pre_tanh_actions():
    # The same weights on pre-tanh actions +1 and -1: the weighted Gaussian fit has mean
    # (e − 1/e) / (e + 1/e) = tanh(1) = 0.762 and variance 1 − tanh(1)² = 0.420 (the tanh Jacobian does not
    # depend on the policy, so replaying the pre-tanh sample makes this an ordinary Gaussian fit).
    policy, _, metrics = trained_on_bandit(PENDULUM_BOX)
    np.testing.assert_allclose(float(policy.loc[0, 0]), math.tanh(1.0), atol=0.005)
    np.testing.assert_allclose(float(policy.scale[0, 0]), math.sqrt(1.0 - math.tanh(1.0) ** 2), atol=0.005)
    assert float(metrics["clipped_weights"][..., -1].max()) == 0.0


def test_acting_replays_the_pre_tanh_sample_and_steps_the_env_with_the_rescaled_squash():
    from conftest import compose_config

    config = compose_config("awr", ["network.actor_network.pre_torso.layer_sizes=[8]"])
    actor = build_actor(config.network, PENDULUM_BOX)
    observation = observations(np.ones((4096, 3)), 1)
    actor_params = jax.tree_util.tree_map(lambda x: 10.0 * x, actor.init(jax.random.PRNGKey(0), observation))
    stored, env_action = awr.make_act(actor.apply)(ActorCriticParams(actor_params, None), observation,
                                                    jax.random.PRNGKey(1), jnp.asarray(0))
    assert float(jnp.max(jnp.abs(stored))) > 1.0  # a pre-tanh sample, not an action in [-1, 1]
    np.testing.assert_allclose(env_action, 2.0 * jnp.tanh(stored), rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------------------------------
# Bad input: one line, before anything compiles
# ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("overrides, named", [
    (["system.sequence_length=41"], "system.sequence_length=41 is longer than system.warmup_rollout_length + "
                                    "system.rollout_length = 40: no full sequence of 41 steps exists"),
    (["system.sequence_length=0"], "system.sequence_length=0"),
    (["system.advantage_temperature=0"], "system.advantage_temperature=0.0 is out of range"),
    (["system.max_advantage_weight=-1"], "system.max_advantage_weight=-1.0 is out of range"),
    (["system.gae_lambda=1.5"], "system.gae_lambda=1.5 is out of range"),
])
def test_bad_input_is_refused_in_one_line(compose, overrides, named):
    with pytest.raises(ConfigError) as error:
        validation.validate(compose("awr", overrides))
    assert named in str(error.value) and "\n" not in str(error.value)


def test_a_sequence_the_buffer_cannot_hold_is_refused(compose):
    # 256 transitions over 16 envs: 16 steps per env, fewer than one sequence of 32
    config = compose("awr", ["system.total_buffer_size=256", "system.total_batch_size=8", "system.sequence_length=32"])
    validation.validate(config)
    with pytest.raises(ConfigError, match=r"\(16 per env\), fewer than .* or system.sequence_length=32; raise "
                                          r"system.total_buffer_size to at least 512"):
        replay.make_buffer(config.system, budget_lib.make_budget(config), replay.sequence_batches(config.system))


def test_a_refused_run_compiles_nothing(python_subprocess, tmp_path):
    result = python_subprocess(["-m", "experiments.awr", "system.sequence_length=100"], cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: system.sequence_length=100 is longer than system.warmup_rollout_length + system.rollout_length = "
        "40: no full sequence of 100 steps exists when learning starts."]
    assert "compiled the learner" not in result.stdout


# ----------------------------------------------------------------------------------------------------
# Learning: the shipped defaults of each task, a population of seeds in one program, must meet its target
# (stoix_like/claims/learning_targets.py). CartPole is the default env; Pendulum's values are config/tuned/awr/gymnax/.
# ----------------------------------------------------------------------------------------------------

@pytest.mark.learning
def test_awr_learns_cartpole(compose):
    assert_population_learns(compose, "awr", env="gymnax/cartpole")


@pytest.mark.learning
def test_awr_learns_pendulum(compose):
    assert_population_learns(compose, "awr", env="gymnax/pendulum")
