"""V-trace (ops/returns.vtrace) against hand-worked cases, and against GAE(λ=1) when acting is on-policy."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stoix_like.ops.returns import truncated_gae, vtrace

# T = 3 steps, three envs: (a) no ending, ρ = (2, 0.5, 1): ρ̄ = c̄ = 1 clip the first; (b) truncated at t = 1,
# on-policy; (c) terminated at t = 1, on-policy. γ = 0.9, V = (1, 2, 3), V(s') = (2, 3, 4), r = 1.
REWARDS = jnp.ones((3, 3))
VALUES = jnp.tile(jnp.array([[1.0], [2.0], [3.0]]), (1, 3))
NEXT_VALUES = VALUES + 1.0
DONES = jnp.array([[0, 0, 0], [0, 1, 1], [0, 0, 0]], bool)
TRUNCATIONS = jnp.array([[0, 0, 0], [0, 1, 0], [0, 0, 0]], bool)
LOG_RHOS = jnp.log(jnp.array([[2.0, 1.0, 1.0], [0.5, 1.0, 1.0], [1.0, 1.0, 1.0]]))


def test_vtrace_hand_worked():
    vs, advantages = vtrace(REWARDS, VALUES, NEXT_VALUES, DONES, TRUNCATIONS, LOG_RHOS, gamma=0.9)
    # (a) δ = (1.8, 0.5 × 1.7, 1.6); v_2 − V = 1.6, v_1 − V = 0.85 + 0.9 × 0.5 × 1.6 = 1.57, v_0 − V = 1.8 + 0.9 × 1.57
    # (b) the truncated step bootstraps from V(s'_1) = 3 and the trace stops there: v_1 − V = 1.7, v_0 − V = 3.33
    # (c) the terminated step does not bootstrap: δ_1 = 1 − 2 = −1, v_0 − V = 1.8 − 0.9
    expected_vs = np.array([[4.213, 4.33, 1.9], [3.57, 3.7, 1.0], [4.6, 4.6, 4.6]])
    # A_0 = r + γ v_1 − V_0; A_1(a) = 0.5 (1 + 0.9 × 4.6 − 2); A_1(b) bootstraps V(s'_1) = 3, A_1(c) nothing
    expected_advantages = np.array([[3.213, 3.33, 0.9], [1.57, 1.7, -1.0], [1.6, 1.6, 1.6]])
    np.testing.assert_allclose(vs, expected_vs, rtol=1e-5)
    np.testing.assert_allclose(advantages, expected_advantages, rtol=1e-5)


def test_vtrace_on_policy_is_gae_with_lambda_one():
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    shape = (16, 5)
    rewards, values, next_values = (jax.random.normal(key, shape) for key in keys[:3])
    dones = jax.random.uniform(keys[3], shape) < 0.2
    truncations = dones & (jax.random.uniform(jax.random.PRNGKey(1), shape) < 0.5)
    vs, advantages = vtrace(rewards, values, next_values, dones, truncations, jnp.zeros(shape), gamma=0.97)
    gae_advantages, targets = truncated_gae(rewards, values, next_values, dones, truncations, 0.97, 1.0)
    np.testing.assert_allclose(vs, targets, rtol=1e-5, atol=1e-5)
    # the policy-gradient advantage is the one-step TD error to v_{t+1}, not GAE's: equal only at the last row
    np.testing.assert_allclose(advantages[-1], gae_advantages[-1], rtol=1e-5, atol=1e-5)


def test_vtrace_clips_rho_and_c_apart():
    # a huge ρ on the last step: ρ̄ = 2 caps δ's weight, c̄ never enters the last row
    log_rhos = jnp.log(jnp.array([[1.0], [1.0], [10.0]]))
    vs, _ = vtrace(REWARDS[:, :1], VALUES[:, :1], NEXT_VALUES[:, :1], DONES[:, :1] & False, TRUNCATIONS[:, :1],
                   log_rhos, gamma=0.9, clip_rho_threshold=2.0)
    assert float(vs[2, 0]) == pytest.approx(3.0 + 2.0 * 1.6, rel=1e-5)


def test_vtrace_rejects_mismatched_shapes():
    with pytest.raises(AssertionError):
        vtrace(REWARDS, VALUES[:2], NEXT_VALUES, DONES, TRUNCATIONS, LOG_RHOS, gamma=0.9)
