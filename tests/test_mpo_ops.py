"""Hand-worked checks of stoix_like/ops/mpo.py, MPO's and V-MPO's dual-variable machinery.

Expected numbers are worked out in the comments with plain `math`, never by calling the function under test; the
gradients' signs say which way each dual variable moves.
"""

import math

import distrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stoix_like.ops import mpo as mpo_ops
from stoix_like.ops.masking import ILLEGAL_ACTION_VALUE
from stoix_like.ops.losses import categorical_kl_divergence


def f32(x):
    return jnp.asarray(x, dtype=jnp.float32)


def close(actual, expected, atol=1e-5):
    np.testing.assert_allclose(np.asarray(actual), np.asarray(expected, dtype=np.float64), atol=atol, rtol=1e-5)


# ----------------------------------------------------------------------------------------------------
# The log-space multipliers
# ----------------------------------------------------------------------------------------------------


def test_a_multiplier_round_trips_through_its_log_and_stays_positive():
    close(mpo_ops.log_of_multiplier(2.0), math.log(2.0))
    close(mpo_ops.multiplier_from_log(mpo_ops.log_of_multiplier(f32([0.5, 5.0]))), [0.5, 5.0])
    assert float(mpo_ops.multiplier_from_log(f32(-50.0))) > 0.0
    # d exp(x) / dx = exp(x): the step on the log is the multiplier's own gradient scaled by the multiplier
    close(jax.grad(mpo_ops.multiplier_from_log)(f32(math.log(3.0))), 3.0)


def test_the_floor_of_a_log_multiplier():
    close(mpo_ops.project_log_multiplier(f32([-30.0, -18.0, 0.5])), [-18.0, -18.0, 0.5])


# ----------------------------------------------------------------------------------------------------
# MPO's temperature dual: two states × two candidate actions
# ----------------------------------------------------------------------------------------------------


def test_mpo_temperature_loss_with_sampled_candidates_by_hand():
    # η = 1, ε = 0.1; K = 2 samples per state, prior weight 1/2 each.
    # state 0: Q = (1, 0): weights e/(e+1), 1/(e+1); log Σ p exp(Q/η) = log((e + 1) / 2)
    # state 1: Q = (0, 0): weights 1/2, 1/2;         log Σ p exp(Q/η) = log 1 = 0
    e = math.e
    q_values = f32([[1.0, 0.0], [0.0, 0.0]])
    log_prior = f32(np.full((2, 2), math.log(0.5)))
    loss, weights = mpo_ops.mpo_temperature_loss(q_values, log_prior, f32(0.0), 0.1)
    close(weights, [[e / (e + 1), 1 / (e + 1)], [0.5, 0.5]])
    close(loss, 0.1 + 0.5 * math.log((e + 1) / 2))

    # dL/dη = ε + mean_b log Z_b − mean_b Σ_k w_bk Q_bk / η, and dL/dlog η = η dL/dη (η = 1 here):
    # 0.1 + 0.5 log((e+1)/2) − 0.5 e/(e+1) ≈ 0.0445 > 0: the bound is loose, so η shrinks (weights sharpen).
    gradient = jax.grad(lambda log_eta: mpo_ops.mpo_temperature_loss(q_values, log_prior, log_eta, 0.1)[0])(f32(0.0))
    close(gradient, 0.1 + 0.5 * math.log((e + 1) / 2) - 0.5 * e / (e + 1))
    assert float(gradient) > 0


def test_mpo_temperature_loss_with_every_discrete_action_weighted_by_the_prior():
    # η = 2 (log η = log 2), ε = 0.5; prior π_target = (0.8, 0.2) in state 0, (0.5, 0.5) in state 1.
    # state 0: Q = (0, 4): unnormalised 0.8·e^0, 0.2·e^2 -> weights 0.8/(0.8+0.2e²), 0.2e²/(0.8+0.2e²)
    # state 1: Q = (2, 2): weights (0.5, 0.5), log Z = log(e^1) = 1
    e2 = math.exp(2.0)
    q_values = f32([[0.0, 4.0], [2.0, 2.0]])
    log_prior = jnp.log(f32([[0.8, 0.2], [0.5, 0.5]]))
    loss, weights = mpo_ops.mpo_temperature_loss(q_values, log_prior, f32(math.log(2.0)), 0.5)
    z0 = 0.8 + 0.2 * e2
    close(weights, [[0.8 / z0, 0.2 * e2 / z0], [0.5, 0.5]])
    close(loss, 2.0 * 0.5 + 2.0 * 0.5 * (math.log(z0) + 1.0))
    close(jnp.sum(weights, axis=-1), [1.0, 1.0])


def test_mpo_temperature_loss_moves_only_the_temperature():
    q_values, log_prior = f32([[1.0, -1.0]]), f32([[math.log(0.5)] * 2])
    q_grad, prior_grad = jax.grad(lambda q, p: mpo_ops.mpo_temperature_loss(q, p, f32(0.0), 0.1)[0],
                                  argnums=(0, 1))(q_values, log_prior)
    close(q_grad, [[0.0, 0.0]])
    close(prior_grad, [[0.0, 0.0]])


# ----------------------------------------------------------------------------------------------------
# V-MPO's top-k temperature dual
# ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("num_samples, fraction, kept", [(4, 0.5, 2), (5, 0.5, 3), (10, 0.3, 3), (3, 1.0, 3),
                                                         (100, 0.001, 1)])
def test_top_k_count(num_samples, fraction, kept):
    assert mpo_ops.top_k_count(num_samples, fraction) == kept


def test_vmpo_temperature_loss_keeps_the_top_half_by_hand():
    # advantages (3, -1, 1, 0), top half: samples 0 and 2. η = 1, ε = 0.01.
    # weights e³/(e³+e), 0, e/(e³+e), 0; loss = ε + log((e³ + e) / 2)
    e, e3 = math.e, math.exp(3.0)
    advantages = f32([3.0, -1.0, 1.0, 0.0])
    loss, weights = mpo_ops.vmpo_temperature_loss(advantages, f32(0.0), 0.01, 0.5)
    close(weights, [e3 / (e3 + e), 0.0, e / (e3 + e), 0.0])
    close(loss, 0.01 + math.log((e3 + e) / 2))

    # η = 0.5 keeps the same samples and sharpens the weights: exp(A / 0.5) = e⁶, e²
    loss, weights = mpo_ops.vmpo_temperature_loss(advantages, f32(math.log(0.5)), 0.01, 0.5)
    e6, e2 = math.exp(6.0), math.exp(2.0)
    close(weights, [e6 / (e6 + e2), 0.0, e2 / (e6 + e2), 0.0])
    close(loss, 0.5 * 0.01 + 0.5 * math.log((e6 + e2) / 2))


def test_vmpo_temperature_loss_with_every_sample_kept():
    # fraction 1: every sample counts; advantages all equal -> uniform weights, log Z = A / η = 2 / 1
    loss, weights = mpo_ops.vmpo_temperature_loss(f32([2.0, 2.0, 2.0]), f32(0.0), 0.1, 1.0)
    close(weights, [1 / 3] * 3)
    close(loss, 0.1 + 2.0)


# ----------------------------------------------------------------------------------------------------
# The M-step: weighted likelihood, KLs and their Lagrangian
# ----------------------------------------------------------------------------------------------------


def test_weighted_log_likelihood_loss_by_hand():
    log_probs = jnp.log(f32([[0.5, 0.25], [0.1, 0.9]]))
    weights = f32([[1.0, 0.0], [0.5, 0.5]])
    expected = -0.5 * (math.log(0.5) + 0.5 * math.log(0.1) + 0.5 * math.log(0.9))
    close(mpo_ops.weighted_log_likelihood_loss(log_probs, weights), expected)
    # only the log-probabilities are fitted: d/dlog π = −w / B; the weights are constants
    log_prob_grad, weight_grad = jax.grad(mpo_ops.weighted_log_likelihood_loss, argnums=(0, 1))(log_probs, weights)
    close(log_prob_grad, [[-0.5, 0.0], [-0.25, -0.25]])
    close(weight_grad, [[0.0, 0.0], [0.0, 0.0]])


def test_categorical_kl_by_hand():
    # KL((1/2, 1/2) ‖ (1/4, 3/4)) = ½ log 2 + ½ log(2/3); a distribution from itself: 0
    target = jnp.log(f32([[0.5, 0.5], [0.2, 0.8]]))
    online = jnp.log(f32([[0.25, 0.75], [0.2, 0.8]]))
    close(categorical_kl_divergence(target, online), [0.5 * math.log(2.0) + 0.5 * math.log(2.0 / 3.0), 0.0])


def test_categorical_kl_ignores_a_masked_action():
    # a third action, illegal in both (the masking fill): it has probability 0 and adds nothing
    target = f32([[math.log(0.5), math.log(0.5), ILLEGAL_ACTION_VALUE]])
    online = f32([[math.log(0.25), math.log(0.75), ILLEGAL_ACTION_VALUE]])
    kl = categorical_kl_divergence(target, online)
    assert np.isfinite(np.asarray(kl)).all()
    close(kl, [0.5 * math.log(2.0) + 0.5 * math.log(2.0 / 3.0)])


def test_gaussian_kl_decoupled_by_hand():
    # state 0, two dimensions: target N((0, 1), (1, 2)), online N((1, 1), (2, 1))
    #   KL_mean  = (1 − 0)² / (2·1²) + (1 − 1)² / (2·2²) = 0.5
    #   KL_scale = [log(2/1) + 1²/(2·2²) − ½] + [log(1/2) + 2²/(2·1²) − ½] = 0.318147 + 0.806853 = 1.125
    # state 1: online = target, both 0
    target_loc, target_scale = f32([[0.0, 1.0], [0.3, -0.2]]), f32([[1.0, 2.0], [0.7, 1.5]])
    online_loc, online_scale = f32([[1.0, 1.0], [0.3, -0.2]]), f32([[2.0, 1.0], [0.7, 1.5]])
    kl_mean, kl_scale = mpo_ops.gaussian_kl_decoupled(target_loc, target_scale, online_loc, online_scale)
    close(kl_mean, [0.5, 0.0])
    close(kl_scale, [math.log(2.0) + 1.0 / 8.0 - 0.5 + math.log(0.5) + 2.0 - 0.5, 0.0])


def test_each_decoupled_gaussian_kl_is_the_full_kl_when_only_its_part_moves():
    """A second opinion from distrax's closed form, where the decoupled KL and the full KL coincide."""
    target_loc, target_scale = f32([[0.2, -1.0]]), f32([[0.5, 1.5]])
    moved_loc, moved_scale = f32([[1.2, 0.0]]), f32([[0.9, 0.4]])
    full = lambda loc, scale: distrax.MultivariateNormalDiag(target_loc, target_scale).kl_divergence(
        distrax.MultivariateNormalDiag(loc, scale))
    kl_mean, _ = mpo_ops.gaussian_kl_decoupled(target_loc, target_scale, moved_loc, target_scale)
    _, kl_scale = mpo_ops.gaussian_kl_decoupled(target_loc, target_scale, target_loc, moved_scale)
    close(kl_mean, full(moved_loc, target_scale))
    close(kl_scale, full(target_loc, moved_scale))


def test_kl_constraint_loss_by_hand():
    # B = 2 states, C = 2 bounds: α = (2, 0.5), ε = (0.01, 0.01), mean KLs (0.03, 0.002)
    # value: Σ_c [α_c · mean KL_c + α_c (ε_c − mean KL_c)] = Σ_c α_c ε_c = 0.02 + 0.005
    kl = f32([[0.02, 0.001], [0.04, 0.003]])
    log_alpha = jnp.log(f32([2.0, 0.5]))
    epsilons = f32([0.01, 0.01])
    close(mpo_ops.kl_constraint_loss(kl, log_alpha, epsilons), 0.025)

    kl_grad, log_alpha_grad = jax.grad(mpo_ops.kl_constraint_loss, argnums=(0, 1))(kl, log_alpha, epsilons)
    # the policy is pulled towards the target with weight α_c / B
    close(kl_grad, [[1.0, 0.25], [1.0, 0.25]])
    # d/dlog α_c = α_c (ε_c − mean KL_c) = (2 · −0.02, 0.5 · 0.008): bound 0 is broken, so descent raises α_0;
    # bound 1 is met, so descent lowers α_1
    close(log_alpha_grad, [-0.04, 0.004])
