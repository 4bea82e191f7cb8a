"""The dual-variable machinery of MPO (Abdolmaleki et al., 2018) and V-MPO (Song et al., 2019), written once.

Both improve a policy in two steps. The E-step reweights actions by exp(advantage / η): the temperature η is
the Lagrange multiplier of a KL bound ε_η on how far the reweighted policy may move, learnt by minimising its
dual (`mpo_temperature_loss`, `vmpo_temperature_loss`). The M-step fits the policy to the reweighted actions by
weighted maximum likelihood (`weighted_log_likelihood_loss`) under KL bounds against a fixed target policy,
each enforced by a learnt multiplier α (`kl_constraint_loss`): a categorical policy has one KL
(`ops.losses.categorical_kl_divergence`), a Gaussian one a KL of its mean and one of its scale (`gaussian_kl_decoupled`), so that the
mean may move fast while the scale, which would otherwise collapse, moves slowly.

Every multiplier must stay positive, so it is learnt in log space: `multiplier = exp(log_multiplier)`
(`multiplier_from_log`, `log_of_multiplier`), floored after each step (`project_log_multiplier`).

Shapes: B states in a batch; K candidate actions per state (MPO: samples from the target policy, or all actions
of a discrete space); N state-action samples (V-MPO); A discrete actions; D action dimensions; C KL constraints.
Stop-gradients are placed so that one scalar can be differentiated with respect to the policy and the dual
variables together: a dual loss moves only its multiplier, a policy loss only the policy.
"""

from __future__ import annotations

import math
from typing import Tuple

import chex
import jax
import jax.numpy as jnp

from stoix_like.types import Array, Numeric

# ----------------------------------------------------------------------------------------------------
# The log-space parameterisation of the multipliers
# ----------------------------------------------------------------------------------------------------


def log_of_multiplier(value: Numeric) -> Array:
    """The learnt parameter of a multiplier whose initial value is `value` > 0 (float32, any shape)."""
    return jnp.log(jnp.asarray(value, jnp.float32))


def multiplier_from_log(log_multiplier: Array) -> Array:
    """A positive multiplier from its learnt log (elementwise, any shape): the gradient of a dual with respect to
    the log is the multiplier times its gradient, so the multiplier moves by ratios and can never cross zero."""
    chex.assert_type(log_multiplier, float)
    return jnp.exp(log_multiplier)


# A multiplier of exp(-18) ≈ 1.5e-8 weighs nothing; below it, the log would only drift further out of reach.
MIN_LOG_MULTIPLIER = -18.0


def project_log_multiplier(log_multiplier: Array) -> Array:
    """The log of a multiplier, floored at MIN_LOG_MULTIPLIER (elementwise, any shape): applied after each step."""
    return jnp.maximum(log_multiplier, MIN_LOG_MULTIPLIER)


# ----------------------------------------------------------------------------------------------------
# The E-step: temperature duals and the weights they give
# ----------------------------------------------------------------------------------------------------


def mpo_temperature_loss(q_values: Array, log_prior: Array, log_temperature: Array, epsilon: Numeric
                         ) -> Tuple[Array, Array]:
    """MPO's E-step: the temperature's dual and the improved policy's weights over each state's candidate actions.

    With η = exp(log_temperature) and prior weights p = exp(log_prior) (each row summing to 1):
      weights[b, k] = p[b, k] exp(Q[b, k] / η) / Σ_j p[b, j] exp(Q[b, j] / η)
      loss          = η ε + η · mean_b log Σ_k p[b, k] exp(Q[b, k] / η)
    Minimising the loss over η gives the temperature at which KL(weights ‖ p) = ε on average. For K actions
    sampled from the target policy, log_prior = −log K; for all actions of a discrete space, the target policy's
    log-probabilities.

    Args:
      q_values: `[B, K]` action values of the candidates (gradient stopped).
      log_prior: `[B, K]` log-weights of the candidates under the target policy (gradient stopped).
      log_temperature: scalar log η (differentiated).
      epsilon: the bound ε > 0 on KL(weights ‖ prior).

    Returns:
      (scalar loss, `[B, K]` weights, gradient stopped).
    """
    chex.assert_rank([q_values, log_prior], 2)
    chex.assert_rank(log_temperature, 0)
    chex.assert_equal_shape([q_values, log_prior])
    chex.assert_type([q_values, log_prior, log_temperature], float)
    temperature = multiplier_from_log(log_temperature)
    logits = jax.lax.stop_gradient(q_values) / temperature + jax.lax.stop_gradient(log_prior)
    log_normaliser = jax.nn.logsumexp(logits, axis=-1)  # [B]
    loss = temperature * epsilon + temperature * jnp.mean(log_normaliser)
    weights = jax.lax.stop_gradient(jnp.exp(logits - log_normaliser[:, None]))
    return loss, weights


def top_k_count(num_samples: int, top_k_fraction: float) -> int:
    """How many of `num_samples` samples V-MPO keeps: ceil(fraction × N), at least one (static Python ints)."""
    return max(1, min(num_samples, math.ceil(top_k_fraction * num_samples - 1e-9)))


def vmpo_temperature_loss(advantages: Array, log_temperature: Array, epsilon: Numeric, top_k_fraction: float
                          ) -> Tuple[Array, Array]:
    """V-MPO's E-step over a batch of state-action samples: only the top `top_k_fraction` of advantages count.

    With η = exp(log_temperature) and S the k = ceil(fraction × N) samples of highest advantage:
      weights[i] = exp(A[i] / η) / Σ_{j ∈ S} exp(A[j] / η) for i ∈ S, else 0
      loss       = η ε + η · log( (1 / k) Σ_{j ∈ S} exp(A[j] / η) )
    This is MPO's dual for one "state" whose k candidates are the kept samples, each of prior weight 1 / k.

    Args:
      advantages: `[N]` advantages of the samples (gradient stopped).
      log_temperature: scalar log η (differentiated).
      epsilon: the bound ε_η > 0.
      top_k_fraction: static, in (0, 1].

    Returns:
      (scalar loss, `[N]` weights summing to 1, gradient stopped).
    """
    chex.assert_rank(advantages, 1)
    chex.assert_rank(log_temperature, 0)
    chex.assert_type([advantages, log_temperature], float)
    num_samples = advantages.shape[0]
    k = top_k_count(num_samples, top_k_fraction)
    kept_advantages, kept = jax.lax.top_k(jax.lax.stop_gradient(advantages), k)
    loss, kept_weights = mpo_temperature_loss(kept_advantages[None], jnp.full((1, k), -math.log(k)), log_temperature,
                                              epsilon)
    weights = jnp.zeros((num_samples,), advantages.dtype).at[kept].set(kept_weights[0])
    return loss, weights


# ----------------------------------------------------------------------------------------------------
# The M-step: weighted maximum likelihood under KL constraints
# ----------------------------------------------------------------------------------------------------


def weighted_log_likelihood_loss(log_probs: Array, weights: Array) -> Array:
    """The M-step's fit: −mean_b Σ_k weights[b, k] log π(a_k | s_b), the cross-entropy from the E-step's weights.

    Args:
      log_probs: `[B, K]` log-probabilities of the candidates under the learnt policy (differentiated).
      weights: `[B, K]` E-step weights (gradient stopped), each row summing to 1 (MPO) or all rows together (V-MPO,
        passed as `[1, N]`).

    Returns:
      scalar loss.
    """
    chex.assert_rank([log_probs, weights], 2)
    chex.assert_equal_shape([log_probs, weights])
    chex.assert_type([log_probs, weights], float)
    return -jnp.mean(jnp.sum(jax.lax.stop_gradient(weights) * log_probs, axis=-1))


def gaussian_kl_decoupled(target_loc: Array, target_scale: Array, online_loc: Array, online_scale: Array
                          ) -> Tuple[Array, Array]:
    """The KLs of a diagonal Gaussian's mean and of its scale, each with the other part held at the target's.

      KL_mean  = KL(N(μ_t, σ_t) ‖ N(μ, σ_t)) = Σ_d (μ − μ_t)² / (2 σ_t²)
      KL_scale = KL(N(μ_t, σ_t) ‖ N(μ_t, σ)) = Σ_d [log(σ / σ_t) + σ_t² / (2 σ²) − 1/2]
    They sum to the full KL only when one part does not move; bounding them apart is what lets the mean move
    faster than the scale. A tanh squashing applied to both distributions alike leaves each KL unchanged.

    Args:
      target_loc, target_scale: `[B, D]` the fixed Gaussian.
      online_loc, online_scale: `[B, D]` the learnt Gaussian (differentiated).

    Returns:
      (`[B]` KL of the mean, `[B]` KL of the scale).
    """
    chex.assert_rank([target_loc, target_scale, online_loc, online_scale], 2)
    chex.assert_equal_shape([target_loc, target_scale, online_loc, online_scale])
    chex.assert_type([target_loc, target_scale, online_loc, online_scale], float)
    kl_mean = jnp.sum(jnp.square(online_loc - target_loc) / (2.0 * jnp.square(target_scale)), axis=-1)
    variance_ratio = jnp.square(target_scale / online_scale)
    kl_scale = jnp.sum(0.5 * (variance_ratio - 1.0 - jnp.log(variance_ratio)), axis=-1)
    return kl_mean, kl_scale


def kl_constraint_loss(kl: Array, log_multipliers: Array, epsilons: Array) -> Array:
    """The Lagrangian of C KL bounds, mean over states: Σ_c [sg(α_c) · KL_c + α_c · (ε_c − sg(KL_c))].

    The first term pulls the policy towards the target with the multiplier's current weight; the second is the
    multiplier's own loss, which raises α_c while KL_c exceeds its bound ε_c and lowers it otherwise. With the
    stop-gradients each part moves only its own variable, so the sum can be differentiated in one pass.

    Args:
      kl: `[B, C]` per-state KLs of the learnt policy from the target (differentiated).
      log_multipliers: `[C]` log α (differentiated).
      epsilons: `[C]` the bounds, > 0.

    Returns:
      scalar loss.
    """
    chex.assert_rank(kl, 2)
    chex.assert_rank([log_multipliers, epsilons], 1)
    chex.assert_equal_shape([log_multipliers, epsilons])
    chex.assert_axis_dimension(kl, 1, log_multipliers.shape[0])
    chex.assert_type([kl, log_multipliers, epsilons], float)
    multipliers = multiplier_from_log(log_multipliers)
    policy_penalty = jax.lax.stop_gradient(multipliers) * kl
    multiplier_loss = multipliers * (epsilons - jax.lax.stop_gradient(kl))
    return jnp.mean(jnp.sum(policy_penalty + multiplier_loss, axis=-1))
