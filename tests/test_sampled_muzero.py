"""Sampled MuZero (stoix_like/systems/search/sampled_muzero.py): MuZero's learnt model searched over K actions
drawn from its continuous policy at every node.

The learnt model's step feeds the dynamics each node's own draw and draws afresh at the node it reaches; the stored
step keeps the root's draws and the search's weights, and the unrolled policy loss is −Σ_k w_k log π(a_k|latent);
bad input is refused before anything compiles; a short run runs; and a CI population learns Pendulum.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stoix_like.config import validation
from stoix_like.envs.environment import ContinuousActionSpace
from stoix_like.errors import ConfigError
from stoix_like.networks.distributions import TanhGaussian
from stoix_like.networks.heads import TanhGaussianHead
from stoix_like.networks.muzero import MuZeroNetwork
from stoix_like.networks.torsos import MLPTorso
from stoix_like.systems.search import muzero, sampled_alphazero, sampled_muzero
from stoix_like.types import Observation

SUPPORT = jnp.linspace(-15.0, 15.0, 31)
GAMMA = 0.9
K = 5
BOX = ContinuousActionSpace(low=np.asarray([-2.0], np.float32), high=np.asarray([2.0], np.float32))


class RecordingModel:
    """A stand-in model with a one-feature latent: the dynamics adds the action it is fed to the latent (so the
    next latent says which action the step was fed), the reward and value are 0, the policy the same everywhere."""

    @staticmethod
    def dynamics(params, latent, action):
        del params
        return latent + action, jnp.zeros(latent.shape[:1] + SUPPORT.shape)

    @staticmethod
    def predict(params, latent):
        del params
        batch = latent.shape[:1]
        return (jnp.full(batch + (1,), 0.2), jnp.full(batch + (1,), 0.7)), jnp.zeros(batch + SUPPORT.shape)


def test_the_learned_model_steps_each_node_with_its_own_draw_and_draws_afresh_below_it():
    searched = sampled_muzero.sampled_actions_of(K, BOX)
    model = muzero.Model(represent=None, dynamics=RecordingModel.dynamics, predict=RecordingModel.predict)
    recurrent_fn = muzero.learned_model(model, SUPPORT, GAMMA, searched)
    policy, _ = RecordingModel.predict(None, jnp.zeros((3, 1)))
    root = searched.expand(policy, jnp.zeros(3), None, jax.random.PRNGKey(1))
    draws = root.actions
    assert draws.shape == (3, K, 1)
    assert len(np.unique(np.asarray(draws))) == 3 * K  # every node its own draws
    # drawn from the policy itself (β = π), distinct: the corrected prior is uniform over the draws
    np.testing.assert_allclose(np.exp(np.asarray(root.prior_logits)), np.full((3, K), 1 / K), atol=1e-6)
    embedding = muzero.LatentEmbedding(latent=jnp.asarray([[0.0], [10.0], [20.0]]), action_mask=root.action_mask,
                                       actions=draws)
    chosen = jnp.asarray([0, 3, 4])
    output, child = recurrent_fn(None, jax.random.PRNGKey(2), chosen, embedding)
    # search action k fed the dynamics the node's k-th draw, squashed into [-1, 1]
    fed = np.tanh(np.asarray(draws)[np.arange(3), np.asarray(chosen)])
    np.testing.assert_allclose(child.latent, np.asarray([[0.0], [10.0], [20.0]]) + fed, rtol=1e-6)
    np.testing.assert_allclose(output.discount, [GAMMA] * 3)
    assert child.actions.shape == (3, K, 1) and not np.allclose(child.actions, draws)  # the child drew afresh
    assert bool(jnp.all(child.action_mask))
    # the env is stepped with the same draw, in Pendulum's [-2, 2]
    np.testing.assert_allclose(searched.env_action(draws, chosen), 2.0 * fed, rtol=1e-6)


def test_the_unrolled_policy_loss_fits_each_position_to_its_step_s_draws_and_weights():
    searched = sampled_muzero.sampled_actions_of(K, BOX)
    positions, batch = 3, 2
    loc = jax.random.normal(jax.random.PRNGKey(0), (positions, batch, 1))
    scale = jnp.full((positions, batch, 1), 0.5)
    draws = jax.random.normal(jax.random.PRNGKey(1), (positions, batch, K, 1))
    weights = jax.nn.softmax(jax.random.normal(jax.random.PRNGKey(2), (positions, batch, K)))
    losses = searched.policy_loss((loc, scale), (draws, weights))
    assert losses.shape == (positions, batch)
    for t in range(positions):
        for b in range(batch):
            dist = TanhGaussian(loc[t, b][None], scale[t, b][None], jnp.asarray([-2.0]), jnp.asarray([2.0]))
            expected = -sum(float(weights[t, b, k]) * float(dist.log_prob(draws[t, b, k][None])[0])
                            for k in range(K))
            assert float(losses[t, b]) == pytest.approx(expected, rel=1e-5)


def test_the_sequence_loss_trains_the_continuous_policy_head_on_the_stored_draws():
    network = MuZeroNetwork(MLPTorso([8]), MLPTorso([8]), MLPTorso([8]), latent_size=4, num_actions=1, num_atoms=31,
                            continuous_policy_head=TanhGaussianHead(action_dim=1, low=(-2.0,), high=(2.0,),
                                                                    min_scale=0.3))
    length, batch = 5, 2
    observation = Observation(agent_view=jax.random.normal(jax.random.PRNGKey(1), (length, batch, 3)),
                              action_mask=jnp.ones((length, batch, 1), bool),
                              step_count=jnp.zeros((length, batch), jnp.int32))
    params = network.init(jax.random.PRNGKey(0), jax.tree_util.tree_map(lambda x: x[0], observation),
                          jnp.zeros((batch, 1)))
    from omegaconf import OmegaConf

    from stoix_like.learner.replay import Transition

    system = OmegaConf.create({"unroll_steps": 2, "n_step": 2, "gamma": GAMMA, "vf_coef": 1.0,
                               "bootstrap_from": "search"})
    searched = sampled_muzero.sampled_actions_of(K, BOX)
    loss_fn = muzero.sequence_loss(muzero.model_of(network), SUPPORT, system, searched)
    draws = jax.random.normal(jax.random.PRNGKey(2), (length, batch, K, 1))
    acted = muzero.SearchedAction(action=jnp.tanh(draws[:, :, 0]),
                                  search_policy=(draws, jnp.full((length, batch, K), 1 / K)),
                                  search_value=jnp.ones((length, batch)), statistics={})
    sequences = Transition(observation=observation, action=acted, reward=jnp.ones((length, batch)),
                           discount=jnp.ones((length, batch)), last=jnp.zeros((length, batch), bool),
                           next_observation=observation)
    loss, metrics = loss_fn(params, sequences)
    assert np.isfinite(float(loss)) and float(metrics["policy_loss"]) != 0.0
    grads = jax.grad(lambda p: loss_fn(p, sequences)[0])(params)
    head = grads["params"]["continuous_policy_head"]
    assert all(float(jnp.abs(leaf).sum()) > 0 for leaf in jax.tree_util.tree_leaves(head))
    assert float(jnp.abs(grads["params"]["dynamics_torso"]["Dense_0"]["kernel"]).sum()) > 0


# ------------------------------------------------------------------------------------------ bad input, and runs


# both sampled systems (sampled_actions.py) refuse alike: name, message and plain variant
SAMPLED_SYSTEMS = [("sampled_az", sampled_alphazero, "AlphaZero", "az"), ("sampled_mz", sampled_muzero, "MuZero", "mz")]


@pytest.mark.parametrize("algorithm, system, plain, plain_entry", SAMPLED_SYSTEMS)
def test_a_discrete_env_is_refused_in_one_line(compose, algorithm, system, plain, plain_entry):
    with pytest.raises(ConfigError, match=f"CartPole-v1 has discrete actions; {algorithm} searches over sampled "
                                          f"continuous ones .plain {plain} searches every discrete action: python -m "
                                          f"experiments.{plain_entry}") as error:
        system.run_experiment(compose(algorithm, ["env=gymnax/cartpole"]))
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("algorithm, system, plain, plain_entry", SAMPLED_SYSTEMS)
def test_no_draws_per_node_is_refused_in_one_line(compose, algorithm, system, plain, plain_entry):
    del plain, plain_entry
    with pytest.raises(ConfigError, match="system.num_sampled_actions=null") as error:
        system.run_experiment(compose(algorithm, ["system.num_sampled_actions=null"]))
    assert "\n" not in str(error.value)


def test_a_support_too_small_for_pendulum_s_returns_is_refused(compose):
    # h⁻¹(10) ≈ 117 < 16.3 / (1 − 0.9) = 163: Pendulum's discounted returns would be clipped to the support
    with pytest.raises(ConfigError, match=r"system.support_max=10.0 reaches returns of ±117.4") as error:
        sampled_muzero.run_experiment(compose("sampled_mz", ["system.support_max=10"]))
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("algorithm, override", [
    *[(algorithm, override) for algorithm in ("sampled_az", "sampled_mz")
      for override in ("system.num_sampled_actions=0", "system.num_simulations=0")],
    ("sampled_az", "network.actor_network.action_head.min_scale=0"),
    ("sampled_mz", "network.prediction_network.action_head.min_scale=0"),
    ("sampled_mz", "system.unroll_steps=0"), ("sampled_mz", "system.max_abs_reward=0")])
def test_bad_settings_are_refused_before_anything_compiles(compose, algorithm, override):
    with pytest.raises(ConfigError, match=override):
        validation.validate(compose(algorithm, [override]))


def test_a_short_run_runs(compose):
    config = compose("sampled_mz", ["arch.total_timesteps=1216", "arch.num_evaluation=2", "arch.total_num_envs=4",
                                    "arch.num_eval_episodes=2", "system.num_sampled_actions=3",
                                    "system.num_simulations=4", "system.gradient_steps_per_update=2",
                                    "system.total_batch_size=8", "system.total_buffer_size=4096"])
    assert np.isfinite(sampled_muzero.run_experiment(config))
