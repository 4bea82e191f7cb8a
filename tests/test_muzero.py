"""MuZero (stoix_like/systems/search/muzero.py): the learnt model's search step, the unroll's targets, bad input,
and the shipped defaults learning CartPole on a population of seeds.

The model's rewards and values are read back through h⁻¹ of the two-hot expectation; the K-step unroll's targets
are absorbing past a termination, untrained past a truncation and masked for the policy past either; a truncation's
return bootstraps from its true successor, a termination's does not.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_population_clears
from omegaconf import OmegaConf

from stoix_like.config import validation
from stoix_like.errors import ConfigError
from stoix_like.networks.muzero import MuZeroNetwork, min_max_normalize
from stoix_like.networks.torsos import MLPTorso
from stoix_like.ops.returns import n_step_returns
from stoix_like.ops.value_support import inverse_value_transform, scalar_to_two_hot, value_transform
from stoix_like.systems.search import mcts, muzero
from stoix_like.types import Observation

SUPPORT = jnp.linspace(-10.0, 10.0, 21)
GAMMA = 0.9


def logits_of(scalar: float) -> jnp.ndarray:
    """Logits whose softmax is the two-hot of h(scalar): what a perfectly trained head outputs."""
    return jnp.log(scalar_to_two_hot(value_transform(jnp.asarray(scalar, jnp.float32)), SUPPORT) + 1e-30)


def test_a_scalar_survives_the_two_hot_and_h_round_trip():
    for scalar in (0.0, 1.0, -3.5, 37.0, 99.0):
        assert float(muzero.scalar_of(logits_of(scalar), SUPPORT)) == pytest.approx(scalar, rel=1e-4, abs=1e-4)
    np.testing.assert_allclose(muzero.two_hot_of(jnp.asarray([3.0]), SUPPORT).sum(-1), [1.0], rtol=1e-6)


class HandModel:
    """A stand-in model: the latent counts actions (latent + action + 1), the reward is that action + 1, the
    value the latent's first entry, the prior uniform."""

    @staticmethod
    def dynamics(params, latent, action):
        del params
        return latent + (action + 1.0)[:, None], jnp.stack([logits_of(float(a) + 1.0) for a in range(3)])[action]

    @staticmethod
    def predict(params, latent):
        del params
        values = jnp.array([logits_of(v) for v in range(16)])
        return jnp.zeros(latent.shape[:1] + (3,)), values[latent[:, 0].astype(jnp.int32)]


def test_the_learned_model_s_step_reads_reward_and_value_back_through_h_inverse():
    model = muzero.Model(represent=None, dynamics=HandModel.dynamics, predict=HandModel.predict)
    recurrent_fn = muzero.learned_model(model, SUPPORT, GAMMA)
    embedding = muzero.LatentEmbedding(latent=jnp.array([[0.0, 0.0], [4.0, 4.0]]),
                                       action_mask=jnp.array([[True, False, True], [True, True, False]]))
    output, next_embedding = recurrent_fn(None, jax.random.PRNGKey(0), jnp.array([2, 0]), embedding)
    np.testing.assert_allclose(next_embedding.latent, [[3.0, 3.0], [5.0, 5.0]])
    np.testing.assert_allclose(output.reward, [3.0, 1.0], atol=1e-4)
    np.testing.assert_allclose(output.value, [3.0, 5.0], atol=1e-4)
    np.testing.assert_allclose(output.discount, [GAMMA, GAMMA])  # the model predicts no episode end
    assert output.prior_logits.shape == (2, 3)
    assert bool(jnp.all(next_embedding.action_mask))  # below the root every action is legal


def test_the_network_s_latents_are_min_max_normalised():
    network = MuZeroNetwork(MLPTorso([8]), MLPTorso([8]), MLPTorso([8]), latent_size=6, num_actions=2,
                            num_atoms=21)
    observation = Observation(agent_view=jnp.ones((5, 4)), action_mask=jnp.ones((5, 2), bool),
                              step_count=jnp.zeros((5,), jnp.int32))
    params = network.init(jax.random.PRNGKey(0), observation, jnp.zeros((5,), jnp.int32))
    model = muzero.model_of(network)
    latent = model.represent(params, observation)
    next_latent, reward_logits = model.dynamics(params, latent, jnp.ones((5,), jnp.int32))
    policy_logits, value_logits = model.predict(params, next_latent)
    for state in (latent, next_latent):
        assert state.shape == (5, 6)
        np.testing.assert_allclose(state.min(-1), 0.0, atol=1e-6)
        np.testing.assert_allclose(state.max(-1), 1.0, atol=1e-6)
    assert reward_logits.shape == value_logits.shape == (5, 21) and policy_logits.shape == (5, 2)
    # the zero-initialised heads predict the support's middle, 0
    np.testing.assert_allclose(muzero.scalar_of(value_logits, SUPPORT), 0.0, atol=1e-6)
    np.testing.assert_allclose(min_max_normalize(jnp.array([[2.0, 4.0, 3.0]])), [[0.0, 1.0, 0.5]])


def column(*values):
    return jnp.asarray(values, jnp.float32)[:, None]


def test_unroll_targets_are_absorbing_past_a_termination():
    # K = 3; the episode terminates at step 1: positions 2 and 3 are past it
    returns, rewards = column(5, 6, 7, 8, 9), column(1, 2, 3, 4, 5)
    discounts, last = column(1, 0, 1, 1, 1), column(0, 1, 0, 0, 0)
    policies = jnp.full((5, 1, 2), 0.5)
    targets = muzero.unroll_targets(returns, rewards, discounts, last, policies, unroll_steps=3)
    np.testing.assert_allclose(targets.value[:, 0], [5, 6, 0, 0])
    np.testing.assert_allclose(targets.value_weight[:, 0], [1, 1, 1, 1])
    np.testing.assert_allclose(targets.reward[:, 0], [1, 2, 0])  # the terminating step's own reward is real
    np.testing.assert_allclose(targets.reward_weight[:, 0], [1, 1, 1])
    np.testing.assert_allclose(targets.policy_weight[:, 0], [1, 1, 0, 0])
    assert targets.policy.shape == (4, 1, 2)


def test_unroll_targets_are_untrained_past_a_truncation_and_only_the_first_end_counts():
    # the first episode is truncated at step 0; the next one terminates at step 1: nothing past step 0 is known
    returns, rewards = column(5, 6, 7, 8), column(1, 2, 3, 4)
    discounts, last = column(1, 0, 1, 1), column(1, 1, 0, 0)
    targets = muzero.unroll_targets(returns, rewards, discounts, last, jnp.full((4, 1, 2), 0.5), unroll_steps=3)
    np.testing.assert_allclose(targets.value[:, 0], [5, 0, 0, 0])
    np.testing.assert_allclose(targets.value_weight[:, 0], [1, 0, 0, 0])
    np.testing.assert_allclose(targets.reward_weight[:, 0], [1, 0, 0])
    np.testing.assert_allclose(targets.policy_weight[:, 0], [1, 0, 0, 0])


def test_a_truncation_bootstraps_from_its_successor_and_a_termination_does_not():
    # three steps of reward 1; search values 10, 20, 30 acted with; the network values the true successors 100,
    # 200, 300. Sequence a: step 1 truncates. Sequence b: step 1 terminates.
    search_values = jnp.array([[10.0, 10.0], [20.0, 20.0], [30.0, 30.0]])
    successor_values = jnp.array([[100.0, 100.0], [200.0, 200.0], [300.0, 300.0]])
    last = jnp.array([[False, False], [True, True], [False, False]])
    discounts = jnp.array([[1.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    bootstraps = mcts.bootstrap_values(search_values, successor_values, last)
    np.testing.assert_allclose(bootstraps[:, 0], [20.0, 200.0, 300.0])  # the next search; the successor; the end
    returns = n_step_returns(jnp.ones((3, 2)), discounts, last, bootstraps, n_step=2, gamma=GAMMA)
    np.testing.assert_allclose(returns[:, 0], [1 + GAMMA * (1 + GAMMA * 200.0), 1 + GAMMA * 200.0, 1 + GAMMA * 300.0],
                               rtol=1e-6)
    np.testing.assert_allclose(returns[:, 1], [1 + GAMMA * 1, 1.0, 1 + GAMMA * 300.0], rtol=1e-6)


@pytest.mark.parametrize("bootstrap_from", ["search", "network"])
def test_the_unrolled_loss_reads_its_n_step_targets_and_reaches_every_head(bootstrap_from):
    network = MuZeroNetwork(MLPTorso([8]), MLPTorso([8]), MLPTorso([8]), latent_size=4, num_actions=2,
                            num_atoms=21)
    length, batch = 5, 2
    observation = Observation(agent_view=jax.random.normal(jax.random.PRNGKey(1), (length, batch, 3)),
                              action_mask=jnp.ones((length, batch, 2), bool),
                              step_count=jnp.zeros((length, batch), jnp.int32))
    params = network.init(jax.random.PRNGKey(0), jax.tree_util.tree_map(lambda x: x[0], observation),
                          jnp.zeros((batch,), jnp.int32))
    system = OmegaConf.create({"unroll_steps": 2, "n_step": 2, "gamma": GAMMA, "vf_coef": 0.25,
                               "bootstrap_from": bootstrap_from})
    model = muzero.model_of(network)
    loss_fn = muzero.sequence_loss(model, SUPPORT, system)
    searched = muzero.SearchedAction(action=jnp.zeros((length, batch), jnp.int32),
                                     search_policy=jnp.full((length, batch, 2), 0.5),
                                     search_value=jnp.ones((length, batch)), statistics={})
    from stoix_like.learner.replay import Transition

    sequences = Transition(observation=observation, action=searched, reward=jnp.ones((length, batch)),
                           discount=jnp.ones((length, batch)), last=jnp.zeros((length, batch), bool),
                           next_observation=observation)
    loss, metrics = loss_fn(params, sequences)
    assert np.isfinite(float(loss)) and set(metrics) >= {"policy_loss", "value_loss", "reward_loss"}
    # the first value target sums n = 2 rewards of 1, then bootstraps from the search value stored with step 2 (1),
    # or from the network's value now of step 1's successor (here step 1's own observation)
    if bootstrap_from == "search":
        bootstrap = jnp.ones((batch,))
    else:
        successor = jax.tree_util.tree_map(lambda x: x[1], observation)
        bootstrap = muzero.scalar_of(model.predict(params, model.represent(params, successor))[1], SUPPORT)
    expected = float(jnp.mean(1 + GAMMA + GAMMA ** 2 * bootstrap))
    assert float(metrics["value_target"]) == pytest.approx(expected, rel=1e-5)
    grads = jax.grad(lambda p: loss_fn(p, sequences)[0])(params)
    assert float(jnp.abs(grads["params"]["value_head"]["kernel"]).sum()) > 0
    assert float(jnp.abs(grads["params"]["reward_head"]["kernel"]).sum()) > 0


def test_scale_gradient_halves_the_gradient_only():
    value, grad = jax.value_and_grad(lambda x: muzero.scale_gradient(x, 0.5) * 3.0)(2.0)
    assert float(value) == 6.0 and float(grad) == 1.5


# ----------------------------------------------------------------------------------------------------------
# Bad input, and learning
# ----------------------------------------------------------------------------------------------------------


def test_continuous_actions_are_a_config_error(compose):
    config = compose("mz", ["env=gymnax/pendulum"])
    with pytest.raises(ConfigError, match="Pendulum-v1 has continuous actions; mz searches over discrete ones") as error:
        muzero.run_experiment(config)
    assert "\n" not in str(error.value)


def test_a_support_too_small_for_the_env_s_returns_is_refused(compose):
    # h⁻¹(5) ≈ 34.6 < 1 / (1 − 0.99) = 100: CartPole's discounted returns would be clipped to the support
    config = compose("mz", ["system.support_max=5"])
    with pytest.raises(ConfigError, match=r"system.support_max=5.0 reaches returns of ±34.6") as error:
        muzero.run_experiment(config)
    assert "\n" not in str(error.value)
    # the shipped support reaches h⁻¹(10) ≈ 120 > 100, and a smaller γ needs less
    assert float(inverse_value_transform(jnp.asarray(10.0))) > 100.0
    muzero.check_support(compose("mz", ["system.support_max=5", "system.gamma=0.95"]).system)


@pytest.mark.parametrize("override, named", [("system.num_simulations=0", "system.num_simulations=0"),
                                             ("system.unroll_steps=0", "system.unroll_steps=0"),
                                             ("system.num_atoms=1", "system.num_atoms=1"),
                                             ("network.representation_network.latent_size=0",
                                              "network.representation_network.latent_size=0")])
def test_bad_settings_are_refused_before_anything_compiles(compose, override, named):
    with pytest.raises(ConfigError, match=named):
        validation.validate(compose("mz", [override]))


# The shipped budget (config/mz.yaml: 128,256 steps, 32 gradient steps on 64 sequences of 26 steps per update)
# takes ~7 minutes for 4 seeds on a 2-core CPU, beyond the CI budget, so CI checks a smaller honest claim: a fifth
# of the steps lift 4 seeds well clear of a random policy (~22 on CartPole). The target itself (IQM >= 400, at most
# one seed below 400) is measured by `benchmarks/learning_table.py --algorithms mz`, its figures in config/mz.yaml.
# Measured (bootstraps from the network's value): IQM 137.4 [95% CI 116.3, 159.3] over seeds 0..3 (156.0, 116.3,
# 118.8, 159.3), 101 s under load.
# The reduced budget, 25,856 steps (256 warm-up steps + 5 evaluations x 20 updates x 16 steps x 16 envs),
# and its bar are declared in learning_targets.COVERAGE, which README's table prints.


@pytest.mark.learning
@pytest.mark.slow
def test_muzero_learns_cartpole(compose):
    assert_population_clears(compose, "mz")
