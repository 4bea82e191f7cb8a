"""MPO and V-MPO, each one system for discrete and continuous actions.

Unit checks (hand-worked numbers) of what the two share in stoix_like/systems/dual_variables.py: the KL bounds
of the env's action kind, the decoupled M-step fit of a tanh-Gaussian and the policies' KLs; the refusal of a
setting of the other action kind; then the learning populations of the shipped defaults on CartPole-v1 and
Pendulum-v1, and smoke runs of the real entry points on brax/ant and brax/halfcheetah. The dual-variable math
itself is tests/test_mpo_ops.py's.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_population_learns

from stoix_like.envs.environment import ContinuousActionSpace, DiscreteActionSpace
from stoix_like.errors import ConfigError
from stoix_like.networks.distributions import MaskedCategorical, TanhGaussian
from stoix_like.systems import dual_variables

PENDULUM_BOX = ContinuousActionSpace(low=np.full((1,), -2.0, np.float32), high=np.full((1,), 2.0, np.float32))
CARTPOLE_ACTIONS = DiscreteActionSpace(num_actions=2)


def close(actual, expected, atol=1e-5):
    np.testing.assert_allclose(np.asarray(actual), np.asarray(expected, dtype=np.float64), atol=atol, rtol=1e-5)


# ----------------------------------------------------------------------------------------------------
# The KL bounds follow the action kind; the other kind's settings are refused
# ----------------------------------------------------------------------------------------------------


def test_the_kl_bounds_follow_the_action_kind(compose):
    pendulum = compose("mpo", ["system.mean_kl_bound=0.02", "system.scale_kl_bound=3e-4"])
    close(dual_variables.kl_bounds(pendulum, PENDULUM_BOX, ("num_sampled_actions",)), [0.02, 3e-4])
    cartpole = compose("vmpo", ["system.categorical_kl_bound=0.05"])
    close(dual_variables.kl_bounds(cartpole, CARTPOLE_ACTIONS), [0.05])


@pytest.mark.parametrize("algorithm, overrides, refusal", [
    ("mpo", ["env=gymnax/cartpole", "system.num_sampled_actions=20"],
     "system.num_sampled_actions=20 is for continuous actions, and gymnax/CartPole-v1 has discrete ones"),
    ("mpo", ["env=gymnax/cartpole", "system.mean_kl_bound=0.01"], "system.mean_kl_bound=0.01 is for continuous"),
    ("mpo", ["system.categorical_kl_bound=0.01"], "system.categorical_kl_bound=0.01 is for discrete actions"),
    ("vmpo", ["env=gymnax/pendulum", "system.categorical_kl_bound=0.01"], "is for discrete actions"),
    ("mpo", ["env=gymnax/acrobot"], "system.mean_kl_bound=.* is for continuous actions, and gymnax/Acrobot-v1 has "
                                    "discrete ones: set system.mean_kl_bound=null"),
    ("vmpo", ["env=gymnax/pendulum", "system.scale_kl_bound=null"],
     "system.scale_kl_bound is null, but gymnax/Pendulum-v1 has continuous actions, which need it"),
    ("mpo", ["system.num_sampled_actions=null"], "system.num_sampled_actions is null"),
])
def test_a_setting_of_the_other_action_kind_is_refused_before_anything_compiles(compose, algorithm, overrides,
                                                                                refusal):
    from stoix_like.systems import system_module

    config = compose(algorithm, overrides)
    with pytest.raises(ConfigError, match=refusal.replace("(", r"\(")) as error:
        system_module(algorithm).run_experiment(config)
    assert "\n" not in str(error.value)


def test_a_setting_of_the_other_action_kind_exits_2_from_a_real_command_line(python_subprocess, tmp_path):
    """The real entry point: one line, exit 2, nothing compiled. The action kind is known once the env is made, so
    this refusal comes after jax and the env load (tests/test_config_validation.py times the refusals that the
    config alone decides)."""
    result = python_subprocess(["-m", "experiments.mpo", "env=gymnax/cartpole", "system.num_sampled_actions=20"],
                               cwd=tmp_path, timeout=120)
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "error: system.num_sampled_actions=20 is for continuous actions, and gymnax/CartPole-v1 has discrete ones: set "
        "system.num_sampled_actions=null"), result.stderr
    assert "compiled the learner" not in result.stdout and "replay ratio" not in result.stdout


# ----------------------------------------------------------------------------------------------------
# The M-step on either policy head
# ----------------------------------------------------------------------------------------------------


def test_the_m_step_fits_a_gaussian_mean_and_scale_apart():
    # one state, one dimension: online N(0.5, 2), target N(0, 1), pre-tanh sample u = 1
    # the mean is fitted with the target's scale:  d/dμ log N(u; μ, σ_t) = (u − μ) / σ_t² = 0.5
    # the scale is fitted with the target's mean:  d/dσ log N(u; μ_t, σ) = −1/σ + (u − μ_t)² / σ³ = −0.375
    # (the tanh Jacobian depends on u only, so it adds nothing to either gradient)
    def fit(online_loc, online_scale):
        online = TanhGaussian(online_loc, online_scale, -1.0, 1.0)
        target = TanhGaussian(jnp.zeros((1, 1)), jnp.ones((1, 1)), -1.0, 1.0)
        return jnp.sum(dual_variables.decoupled_log_prob(online, target, jnp.ones((1, 1))))

    loc_grad, scale_grad = jax.grad(fit, argnums=(0, 1))(jnp.full((1, 1), 0.5), jnp.full((1, 1), 2.0))
    close(loc_grad, [[0.5]])
    close(scale_grad, [[-1.0 / 2.0 + 1.0 / 8.0]])


def test_the_policy_kls_of_each_head():
    target = TanhGaussian(jnp.zeros((1, 1)), jnp.ones((1, 1)), -1.0, 1.0)
    online = TanhGaussian(jnp.ones((1, 1)), jnp.full((1, 1), 2.0), -1.0, 1.0)
    kl, metrics = dual_variables.policy_kls(target, online)
    # mean: (1 − 0)² / 2 = 0.5; scale: log 2 + 1 / 8 − 1/2
    close(kl, [[0.5, math.log(2.0) + 0.125 - 0.5]])
    assert set(metrics) == {"kl_mean", "kl_scale"}

    legal = jnp.asarray([[True, True, False]])
    target = MaskedCategorical(jnp.log(jnp.asarray([[0.5, 0.5, 1.0]])), legal)
    online = MaskedCategorical(jnp.log(jnp.asarray([[0.25, 0.75, 1.0]])), legal)
    kl, metrics = dual_variables.policy_kls(target, online)
    close(kl, [[0.5 * math.log(2.0) + 0.5 * math.log(2.0 / 3.0)]])  # the illegal third action adds nothing
    assert set(metrics) == {"kl_categorical"}


# ----------------------------------------------------------------------------------------------------
# Learning: the shipped defaults of each task, as populations of seeds in one program
# ----------------------------------------------------------------------------------------------------

@pytest.mark.learning
def test_mpo_learns_pendulum(compose):
    assert_population_learns(compose, "mpo", env="gymnax/pendulum")


@pytest.mark.learning
def test_mpo_learns_cartpole(compose):
    assert_population_learns(compose, "mpo", env="gymnax/cartpole")


@pytest.mark.learning
def test_vmpo_learns_cartpole(compose):
    assert_population_learns(compose, "vmpo", env="gymnax/cartpole")


@pytest.mark.learning
def test_vmpo_learns_pendulum(compose):
    assert_population_learns(compose, "vmpo", env="gymnax/pendulum")
