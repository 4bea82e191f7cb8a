"""Value-based, distributional and actor-critic losses.

Batch-major: axis 0 is the batch B; A is the number of discrete actions, N / M numbers of atoms or
quantiles. Per-example losses return `[B]` so the caller chooses the reduction (mean, importance
weights); the policy-gradient losses (REINFORCE, PPO, PPO-penalty, DPO), AWR's and SAC's temperature loss return
the scalar mean they are always used as.

Targets are wrapped in `stop_gradient`: gradients flow only through the "online" inputs
(`q_tm1`, `logits_tm1`, `quantiles_tm1`, `log_prob`, `kl`, `values`, `log_alpha`).

Action masks are bool `[B, A]`, True for legal actions, and every row must have at least one legal action.
"""

from __future__ import annotations

import functools
from typing import Optional

import chex
import jax
import jax.numpy as jnp

from stoix_like.ops import returns, value_support
from stoix_like.ops.indexing import taken_action_values
from stoix_like.ops.masking import mask_illegal, masked_argmax, masked_max
from stoix_like.types import Array, Numeric

# ----------------------------------------------------------------------------------------------------
# Elementwise helpers
# ----------------------------------------------------------------------------------------------------


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def huber_loss(x: Array, delta: Numeric) -> Array:
    """Elementwise Huber loss: 0.5 x^2 for |x| <= delta, delta * (|x| - 0.5 delta) beyond. Any shape.

    Differentiable in `x` only (`delta` is a constant of the loss)."""
    chex.assert_type(x, float)
    abs_x = jnp.abs(x)
    quadratic = jnp.minimum(abs_x, delta)
    linear = abs_x - quadratic
    return 0.5 * quadratic**2 + delta * linear


@huber_loss.defjvp
def _huber_loss_jvp(delta: Numeric, primals: tuple, tangents: tuple) -> tuple:
    # The derivative is clip(x, -delta, delta), exactly; autodiff of the formula above gives the same up to
    # 1-ulp rounding (its minimum's tie at |x| = delta splits the derivative half and half between the two
    # terms, summing to delta) but spends a select-divide fusion per element on that tie: in QR-DQN's [B, N, M]
    # pairwise loss, with the products of the chain rule, that was a third of the loss's time on CPU.
    (x,), (x_dot,) = primals, tangents
    return huber_loss(x, delta), jnp.clip(x, -delta, delta) * x_dot


def l2_loss(x: Array) -> Array:
    """Elementwise 0.5 x^2. Any shape."""
    chex.assert_type(x, float)
    return 0.5 * jnp.square(x)


def _check_transition(a_tm1: Array, r_t: Array, discount_t: Array, batch_reference: Array) -> None:
    chex.assert_rank([a_tm1, r_t, discount_t], 1)
    chex.assert_type(a_tm1, int)
    chex.assert_type([r_t, discount_t], float)
    chex.assert_equal_shape([a_tm1, r_t, discount_t])
    chex.assert_equal_shape_prefix([batch_reference, r_t], 1)


def _check_q_learning_inputs(q_values: list, action_masks: list, a_tm1: Array, r_t: Array, discount_t: Array
                             ) -> None:
    """Every Q array (float) and action mask (bool) is `[B, A]`; actions, rewards and discounts are `[B]`."""
    chex.assert_rank(q_values + action_masks, 2)
    chex.assert_equal_shape(q_values + action_masks)
    chex.assert_type(q_values, float)
    chex.assert_type(action_masks, bool)
    _check_transition(a_tm1, r_t, discount_t, q_values[0])


# ----------------------------------------------------------------------------------------------------
# Actor-critic
# ----------------------------------------------------------------------------------------------------


def ppo_clip_loss(log_prob: Array, old_log_prob: Array, advantages: Array, clip_eps: Numeric) -> Array:
    """PPO clipped surrogate policy loss (to be minimised).

    Args:
      log_prob: `[B]` log pi(a|s) under the current policy (differentiated).
      old_log_prob: `[B]` log pi_old(a|s) recorded at collection time.
      advantages: `[B]` advantage estimates (normalise them beforehand if desired).
      clip_eps: ratio clipping epsilon, a scalar.

    Returns:
      scalar -mean(min(rho * A, clip(rho, 1 - eps, 1 + eps) * A)) with rho = exp(log_prob - old_log_prob).
    """
    chex.assert_rank([log_prob, old_log_prob, advantages], 1)
    chex.assert_equal_shape([log_prob, old_log_prob, advantages])
    chex.assert_type([log_prob, old_log_prob, advantages], float)
    ratio = jnp.exp(log_prob - jax.lax.stop_gradient(old_log_prob))
    advantages = jax.lax.stop_gradient(advantages)
    unclipped = ratio * advantages
    clipped = jnp.clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * advantages
    return -jnp.mean(jnp.minimum(unclipped, clipped))


def policy_gradient_loss(log_prob: Array, advantages: Array) -> Array:
    """REINFORCE's loss with a baseline: the negated likelihood-ratio gradient estimate (to be minimised).

    Args:
      log_prob: `[B]` log pi(a|s) of the taken actions under the current policy (differentiated).
      advantages: `[B]` returns minus the baseline (GAE with lambda 1: Monte-Carlo returns minus V(s)).

    Returns:
      scalar -mean(log_prob * A): its gradient is -mean(A * grad log pi(a|s)).
    """
    chex.assert_rank([log_prob, advantages], 1)
    chex.assert_equal_shape([log_prob, advantages])
    chex.assert_type([log_prob, advantages], float)
    return -jnp.mean(log_prob * jax.lax.stop_gradient(advantages))


def ppo_penalty_loss(log_prob: Array, old_log_prob: Array, advantages: Array, kl: Array, kl_coef: Numeric
                     ) -> Array:
    """PPO's KL-penalised surrogate (Schulman et al., 2017, section 4), to be minimised.

    Args:
      log_prob: `[B]` log pi(a|s) under the current policy (differentiated).
      old_log_prob: `[B]` log pi_old(a|s) recorded at collection time.
      advantages: `[B]` advantage estimates.
      kl: `[B]` KL(pi_old(.|s) || pi(.|s)) per state (differentiated through pi).
      kl_coef: beta, the penalty's weight, a scalar (adapted between updates by `adapt_kl_coef`).

    Returns:
      scalar -mean(rho * A) + beta * mean(KL), with rho = exp(log_prob - old_log_prob).
    """
    chex.assert_rank([log_prob, old_log_prob, advantages, kl], 1)
    chex.assert_equal_shape([log_prob, old_log_prob, advantages, kl])
    chex.assert_type([log_prob, old_log_prob, advantages, kl], float)
    ratio = jnp.exp(log_prob - jax.lax.stop_gradient(old_log_prob))
    surrogate = jnp.mean(ratio * jax.lax.stop_gradient(advantages))
    return -surrogate + jax.lax.stop_gradient(kl_coef) * jnp.mean(kl)


# Schulman et al. (2017), section 4: beta is halved below d_targ / 1.5 and doubled above 1.5 d_targ.
KL_TOLERANCE = 1.5
KL_COEF_FACTOR = 2.0
# A long run of quiet updates (a learning rate decayed towards 0) halves beta every update; kept above this, it never
# underflows to 0, from which doubling could not bring it back. Kept below the other bound, it never overflows.
KL_COEF_BOUNDS = (1e-6, 1e6)


def adapt_kl_coef(kl_coef: Array, measured_kl: Array, kl_target: Numeric) -> Array:
    """PPO-penalty's adaptive beta, after an update that moved the policy by `measured_kl`.

    Args:
      kl_coef: scalar beta used during the update.
      measured_kl: scalar d = E_s[KL(pi_old(.|s) || pi_new(.|s))] over the update's states.
      kl_target: scalar d_targ > 0.

    Returns:
      scalar beta / 2 if d < d_targ / 1.5, beta * 2 if d > 1.5 d_targ, else beta; clipped to KL_COEF_BOUNDS.
    """
    chex.assert_rank([kl_coef, measured_kl], 0)
    chex.assert_type([kl_coef, measured_kl], float)
    adapted = jnp.where(measured_kl < kl_target / KL_TOLERANCE, kl_coef / KL_COEF_FACTOR,
                        jnp.where(measured_kl > kl_target * KL_TOLERANCE, kl_coef * KL_COEF_FACTOR, kl_coef))
    return jnp.clip(adapted, *KL_COEF_BOUNDS)


def dpo_loss(log_prob: Array, old_log_prob: Array, advantages: Array, alpha: Numeric, beta: Numeric) -> Array:
    """Discovered Policy Optimisation's loss (Lu et al., 2022, "Discovered Policy Optimisation"), to be minimised.

    The surrogate rho * A minus DPO's drift, a penalty on moving the ratio rho = pi / pi_old in the advantage's
    direction that grows slowly at first and linearly later (the tanh saturates):
      A >= 0: drift = relu((rho - 1) A - alpha tanh((rho - 1) A / alpha))
      A <  0: drift = relu(log(rho) A - beta tanh(log(rho) A / beta))

    Args:
      log_prob: `[B]` log pi(a|s) under the current policy (differentiated).
      old_log_prob: `[B]` log pi_old(a|s) recorded at collection time.
      advantages: `[B]` advantage estimates.
      alpha: the drift's scale where A >= 0 (the paper's 2).
      beta: the drift's scale where A < 0 (the paper's 0.6).

    Returns:
      scalar -mean(rho * A - drift(rho, A)).
    """
    chex.assert_rank([log_prob, old_log_prob, advantages], 1)
    chex.assert_equal_shape([log_prob, old_log_prob, advantages])
    chex.assert_type([log_prob, old_log_prob, advantages], float)
    log_ratio = log_prob - jax.lax.stop_gradient(old_log_prob)
    ratio = jnp.exp(log_ratio)
    advantages = jax.lax.stop_gradient(advantages)
    gain_drift = jax.nn.relu((ratio - 1.0) * advantages - alpha * jnp.tanh((ratio - 1.0) * advantages / alpha))
    loss_drift = jax.nn.relu(log_ratio * advantages - beta * jnp.tanh(log_ratio * advantages / beta))
    drift = jnp.where(advantages >= 0.0, gain_drift, loss_drift)
    return -jnp.mean(ratio * advantages - drift)


def categorical_kl_divergence(logits_p: Array, logits_q: Array) -> Array:
    """KL(p || q) between categoricals given by logits, per example.

    Masked logits (ops.masking's finite fill) are fine when both share the mask: an illegal action has
    probability exactly 0 under p, and 0 times the finite difference of fills is 0.

    Args:
      logits_p: `[B, A]` logits of p.
      logits_q: `[B, A]` logits of q.

    Returns:
      `[B]` sum_a p(a) (log p(a) - log q(a)).
    """
    chex.assert_rank([logits_p, logits_q], 2)
    chex.assert_equal_shape([logits_p, logits_q])
    chex.assert_type([logits_p, logits_q], float)
    log_p = jax.nn.log_softmax(logits_p, axis=-1)
    log_q = jax.nn.log_softmax(logits_q, axis=-1)
    return jnp.sum(jnp.exp(log_p) * (log_p - log_q), axis=-1)


def gaussian_kl_divergence(mean_p: Array, log_std_p: Array, mean_q: Array, log_std_q: Array) -> Array:
    """KL(p || q) between diagonal Gaussians, per example, summed over dimensions.

    Also the KL between the tanh-squashed Gaussians they induce: tanh is a bijection, and KL is invariant under
    a bijection applied to both distributions.

    Args:
      mean_p, log_std_p: `[B, D]` means and log standard deviations of p.
      mean_q, log_std_q: `[B, D]` those of q.

    Returns:
      `[B]` sum_d [log(std_q / std_p) + (std_p^2 + (mean_p - mean_q)^2) / (2 std_q^2) - 1/2].
    """
    chex.assert_rank([mean_p, log_std_p, mean_q, log_std_q], 2)
    chex.assert_equal_shape([mean_p, log_std_p, mean_q, log_std_q])
    chex.assert_type([mean_p, log_std_p, mean_q, log_std_q], float)
    variance_ratio = jnp.exp(2.0 * (log_std_p - log_std_q))
    scaled_mean_gap = jnp.square((mean_p - mean_q) * jnp.exp(-log_std_q))
    return jnp.sum(log_std_q - log_std_p + 0.5 * (variance_ratio + scaled_mean_gap) - 0.5, axis=-1)


def clipped_value_loss(values: Array, old_values: Array, targets: Array, clip_eps: Numeric) -> Array:
    """PPO2-style clipped value loss.

    Args:
      values: `[B]` current value predictions (differentiated).
      old_values: `[B]` value predictions recorded at collection time.
      targets: `[B]` value targets (e.g. GAE value targets).
      clip_eps: how far the new prediction may move from `old_values` before it stops being rewarded.

    Returns:
      scalar 0.5 * mean(max((v - target)^2, (v_clipped - target)^2)),
      with v_clipped = old_values + clip(v - old_values, -eps, eps).
    """
    chex.assert_rank([values, old_values, targets], 1)
    chex.assert_equal_shape([values, old_values, targets])
    chex.assert_type([values, old_values, targets], float)
    old_values = jax.lax.stop_gradient(old_values)
    targets = jax.lax.stop_gradient(targets)
    values_clipped = old_values + jnp.clip(values - old_values, -clip_eps, clip_eps)
    squared_error = jnp.square(values - targets)
    squared_error_clipped = jnp.square(values_clipped - targets)
    return 0.5 * jnp.mean(jnp.maximum(squared_error, squared_error_clipped))


def advantage_weights(advantages: Array, temperature: Numeric, max_weight: Numeric, standardize: bool = False
                      ) -> Array:
    """AWR's weights of replayed actions (Peng et al., 2019): w = min(exp(A / temperature), max_weight).

    With `standardize`, A is first standardised over the batch, (A - mean) / (std + 1e-5), as the paper's code
    does: the temperature then reads in standard deviations of the advantage, whatever the reward scale.

    Args:
      advantages: `[B]` advantage estimates of the replayed actions.
      temperature: beta > 0; smaller values weight the best actions more sharply.
      max_weight: w_max > 0, the clip that keeps one large advantage from dominating the batch.
      standardize: static bool.

    Returns:
      `[B]` weights in (0, max_weight], wrapped in `stop_gradient`.
    """
    chex.assert_rank(advantages, 1)
    chex.assert_type(advantages, float)
    if standardize:
        advantages = (advantages - jnp.mean(advantages)) / (jnp.std(advantages) + 1e-5)
    # clipping the exponent first keeps exp finite; min(exp(x), w) == exp(min(x, log w))
    exponent = jnp.minimum(advantages / temperature, jnp.log(max_weight))
    return jax.lax.stop_gradient(jnp.exp(exponent))


def weighted_log_likelihood_loss(log_prob: Array, weights: Array) -> Array:
    """AWR's policy loss: the negative weighted log-likelihood of the replayed actions, -mean(w * log pi(a|s)).

    Args:
      log_prob: `[B]` log pi(a|s) of the replayed actions under the current policy (differentiated).
      weights: `[B]` per-action weights (`advantage_weights`; not differentiated).

    Returns:
      scalar loss.
    """
    chex.assert_rank([log_prob, weights], 1)
    chex.assert_equal_shape([log_prob, weights])
    chex.assert_type([log_prob, weights], float)
    return -jnp.mean(jax.lax.stop_gradient(weights) * log_prob)


def policy_distillation_loss(target_probs: Array, logits: Array) -> Array:
    """AlphaZero's policy loss: the cross-entropy of the policy's logits from a target distribution (a search's
    action weights), -mean_b sum_a p(a) log pi(a).

    Masked logits (ops.masking's finite fill) are fine when the target gives illegal actions probability 0: 0
    times the finite log-probability of the fill is 0.

    Args:
      target_probs: `[B, A]` probabilities, each row summing to 1 (not differentiated).
      logits: `[B, A]` the policy's logits (differentiated).

    Returns:
      scalar loss; it exceeds the loss of a policy equal to the target by E_b[KL(target ‖ pi)].
    """
    chex.assert_rank([target_probs, logits], 2)
    return jnp.mean(cross_entropy(target_probs, logits))


def cross_entropy(target_probs: Array, logits: Array) -> Array:
    """`[..., K]` -> `[...]`: -sum_k p(k) log softmax(logits)_k, the target not differentiated. A policy's loss
    against a search's weights, or a categorical head's against a two-hot target (MuZero's rewards and values)."""
    chex.assert_equal_shape([target_probs, logits])
    chex.assert_type([target_probs, logits], float)
    log_probs = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.sum(jax.lax.stop_gradient(target_probs) * log_probs, axis=-1)


# ----------------------------------------------------------------------------------------------------
# Q-learning
# ----------------------------------------------------------------------------------------------------


def q_learning_td_error(
    q_tm1: Array,
    a_tm1: Array,
    r_t: Array,
    discount_t: Array,
    q_t: Array,
    action_mask_t: Array,
) -> Array:
    """One-step Q-learning TD error with the max taken over legal actions only.

    Args:
      q_tm1: `[B, A]` Q(s_tm1, .) (differentiated).
      a_tm1: `[B]` int actions taken at s_tm1.
      r_t: `[B]` rewards.
      discount_t: `[B]` gamma * (1 - terminated).
      q_t: `[B, A]` Q_target(s_t, .).
      action_mask_t: `[B, A]` bool, legal actions at s_t.

    Returns:
      `[B]` td = r_t + discount_t * max_{a legal} q_t[a] - q_tm1[a_tm1].
    """
    _check_q_learning_inputs([q_tm1, q_t], [action_mask_t], a_tm1, r_t, discount_t)
    greedy_value = masked_max(q_t, action_mask_t)
    target = jax.lax.stop_gradient(r_t + discount_t * greedy_value)
    return target - taken_action_values(q_tm1, a_tm1)


def double_q_learning_td_error(
    q_tm1: Array,
    a_tm1: Array,
    r_t: Array,
    discount_t: Array,
    q_t_value: Array,
    q_t_selector: Array,
    action_mask_t: Array,
) -> Array:
    """Double Q-learning TD error: one network picks the action, the other values it.

    Args (q_tm1, a_tm1, r_t, discount_t and action_mask_t as in `q_learning_td_error`):
      q_t_value: `[B, A]` Q values at s_t used to evaluate the chosen action (usually the target network).
      q_t_selector: `[B, A]` Q values at s_t used to choose the action (usually the online network).

    Returns:
      `[B]` td = r_t + discount_t * q_t_value[argmax_{a legal} q_t_selector[a]] - q_tm1[a_tm1].
    """
    _check_q_learning_inputs([q_tm1, q_t_value, q_t_selector], [action_mask_t], a_tm1, r_t, discount_t)
    greedy_action = masked_argmax(q_t_selector, action_mask_t)
    target = jax.lax.stop_gradient(r_t + discount_t * taken_action_values(q_t_value, greedy_action))
    return target - taken_action_values(q_tm1, a_tm1)


def rescaled_n_step_double_q_td_errors(
    q_tm1: Array,
    a_tm1: Array,
    r_t: Array,
    discount_t: Array,
    last_t: Array,
    q_t_value: Array,
    q_t_selector: Array,
    action_mask_t: Array,
    n_step: int,
    gamma: Numeric,
) -> Array:
    """R2D2's TD errors over a sequence: n-step double Q-learning on value-rescaled Q-values (Kapturowski et al.,
    2019; h from Pohlen et al., 2018). Time-major, `[T, B]`, where step t's successor s'_t is the true (pre-reset)
    next state.

    Args:
      q_tm1: `[T, B, A]` online Q(s_t, ·), in h-space (what the network outputs).
      a_tm1: `[T, B]` int actions taken; r_t, discount_t, last_t: `[T, B]` each step's reward, env discount (0 at
        termination) and whether the episode ended there (see `returns.n_step_returns`).
      q_t_value: `[T, B, A]` target-network Q(s'_t, ·), which values the chosen successor action.
      q_t_selector: `[T, B, A]` online Q(s'_t, ·), which chooses it (greedy over legal actions).
      action_mask_t: `[T, B, A]` bool, the legal actions at s'_t.

    Returns:
      `[T, B]` td_t = h(G_t) − q_tm1[a_tm1], with G_t `returns.n_step_returns` over the bootstrap values
      v_t = h⁻¹(q_t_value[argmax_{a legal} q_t_selector[a]]): returns are summed in the env's scale, regressed in h's.
    """
    chex.assert_rank([q_tm1, q_t_value, q_t_selector, action_mask_t], 3)
    chex.assert_equal_shape([q_tm1, q_t_value, q_t_selector, action_mask_t])
    chex.assert_rank([a_tm1, r_t, discount_t, last_t], 2)
    chex.assert_equal_shape([a_tm1, r_t, discount_t, last_t])
    chex.assert_equal_shape_prefix([q_tm1, a_tm1], 2)
    chex.assert_type(a_tm1, int)
    greedy_action = masked_argmax(q_t_selector, action_mask_t)
    chosen_value = jnp.take_along_axis(q_t_value, greedy_action[..., None], axis=-1)[..., 0]
    bootstrap_values = value_support.inverse_value_transform(chosen_value)
    target = value_support.value_transform(
        returns.n_step_returns(r_t, discount_t, last_t, bootstrap_values, n_step, gamma))
    taken = jnp.take_along_axis(q_tm1, a_tm1[..., None], axis=-1)[..., 0]
    return jax.lax.stop_gradient(target) - taken


def sequence_priorities(td_errors: Array, max_weight: Numeric) -> Array:
    """A replayed sequence's priority: η·max_t |δ_t| + (1 − η)·mean_t |δ_t| (R2D2; η = 0.9 there): the max keeps
    a sequence with one large error from being averaged away by its many small ones.

    Args:
      td_errors: `[T, B]` the TD errors of the steps learnt from (after the burn-in).
      max_weight: η in [0, 1].

    Returns:
      `[B]` priorities, wrapped in `stop_gradient`.
    """
    chex.assert_rank(td_errors, 2)
    magnitude = jnp.abs(jax.lax.stop_gradient(td_errors))
    return max_weight * jnp.max(magnitude, axis=0) + (1.0 - max_weight) * jnp.mean(magnitude, axis=0)


def munchausen_q_target(
    q_t_target: Array,
    q_tm1_target: Array,
    a_tm1: Array,
    r_t: Array,
    discount_t: Array,
    entropy_temperature: Numeric,
    munchausen_coefficient: Numeric,
    clip_value_min: Numeric,
    action_mask_t: Array,
    action_mask_tm1: Optional[Array] = None,
) -> Array:
    """Munchausen-DQN regression target.

    With pi(.|s) = softmax(q(s, .) / tau) over legal actions (tau = `entropy_temperature`),
      target = r_t
             + alpha * clip(tau * log pi(a_tm1 | s_tm1), clip_value_min, 0)
             + discount_t * sum_{a legal} pi(a | s_t) * (q_t_target[a] - tau * log pi(a | s_t)).
    tau * log pi is computed stably as q - max(q) - tau * log sum exp((q - max(q)) / tau).

    Args:
      q_t_target: `[B, A]` target-network Q(s_t, .).
      q_tm1_target: `[B, A]` target-network Q(s_tm1, .).
      a_tm1: `[B]` int actions taken at s_tm1.
      r_t: `[B]` rewards.
      discount_t: `[B]` gamma * (1 - terminated).
      entropy_temperature: tau > 0.
      munchausen_coefficient: alpha (0.9 in the paper).
      clip_value_min: l0 < 0, lower clip of the Munchausen bonus (-1 in the paper).
      action_mask_t: `[B, A]` bool, legal actions at s_t.
      action_mask_tm1: optional `[B, A]` bool, legal actions at s_tm1 (all legal when omitted).

    Returns:
      `[B]` targets, wrapped in `stop_gradient`.
    """
    if action_mask_tm1 is None:
        action_mask_tm1 = jnp.ones(q_tm1_target.shape, dtype=bool)
    _check_q_learning_inputs([q_t_target, q_tm1_target], [action_mask_t, action_mask_tm1], a_tm1, r_t, discount_t)

    def scaled_log_policy(q_values: Array, action_mask: Array) -> Array:
        """tau * log softmax(q / tau) over legal actions; illegal entries are zeroed."""
        log_policy = jax.nn.log_softmax(mask_illegal(q_values, action_mask) / entropy_temperature, axis=-1)
        return jnp.where(action_mask, entropy_temperature * log_policy, 0.0)

    scaled_log_policy_tm1 = scaled_log_policy(q_tm1_target, action_mask_tm1)
    munchausen_bonus = jnp.clip(taken_action_values(scaled_log_policy_tm1, a_tm1), clip_value_min, 0.0)

    scaled_log_policy_t = scaled_log_policy(q_t_target, action_mask_t)
    policy_t = jax.nn.softmax(mask_illegal(q_t_target, action_mask_t) / entropy_temperature, axis=-1)
    policy_t = jnp.where(action_mask_t, policy_t, 0.0)
    soft_value_t = jnp.sum(policy_t * (q_t_target - scaled_log_policy_t), axis=-1)

    target = r_t + munchausen_coefficient * munchausen_bonus + discount_t * soft_value_t
    return jax.lax.stop_gradient(target)


# ----------------------------------------------------------------------------------------------------
# Distributional: categorical (C51)
# ----------------------------------------------------------------------------------------------------


def categorical_l2_project(z_p: Array, probs: Array, z_q: Array) -> Array:
    """Projects categorical distributions on supports `z_p` onto the fixed, sorted support `z_q` (C51).

    Each source atom's mass is split between the two target atoms that bracket it, in proportion to
    its distance from each (the L2 / Cramer projection); atoms outside [z_q[0], z_q[-1]] are clipped to
    the nearest end first, so total mass is conserved. Non-uniform `z_q` spacing is handled.

    Args:
      z_p: `[B, N]` (per-example support, e.g. r + gamma * atoms) or `[N]` (shared) source atom locations.
      probs: `[B, N]` source probabilities.
      z_q: `[M]` target atom locations, strictly increasing.

    Returns:
      `[B, M]` projected probabilities.
    """
    chex.assert_rank(probs, 2)
    chex.assert_rank(z_q, 1)
    chex.assert_rank(z_p, {1, 2})
    chex.assert_type([z_p, probs, z_q], float)
    if z_p.ndim == 1:
        z_p = jnp.broadcast_to(z_p, probs.shape)
    chex.assert_equal_shape([z_p, probs])

    num_target_atoms = z_q.shape[0]
    if num_target_atoms == 1:
        return jnp.sum(probs, axis=-1, keepdims=True)
    # A source atom between target atoms l and l + 1 sends them (1 - f) and f of its mass, f its fractional
    # distance from z_q[l]: the triangular kernel of the projection, nonzero only at the two bracketing atoms. So
    # the projection is 2N scatter-adds per example, not a dense [N, M] weight matrix (which cost 3-4x the time on
    # CPU at 21-51 atoms and dominated C51's learning step).
    z_p = jnp.clip(z_p, z_q[0], z_q[-1])
    lower = jnp.clip(jnp.searchsorted(z_q, z_p, side="right") - 1, 0, num_target_atoms - 2)
    lower_atom, upper_atom = z_q[lower], z_q[lower + 1]
    fraction = (z_p - lower_atom) / (upper_atom - lower_atom)
    rows = jnp.arange(probs.shape[0])[:, None]
    projected = jnp.zeros((probs.shape[0], num_target_atoms), probs.dtype)
    return projected.at[rows, lower].add(probs * (1.0 - fraction)).at[rows, lower + 1].add(probs * fraction)


def categorical_q_learning_loss(
    logits_tm1: Array,
    atoms: Array,
    a_tm1: Array,
    r_t: Array,
    discount_t: Array,
    logits_t_target: Array,
    q_t_selector: Array,
    action_mask_t: Array,
) -> Array:
    """C51 loss: cross-entropy between Q(s_tm1, a_tm1) and the projected distributional target.

    The next action is argmax over legal actions of `q_t_selector` (pass the target network's expected
    Q for C51, the online network's for a double-Q variant). The target distribution on support
    r_t + discount_t * atoms is projected back onto `atoms`.

    Args:
      logits_tm1: `[B, A, N]` online logits at s_tm1 (differentiated).
      atoms: `[N]` fixed, increasing support.
      a_tm1: `[B]` int actions taken at s_tm1.
      r_t: `[B]` rewards.
      discount_t: `[B]` gamma * (1 - terminated).
      logits_t_target: `[B, A, N]` target-network logits at s_t.
      q_t_selector: `[B, A]` Q values used to choose the next action.
      action_mask_t: `[B, A]` bool, legal actions at s_t.

    Returns:
      `[B]` per-example cross-entropy.
    """
    chex.assert_rank([logits_tm1, logits_t_target], 3)
    chex.assert_rank([q_t_selector, action_mask_t], 2)
    chex.assert_rank(atoms, 1)
    chex.assert_equal_shape([logits_tm1, logits_t_target])
    chex.assert_equal_shape([q_t_selector, action_mask_t])
    chex.assert_equal_shape_prefix([logits_tm1, q_t_selector], 2)
    chex.assert_axis_dimension(logits_tm1, 2, atoms.shape[0])
    chex.assert_type([logits_tm1, atoms, logits_t_target, q_t_selector], float)
    chex.assert_type(action_mask_t, bool)
    _check_transition(a_tm1, r_t, discount_t, logits_tm1)

    next_action = masked_argmax(q_t_selector, action_mask_t)
    target_probs_unprojected = jax.nn.softmax(taken_action_values(logits_t_target, next_action), axis=-1)
    target_support = r_t[:, None] + discount_t[:, None] * atoms[None, :]
    target_probs = jax.lax.stop_gradient(
        categorical_l2_project(target_support, target_probs_unprojected, atoms)
    )
    log_probs_tm1 = jax.nn.log_softmax(taken_action_values(logits_tm1, a_tm1), axis=-1)
    return -jnp.sum(target_probs * log_probs_tm1, axis=-1)


# ----------------------------------------------------------------------------------------------------
# Distributional: quantile regression (QR-DQN)
# ----------------------------------------------------------------------------------------------------


def quantile_huber_loss(dist_src: Array, tau_src: Array, dist_target: Array, huber_param: float) -> Array:
    """Quantile-regression (Huber) loss between predicted quantiles and target samples.

    For every pair (i, j), with u_ij = dist_target[j] - dist_src[i]:
      rho_ij = |tau_src[i] - 1{u_ij < 0}| * L(u_ij),
    where L = `huber_loss(., huber_param)` if huber_param > 0 else |.| (plain quantile regression).
    The loss sums over source quantiles i and averages over target samples j. Huber is not divided by
    huber_param (as in rlax and Stoix), so huber_param = 1 matches the QR-DQN paper.

    Args:
      dist_src: `[B, N]` predicted quantile values (differentiated).
      tau_src: `[N]` quantile midpoints of `dist_src`, e.g. (2i + 1) / (2N).
      dist_target: `[B, M]` target samples (gradient stopped).
      huber_param: static Python float >= 0.

    Returns:
      `[B]` per-example loss.
    """
    chex.assert_rank([dist_src, dist_target], 2)
    chex.assert_rank(tau_src, 1)
    chex.assert_equal_shape_prefix([dist_src, dist_target], 1)
    chex.assert_axis_dimension(dist_src, 1, tau_src.shape[0])
    chex.assert_type([dist_src, tau_src, dist_target], float)

    dist_target = jax.lax.stop_gradient(dist_target)
    errors = dist_target[:, None, :] - dist_src[:, :, None]  # [B, N, M]
    if huber_param > 0.0:
        elementwise = huber_loss(errors, huber_param)
    else:
        elementwise = jnp.abs(errors)
    # |tau - 1{u < 0}| as one select (the same bits: |tau - 1| = 1 - tau), not a convert, subtract and abs
    tau = tau_src[None, :, None]
    asymmetric_weight = jnp.where(errors < 0.0, 1.0 - tau, tau)
    # Gradients of the indicator are zero anyway; stopping them keeps the weight a constant.
    asymmetric_weight = jax.lax.stop_gradient(asymmetric_weight)
    return jnp.sum(jnp.mean(asymmetric_weight * elementwise, axis=-1), axis=-1)


def quantile_q_learning_loss(
    quantiles_tm1: Array,
    taus: Array,
    a_tm1: Array,
    r_t: Array,
    discount_t: Array,
    quantiles_t_target: Array,
    q_t_selector: Array,
    action_mask_t: Array,
    huber_param: float,
) -> Array:
    """QR-DQN loss: quantile Huber loss between Z(s_tm1, a_tm1) and r_t + discount_t * Z_target(s_t, a*).

    a* = argmax over legal actions of `q_t_selector` (usually the mean over quantiles of the target
    network's, or the online network's for a double-Q variant).

    Args (a_tm1, r_t, discount_t, q_t_selector and action_mask_t as in `categorical_q_learning_loss`):
      quantiles_tm1: `[B, A, N]` online quantiles at s_tm1 (differentiated).
      taus: `[N]` quantile midpoints.
      quantiles_t_target: `[B, A, N]` target-network quantiles at s_t.
      huber_param: static Python float >= 0 (see `quantile_huber_loss`).

    Returns:
      `[B]` per-example loss.
    """
    chex.assert_rank([quantiles_tm1, quantiles_t_target], 3)
    chex.assert_rank([q_t_selector, action_mask_t], 2)
    chex.assert_equal_shape([quantiles_tm1, quantiles_t_target])
    chex.assert_equal_shape([q_t_selector, action_mask_t])
    chex.assert_equal_shape_prefix([quantiles_tm1, q_t_selector], 2)
    chex.assert_type([quantiles_tm1, quantiles_t_target, q_t_selector], float)
    chex.assert_type(action_mask_t, bool)
    _check_transition(a_tm1, r_t, discount_t, quantiles_tm1)

    next_action = masked_argmax(q_t_selector, action_mask_t)
    target = r_t[:, None] + discount_t[:, None] * taken_action_values(quantiles_t_target, next_action)
    return quantile_huber_loss(taken_action_values(quantiles_tm1, a_tm1), taus, target, huber_param)


# ----------------------------------------------------------------------------------------------------
# Continuous control (SAC)
# ----------------------------------------------------------------------------------------------------


def tanh_gaussian_log_prob(mean: Array, log_std: Array, pre_tanh_sample: Array) -> Array:
    """Log-density of a = tanh(u), u ~ Normal(mean, exp(log_std)) diagonal, at a = tanh(pre_tanh_sample).

    log p(a) = sum_d [log N(u_d; mean_d, std_d) - log(1 - tanh(u_d)^2)], with the Jacobian term computed
    stably as log(1 - tanh(u)^2) = 2 * (log 2 - u - softplus(-2u)) so large |u| never takes log(0).
    Pass the pre-tanh sample rather than the action: inverting tanh near +-1 loses all precision.

    Args:
      mean: `[B, D]` Gaussian means.
      log_std: `[B, D]` Gaussian log standard deviations.
      pre_tanh_sample: `[B, D]` u, the Gaussian sample before squashing.

    Returns:
      `[B]` log-probabilities of the squashed actions.
    """
    chex.assert_rank([mean, log_std, pre_tanh_sample], 2)
    chex.assert_equal_shape([mean, log_std, pre_tanh_sample])
    chex.assert_type([mean, log_std, pre_tanh_sample], float)
    standardised = (pre_tanh_sample - mean) * jnp.exp(-log_std)
    gaussian_log_prob = -0.5 * jnp.square(standardised) - log_std - 0.5 * jnp.log(2.0 * jnp.pi)
    log_tanh_jacobian = 2.0 * (jnp.log(2.0) - pre_tanh_sample - jax.nn.softplus(-2.0 * pre_tanh_sample))
    return jnp.sum(gaussian_log_prob - log_tanh_jacobian, axis=-1)


def sac_temperature_loss(log_alpha: Array, log_prob: Array, target_entropy: Numeric) -> Array:
    """SAC entropy-temperature loss: -mean(alpha * (log_prob + target_entropy)), alpha = exp(log_alpha).

    Minimising it raises alpha when the policy entropy (-log_prob) is below `target_entropy` and lowers
    it otherwise. Only `log_alpha` is differentiated.

    Args:
      log_alpha: scalar log temperature (differentiated).
      log_prob: `[B]` log pi(a|s) of actions sampled from the current policy.
      target_entropy: scalar, typically -action_dim.

    Returns:
      scalar loss.
    """
    chex.assert_rank(log_alpha, 0)
    chex.assert_rank(log_prob, 1)
    chex.assert_type([log_alpha, log_prob], float)
    entropy_gap = jax.lax.stop_gradient(log_prob + target_entropy)
    return -jnp.mean(jnp.exp(log_alpha) * entropy_gap)


def clipped_double_q_target(r_t: Array, discount_t: Array, q_t: Array, entropy_penalty_t: Optional[Array] = None
                            ) -> Array:
    """TD target from an ensemble of critics: r_t + discount_t * (min_c q_t[c] - entropy_penalty_t).

    The minimum over critics counters the overestimation a single critic suffers (TD3's clipped double Q);
    with one critic it is the plain DDPG target. SAC passes entropy_penalty_t = alpha * log pi(a_t|s_t).
    A truncated transition keeps discount_t = gamma, so the target still bootstraps from q_t.

    Args:
      r_t: `[B]` rewards (n-step sums).
      discount_t: `[B]` gamma^n * (1 - terminated).
      q_t: `[C, B]` target critics' values of (s_t, a_t), a_t drawn from the (target) policy.
      entropy_penalty_t: optional `[B]`.

    Returns:
      `[B]` targets, wrapped in `stop_gradient`.
    """
    chex.assert_rank([r_t, discount_t], 1)
    chex.assert_rank(q_t, 2)
    chex.assert_equal_shape([r_t, discount_t])
    chex.assert_equal_shape_suffix([q_t, r_t], 1)
    chex.assert_type([r_t, discount_t, q_t], float)
    next_value = jnp.min(q_t, axis=0)
    if entropy_penalty_t is not None:
        chex.assert_equal_shape([entropy_penalty_t, r_t])
        next_value = next_value - entropy_penalty_t
    return jax.lax.stop_gradient(r_t + discount_t * next_value)


def categorical_td_learning_loss(logits_tm1: Array, atoms: Array, r_t: Array, discount_t: Array,
                                 logits_t: Array) -> Array:
    """Distributional TD loss for a categorical critic of a given action (D4PG): cross-entropy between
    Z(s_tm1, a_tm1) and r_t + discount_t * Z_target(s_t, a_t), projected back onto `atoms`.

    Args:
      logits_tm1: `[B, N]` online logits of Z(s_tm1, a_tm1) (differentiated).
      atoms: `[N]` fixed, increasing support.
      r_t: `[B]` rewards (n-step sums).
      discount_t: `[B]` gamma^n * (1 - terminated).
      logits_t: `[B, N]` target logits of Z(s_t, a_t), a_t from the target policy.

    Returns:
      `[B]` per-example cross-entropy.
    """
    chex.assert_rank([logits_tm1, logits_t], 2)
    chex.assert_rank([atoms, r_t, discount_t], 1)
    chex.assert_equal_shape([logits_tm1, logits_t])
    chex.assert_equal_shape([r_t, discount_t])
    chex.assert_axis_dimension(logits_tm1, 1, atoms.shape[0])
    chex.assert_type([logits_tm1, atoms, r_t, discount_t, logits_t], float)
    target_support = r_t[:, None] + discount_t[:, None] * atoms[None, :]
    target_probs = jax.lax.stop_gradient(
        categorical_l2_project(target_support, jax.nn.softmax(logits_t, axis=-1), atoms))
    return -jnp.sum(target_probs * jax.nn.log_softmax(logits_tm1, axis=-1), axis=-1)
