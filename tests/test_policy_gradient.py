"""The on-policy actor-critic family beside PPO: REINFORCE, PPO-penalty and DPO (PPO's own checks: test_ppo.py).

The KL the loop records is exact (for the tanh-Gaussian, its pre-tanh Gaussians' KL equals the squashed
distributions', checked here by sampling); PPO-penalty's β adapts by the paper's rule after every update, alike in
every slot, and a resumed run carries it on; each system's shipped defaults learn CartPole and Pendulum as
populations of seeds; each system's learner runs on brax/ant and brax/halfcheetah. The losses themselves are
checked by hand in test_ops.py.
"""

from __future__ import annotations

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_population_learns, train_then_resume

from stoix_like import envs as envs_lib
from stoix_like.learner import budget as budget_lib
from stoix_like.runtime import parallel
from stoix_like.networks.distributions import TanhGaussian
from stoix_like.ops.losses import KL_COEF_FACTOR, KL_TOLERANCE
from stoix_like.systems.on_policy import ppo_penalty

SMALL_NETWORK = ["network.actor_network.pre_torso.layer_sizes=[16]",
                 "network.critic_network.pre_torso.layer_sizes=[16]"]


def test_tanh_gaussian_kl_is_the_kl_of_the_squashed_distributions():
    """KL(p ‖ q) = E_p[log p(a) - log q(a)] over squashed actions a, estimated from 100k samples of p."""
    num_samples = 100_000
    p = TanhGaussian(jnp.full((num_samples, 2), 0.3), jnp.full((num_samples, 2), 0.8), -1.0, 1.0)
    q = TanhGaussian(jnp.full((num_samples, 2), -0.2), jnp.asarray([[1.1, 0.5]] * num_samples), -1.0, 1.0)
    pre_tanh = p.sample(jax.random.PRNGKey(0))
    # each log_prob is the squashed density (tanh's Jacobian included) of the same action tanh(pre_tanh)
    sampled = np.asarray(p.log_prob(pre_tanh) - q.log_prob(pre_tanh), np.float64)
    closed_form = np.asarray(q.kl_from(p.parameters())[:1])
    standard_error = sampled.std() / math.sqrt(num_samples)
    assert abs(sampled.mean() - closed_form[0]) < 4 * standard_error, (sampled.mean(), closed_form)


# ----------------------------------------------------------------------------------------------------
# PPO-penalty's β
# ----------------------------------------------------------------------------------------------------

# 2 batch slots × 2 envs, 6 updates of 8 steps in one learn call, at a constant learning rate: every update moves
# the policy
TINY_PENALTY = ["arch.update_batch_size=2", "arch.total_num_envs=4", "system.rollout_length=8",
                "system.num_minibatches=2", "arch.num_evaluation=1", "arch.num_eval_episodes=2",
                "arch.total_timesteps=192", "system.decay_learning_rates=False"] + SMALL_NETWORK


def adapted(kl_coef: float, measured_kl: float, kl_target: float) -> float:
    """Schulman et al. (2017), section 4, in plain Python."""
    if measured_kl < kl_target / KL_TOLERANCE:
        return kl_coef / KL_COEF_FACTOR
    if measured_kl > kl_target * KL_TOLERANCE:
        return kl_coef * KL_COEF_FACTOR
    return kl_coef


def test_ppo_penalty_adapts_beta_after_every_update_alike_in_every_slot(compose):
    # a target every update overshoots: beta doubles each time (the other branches: test_ops.py, by hand)
    kl_target = 1e-7
    config = compose("ppo_penalty", TINY_PENALTY + [f"system.kl_target={kl_target}", "system.init_kl_coef=0.25"])
    budget = budget_lib.make_budget(config)
    train_env, _ = envs_lib.make(config.env)
    setup = ppo_penalty.learner_setup(train_env, jax.random.PRNGKey(0), config, budget)
    state, output = parallel.distribute(setup.learner_fn)(setup.learner_state)

    kl_coefs = np.asarray(output.train_metrics["kl_coef"])  # (devices, batch, updates): beta after each update
    measured = np.asarray(output.train_metrics["kl_after_update"])
    assert kl_coefs.shape[1:] == (2, 6)
    for per_slot in (kl_coefs, measured, np.asarray(state.kl_coef)):  # one beta, one measured KL, in every slot
        np.testing.assert_array_equal(per_slot, np.broadcast_to(per_slot[:1, :1], per_slot.shape))
    before = 0.25
    for kl_coef, measured_kl in zip(kl_coefs[0, 0], measured[0, 0]):
        assert kl_coef == pytest.approx(adapted(before, float(measured_kl), kl_target), rel=1e-6)
        assert kl_coef == pytest.approx(before * KL_COEF_FACTOR, rel=1e-6)
        before = float(kl_coef)
    assert float(np.asarray(state.kl_coef)[0, 0]) == pytest.approx(before, rel=1e-6)


def test_a_resumed_ppo_penalty_run_carries_its_beta_on(compose, tmp_path):
    """A run resumed from its second checkpoint ends in the very state the uninterrupted run ends in, β included."""
    run = ["arch.total_num_envs=4", "system.rollout_length=8", "system.num_minibatches=2", "arch.num_evaluation=4",
           "arch.num_eval_episodes=2", "arch.total_timesteps=128"] + SMALL_NETWORK
    uninterrupted, resumed = train_then_resume(compose, "ppo_penalty", run, tmp_path / "checkpoints", 64)

    final_kl_coef = float(np.asarray(uninterrupted.learner_state.kl_coef).ravel()[0])
    assert final_kl_coef != 1.0  # beta moved away from config.system.init_kl_coef, so resuming had one to carry
    saved = json.loads((tmp_path / "checkpoints" / "64" / "meta" / "metadata").read_text())
    assert saved["algorithm"] == "ppo_penalty" and saved["steps_done"] == 64
    # every leaf bit for bit (tree_map also insists the two states have one structure)
    jax.tree_util.tree_map(np.testing.assert_array_equal, resumed.learner_state, uninterrupted.learner_state)
    assert resumed.absolute_returns == uninterrupted.absolute_returns


# ----------------------------------------------------------------------------------------------------
# Learning: each shipped default as a population of seeds in one program must meet its target in
# stoix_like/claims/learning_targets.py, with the seeds learning_targets.COVERAGE declares (the 8-seed
# populations, and 1000..1007 nobody tuned on, are `python benchmarks/learning_table.py --algorithms reinforce
# ppo_penalty dpo`).
# ----------------------------------------------------------------------------------------------------

@pytest.mark.learning
@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["reinforce", "ppo_penalty", "dpo"])
def test_learns_cartpole(compose, algorithm):
    assert_population_learns(compose, algorithm, env="gymnax/cartpole")


@pytest.mark.learning
@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["reinforce", "ppo_penalty", "dpo"])
def test_learns_pendulum(compose, algorithm):
    assert_population_learns(compose, algorithm, env="gymnax/pendulum")


def test_reward_scale_scales_the_rewards_the_targets_read_and_no_logged_return():
    from stoix_like.systems.on_policy.policy_gradient import transitions
    from stoix_like.types import RolloutStep

    steps = RolloutStep(
        done=jnp.array([[False], [True]]), discount=jnp.array([[1.0], [0.0]]), action=jnp.zeros((2, 1)),
        reward=jnp.array([[1.5], [-2.0]]), observation=jnp.zeros((2, 1, 3)), next_observation=jnp.zeros((2, 1, 3)),
        policy_extras={"log_prob": jnp.zeros((2, 1)), "behaviour": ()},
        episode_metrics={"episode_return": jnp.array([[0.0], [-0.5]])})
    scaled = transitions(steps, jnp.zeros((2, 1)), jnp.zeros((2, 1)), 10.0)
    np.testing.assert_allclose(scaled.reward, [[15.0], [-20.0]])
    np.testing.assert_allclose(scaled.episode_metrics["episode_return"], [[0.0], [-0.5]])  # the env's own


@pytest.mark.parametrize("clip_value_loss", [True, False])
def test_ppo_critic_clips_the_value_move_only_when_asked(clip_value_loss):
    """With returns in the hundreds an absolute clip of 0.2 per update holds the critic back: off, the value keeps
    its gradient towards a target far beyond the clip."""
    from omegaconf import OmegaConf

    from stoix_like.systems.on_policy.policy_gradient import ppo_critic

    critic = ppo_critic(OmegaConf.create({"clip_eps": 0.2, "clip_value_loss": clip_value_loss}))
    values_before, targets = jnp.zeros(4), jnp.full(4, 100.0)
    gradient = jax.grad(lambda values: critic(values, values_before, targets))(jnp.full(4, 1.0))  # moved past 0.2
    if clip_value_loss:
        np.testing.assert_allclose(gradient, 0.0)
    else:
        np.testing.assert_allclose(gradient, (1.0 - 100.0) / 4)
