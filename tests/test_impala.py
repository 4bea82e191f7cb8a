"""IMPALA (systems/on_policy/impala.py): V-trace's wiring on a hand-checked rollout, the shared-torso network's
params and gradients, a refusal, and short end-to-end runs under arch=sebulba (its default) and arch=anakin.

The learning claim is not here (CI's time budget): benchmarks/sebulba_population.py --algorithm impala.
"""

from __future__ import annotations

import json
import pathlib
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from omegaconf import OmegaConf

from conftest import REPO_ROOT, compose_config, run_python
from stoix_like.config import validation
from stoix_like.learner.budget import Budget
from stoix_like.envs.environment import DiscreteActionSpace
from stoix_like.networks.actor_critic import PolicyAndValue
from stoix_like.ops.returns import truncated_gae
from stoix_like.systems.on_policy import impala, policy_gradient
from stoix_like.types import ActorCriticParams, ActorCriticTransition, Observation


class _FixedLogProb:
    """A policy whose log π(a|s) is given per step, whatever the action."""

    def __init__(self, log_prob):
        self._log_prob = log_prob

    def log_prob(self, action):
        del action
        return self._log_prob


# The learner's "networks" read their outputs from the params: π's log-probs from the actor half, V from the critic's.
FIXED = PolicyAndValue(policy=lambda params, observation: _FixedLogProb(params.actor),
                       value=lambda params, observation: params.critic)


def _rollout(rewards, next_values, behaviour_log_prob, done=None, truncated=None) -> ActorCriticTransition:
    shape = rewards.shape
    return ActorCriticTransition(
        done=jnp.zeros(shape, bool) if done is None else done,
        truncated=jnp.zeros(shape, bool) if truncated is None else truncated,
        action=jnp.zeros(shape, jnp.int32),
        value=jnp.full(shape, 123.0),  # what the actors' critic said: V-trace must use the learner's instead
        next_value=next_values, reward=rewards, log_prob=behaviour_log_prob, behaviour=(),
        observation=jnp.zeros(shape + (1,)), episode_metrics={})


def _system(**overrides):
    return OmegaConf.create({"gamma": 0.9, "gae_lambda": 1.0, "rho_clip": 1.0, "c_clip": 1.0, **overrides})


def test_vtrace_targets_hand_worked_with_a_lagging_policy():
    # T = 2, one env, r = 1, V = 0 everywhere, π/μ = (1, 0.5), γ = 0.9:
    # δ_1 = 0.5 · 1 = 0.5 → v_1 = 0.5; δ_0 = 1 → v_0 = 1 + 0.9 · 1 · 0.5 = 1.45
    # A_0 = 1 · (1 + 0.9 v_1 − 0) = 1.45; A_1 = 0.5 · (1 + 0.9 V(s'_1)) = 0.5
    behaviour = jnp.log(jnp.array([[0.5], [0.5]]))
    learner = jnp.log(jnp.array([[0.5], [0.25]]))
    traj = _rollout(jnp.ones((2, 1)), jnp.zeros((2, 1)), behaviour)
    advantages, targets = impala.vtrace_targets(_system())(
        FIXED, ActorCriticParams(learner, jnp.zeros((2, 1))), (), traj)
    np.testing.assert_allclose(targets, [[1.45], [0.5]], rtol=1e-6)
    np.testing.assert_allclose(advantages, [[1.45], [0.5]], rtol=1e-6)


def test_vtrace_targets_clip_rho_at_rho_clip():
    # π/μ = 2 on both steps: ρ̄ = c̄ = 1 make it the on-policy case; ρ̄ = c̄ = 2 double every correction
    behaviour = jnp.log(jnp.full((2, 1), 0.25))
    learner = jnp.log(jnp.full((2, 1), 0.5))
    traj = _rollout(jnp.ones((2, 1)), jnp.zeros((2, 1)), behaviour)
    params = ActorCriticParams(learner, jnp.zeros((2, 1)))
    _, clipped = impala.vtrace_targets(_system())(FIXED, params, (), traj)
    np.testing.assert_allclose(clipped, [[1.9], [1.0]], rtol=1e-6)
    _, loose = impala.vtrace_targets(_system(rho_clip=2.0, c_clip=2.0))(FIXED, params, (), traj)
    np.testing.assert_allclose(loose, [[2.0 + 0.9 * 2.0 * 2.0], [2.0]], rtol=1e-6)  # v_0 = 2 + γ c_0 (v_1 − V_1)


@pytest.mark.parametrize("lam", [1.0, 0.8])
def test_on_policy_vtrace_targets_are_lambda_returns(lam):
    """ρ = 1 (Anakin's rollouts): the value targets are truncation-correct TD(λ) returns of the learner's V."""
    keys = jax.random.split(jax.random.PRNGKey(0), 5)
    shape = (12, 3)
    rewards, values, next_values = (jax.random.normal(key, shape) for key in keys[:3])
    done = jax.random.uniform(keys[3], shape) < 0.25
    truncated = done & (jax.random.uniform(keys[4], shape) < 0.5)
    log_prob = jnp.full(shape, -0.7)
    traj = _rollout(rewards, next_values, log_prob, done, truncated)
    advantages, targets = impala.vtrace_targets(_system(gamma=0.97, gae_lambda=lam))(
        FIXED, ActorCriticParams(log_prob, values), (), traj)
    gae_advantages, lambda_returns = truncated_gae(rewards, values, next_values, done, truncated, 0.97, lam)
    np.testing.assert_allclose(targets, lambda_returns, rtol=1e-5, atol=1e-5)
    # the last row has no v_{t+1} inside the rollout: its advantage is the one-step TD error, as GAE's
    np.testing.assert_allclose(advantages[-1], gae_advantages[-1], rtol=1e-5, atol=1e-5)


ONE_OBSERVATION = Observation(agent_view=jnp.linspace(-1.0, 1.0, 4)[None], action_mask=jnp.ones((1, 2), bool),
                              step_count=jnp.zeros((1,), jnp.int32))
BUDGET = Budget(total_timesteps=1, n_devices=1, update_batch_size=1, num_envs=1, rollout_length=1, num_evaluation=1,
                updates_per_evaluation=1, warmup_steps=0)


def _networks(network: str) -> policy_gradient.ActorCriticNetworks:
    config = compose_config("impala", [f"network={network}"])
    return policy_gradient.actor_critic_networks(DiscreteActionSpace(2), ONE_OBSERVATION, jax.random.PRNGKey(1),
                                                 jax.random.PRNGKey(2), config, BUDGET)


def _norms(tree) -> dict:
    return {name: float(sum(jnp.abs(leaf).sum() for leaf in jax.tree_util.tree_leaves(part)))
            for name, part in tree["params"].items()}


def test_a_shared_torso_is_one_set_of_params_trained_by_both_losses():
    networks = _networks("mlp_impala_shared")
    params = networks.params
    assert set(params.actor["params"]) == {"torso", "action_head"}
    assert set(params.critic["params"]) == {"critic_head"}  # the torso lives once, with the actor's params

    def policy_loss(p):
        return -networks.networks.policy(p, ONE_OBSERVATION).log_prob(jnp.array([1])).sum()

    def value_loss(p):
        return (networks.networks.value(p, ONE_OBSERVATION) ** 2).sum()

    policy_grads, value_grads = jax.grad(policy_loss)(params), jax.grad(value_loss)(params)
    assert _norms(policy_grads.actor)["torso"] > 0
    assert _norms(value_grads.actor)["torso"] > 0  # the critic's loss reaches the torso the actor acts with
    assert _norms(value_grads.actor)["action_head"] == 0
    assert _norms(policy_grads.critic)["critic_head"] == 0
    # the actor's half alone is a whole policy: what the actors and the evaluator apply
    dist = networks.apply_fns.actor(params.actor, ONE_OBSERVATION)
    np.testing.assert_allclose(dist.log_prob(jnp.array([1])),
                               networks.networks.policy(params, ONE_OBSERVATION).log_prob(jnp.array([1])))


def test_separate_networks_keep_each_loss_on_its_own_network():
    networks = _networks("mlp_impala")
    assert set(networks.params.critic["params"]) == {"torso", "critic_head"}
    value_grads = jax.grad(lambda p: (networks.networks.value(p, ONE_OBSERVATION) ** 2).sum())(networks.params)
    assert sum(_norms(value_grads.actor).values()) == 0
    assert _norms(value_grads.critic)["torso"] > 0


def test_a_shared_torso_is_refused_where_the_critic_is_built_apart():
    problems = validation.problems(compose_config("az", ["network=mlp_impala_shared"]))
    assert problems and "network.shared_torso=True: az builds its actor and critic apart" in problems[0], problems


def test_impala_defaults_are_sebulba_on_gymnasium_cartpole_and_valid():
    config = compose_config("impala")
    assert "actor_device_ids" in config.arch and config.env.suite == "gymnasium"
    assert not validation.problems(config)
    shared = compose_config("impala", ["network=mlp_impala_shared"])
    assert not validation.problems(shared)
    # the shared torso brings its own loss weighting (config/tuned/impala/network/mlp_impala_shared.yaml); a user's wins
    assert (shared.system.vf_coef, shared.system.max_grad_norm) == (0.01, 1.0)
    assert (config.system.vf_coef, config.system.max_grad_norm) == (0.5, 0.5)
    assert compose_config("impala", ["network=mlp_impala_shared", "system.vf_coef=0.2"]).system.vf_coef == 0.2


# 2 evaluations × 8 updates × 16 steps × 4 envs = 1,024 steps, on small networks
TINY = ["arch.total_num_envs=4", "system.rollout_length=16", "arch.total_timesteps=1024", "arch.num_evaluation=2",
        "arch.num_eval_episodes=2", "system.num_minibatches=2", "network.actor_network.pre_torso.layer_sizes=[8]"]


def _run(tmp_path: pathlib.Path, overrides: list) -> str:
    completed = run_python(["-m", "experiments.impala", *overrides, f"hydra.run.dir={tmp_path}"], cwd=REPO_ROOT,
                           env={"JAX_PLATFORMS": "cpu"}, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return "\n".join(path.read_text() for path in tmp_path.rglob("impala.log"))


@pytest.mark.slow
def test_impala_runs_the_exact_budget_under_sebulba_with_a_shared_torso(tmp_path):
    log = _run(tmp_path, [*TINY, "network=mlp_impala_shared"])
    assert re.search(r"done: 1,024 steps", log), log[-2000:]
    assert "policy_lag_mean" in log and "[absolute]" in log
    metrics = json.loads(next(tmp_path.rglob("metrics.json")).read_text())
    assert len(metrics["gymnasium"]["CartPole-v1"]["impala"]["seed_42"]["absolute_metrics"]["episode_return"]) == 20


@pytest.mark.slow
def test_impala_runs_under_anakin_on_policy(tmp_path):
    log = _run(tmp_path, ["arch=anakin", "env=gymnax/cartpole", *TINY,
                          "network.critic_network.pre_torso.layer_sizes=[8]"])
    assert re.search(r"done: 1,024 steps", log) or "1,024" in log, log[-2000:]
