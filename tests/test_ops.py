"""Hand-worked checks of stoix_like.ops.

Expected numbers are worked out in the comments or by plain-Python / float64 numpy loops written here,
never by calling the function under test.
"""

import math

import chex
import distrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stoix_like.ops import losses, returns


def f32(x):
    return jnp.asarray(x, dtype=jnp.float32)


def i32(x):
    return jnp.asarray(x, dtype=jnp.int32)


def close(actual, expected, atol=1e-5):
    np.testing.assert_allclose(np.asarray(actual), np.asarray(expected, dtype=np.float64), atol=atol, rtol=1e-5)


# ----------------------------------------------------------------------------------------------------
# truncated_gae
# ----------------------------------------------------------------------------------------------------


def gae_reference(rewards, values, next_values, dones, truncations, gamma, lam):
    """Plain-Python backwards loop over a single (T,) column."""
    advantages = [0.0] * len(rewards)
    after = 0.0
    for t in reversed(range(len(rewards))):
        terminated = dones[t] and not truncations[t]
        delta = rewards[t] + gamma * (0.0 if terminated else next_values[t]) - values[t]
        after = delta + gamma * lam * (0.0 if dones[t] else 1.0) * after
        advantages[t] = after
    return advantages


def test_gae_truncated_then_reset_and_terminated():
    # gamma = lam = 0.5, so gamma * lam = 0.25. Column 0: episode truncated at t=1, a new one starts at t=2
    # (its first value 1 differs from the pre-reset successor value 10). Column 1: same data, but
    # terminated at t=1.
    rewards = f32([[1, 1], [2, 2], [3, 3], [4, 4]])
    values = f32([[1, 1], [1, 1], [1, 1], [1, 1]])
    next_values = f32([[1, 1], [10, 10], [1, 1], [2, 2]])
    dones = jnp.array([[0, 0], [1, 1], [0, 0], [0, 0]], dtype=bool)
    truncations = jnp.array([[0, 0], [1, 0], [0, 0], [0, 0]], dtype=bool)
    advantages, targets = returns.truncated_gae(rewards, values, next_values, dones, truncations, 0.5, 0.5)

    # Column 0 deltas: 1+0.5*1-1 = 0.5, 2+0.5*10-1 = 6 (bootstraps from next_values), 3+0.5-1 = 2.5, 4+1-1 = 4.
    # A3 = 4; A2 = 2.5 + 0.25*4 = 3.5; A1 = 6 (recursion cut at the truncation); A0 = 0.5 + 0.25*6 = 2.
    # Column 1: delta1 = 2 - 1 = 1 (no bootstrap after termination); A1 = 1; A0 = 0.5 + 0.25 = 0.75.
    close(advantages, [[2.0, 0.75], [6.0, 1.0], [3.5, 3.5], [4.0, 4.0]])
    close(targets, np.asarray(advantages) + 1.0)
    assert advantages.dtype == jnp.float32


def test_gae_does_not_cross_the_episode_boundary():
    rewards = f32([[1.0], [2.0], [3.0], [4.0]])
    values = f32([[0.5], [0.2], [0.1], [0.3]])
    next_values = f32([[0.2], [7.0], [0.3], [0.9]])
    dones = jnp.array([[False], [True], [False], [False]])
    truncations = dones
    first, _ = returns.truncated_gae(rewards, values, next_values, dones, truncations, 0.9, 0.95)
    changed, _ = returns.truncated_gae(
        rewards.at[2:].set(-100.0), values.at[2:].set(50.0), next_values.at[2:].set(-9.0),
        dones, truncations, 0.9, 0.95,
    )
    close(first[:2], changed[:2])
    close(first[1, 0], 2.0 + 0.9 * 7.0 - 0.2)


def test_gae_matches_loop_reference_on_random_rollout():
    rng = np.random.default_rng(0)
    num_steps, batch = 12, 3
    rewards = rng.normal(size=(num_steps, batch))
    values = rng.normal(size=(num_steps, batch))
    next_values = rng.normal(size=(num_steps, batch))
    dones = rng.random((num_steps, batch)) < 0.3
    truncations = dones & (rng.random((num_steps, batch)) < 0.5)
    advantages, targets = returns.truncated_gae(
        f32(rewards), f32(values), f32(next_values), dones, truncations, 0.97, 0.9
    )
    for b in range(batch):
        expected = gae_reference(
            rewards[:, b], values[:, b], next_values[:, b], dones[:, b], truncations[:, b], 0.97, 0.9
        )
        close(advantages[:, b], expected, atol=1e-4)
    close(targets, np.asarray(advantages) + values, atol=1e-4)


def test_gae_rejects_mismatched_shapes():
    with pytest.raises(AssertionError):
        returns.truncated_gae(f32(np.zeros((3, 2))), f32(np.zeros((3, 2))), f32(np.zeros((3, 1))),
                              np.zeros((3, 2), bool), np.zeros((3, 2), bool), 0.9, 0.9)


# ----------------------------------------------------------------------------------------------------
# lambda_returns
# ----------------------------------------------------------------------------------------------------


def lambda_reference(rewards, discounts, next_values, continuations, lam):
    out = [0.0] * len(rewards)
    for t in reversed(range(len(rewards))):
        tail = out[t + 1] if (t < len(rewards) - 1 and continuations[t]) else next_values[t]
        out[t] = rewards[t] + discounts[t] * ((1 - lam) * next_values[t] + lam * tail)
    return out


LAMBDA_CASE = dict(
    rewards=f32([1.0, 2.0, 3.0]),
    discounts=f32([0.5, 0.5, 0.0]),  # terminates at the last step
    next_values=f32([2.0, 4.0, 6.0]),
    continuations=f32([1.0, 1.0, 0.0]),
)


@pytest.mark.parametrize(
    "lam, expected",
    [
        (0.0, [2.0, 4.0, 3.0]),  # r + d * next_value
        (1.0, [2.75, 3.5, 3.0]),  # G2 = 3; G1 = 2 + 0.5*3; G0 = 1 + 0.5*3.5
        # G2 = 3; G1 = 2 + 0.5*(0.5*4 + 0.5*3) = 3.75; G0 = 1 + 0.5*(0.5*2 + 0.5*3.75) = 2.4375
        (0.5, [2.4375, 3.75, 3.0]),
    ],
)
def test_lambda_returns_hand_cases(lam, expected):
    close(returns.lambda_returns(lam=lam, **LAMBDA_CASE), expected)


def test_lambda_returns_cut_at_truncation_and_end_of_rollout():
    # Episode truncated at t=1 (discount stays 0.5, continuation 0). lam = 1:
    # G2 = 3 + 0.5*6 = 6 (bootstrap at the last row); G1 = 2 + 0.5*4 = 4 (cut); G0 = 1 + 0.5*4 = 3.
    out = returns.lambda_returns(
        f32([1.0, 2.0, 3.0]), f32([0.5, 0.5, 0.5]), f32([2.0, 4.0, 6.0]), jnp.array([True, False, True]), 1.0
    )
    close(out, [3.0, 4.0, 6.0])


def test_lambda_returns_matches_loop_reference_batched():
    rng = np.random.default_rng(1)
    rewards = rng.normal(size=(9, 4))
    ended = rng.random((9, 4)) < 0.3
    terminated = ended & (rng.random((9, 4)) < 0.5)
    discounts = 0.9 * (1.0 - terminated)
    next_values = rng.normal(size=(9, 4))
    out = returns.lambda_returns(f32(rewards), f32(discounts), f32(next_values), ~ended, 0.7)
    for b in range(4):
        close(out[:, b], lambda_reference(rewards[:, b], discounts[:, b], next_values[:, b], ~ended[:, b], 0.7),
              atol=1e-4)


# ----------------------------------------------------------------------------------------------------
# Actor-critic losses
# ----------------------------------------------------------------------------------------------------


def test_ppo_clip_loss():
    # ratios 1.5 and 0.5, eps 0.2: min(1.5*1, 1.2*1) = 1.2; min(0.5*-1, 0.8*-1) = -0.8 -> mean 0.2 -> loss -0.2.
    loss = losses.ppo_clip_loss(f32([math.log(1.5), math.log(0.5)]), f32([0.0, 0.0]), f32([1.0, -1.0]), 0.2)
    close(loss, -0.2)
    assert loss.shape == ()


def test_clipped_value_loss():
    # e0: unclipped (1-0.5)^2 = 0.25, clipped v=0.2 -> 0.09 -> 0.25; e1: both (0-1)^2 = 1. 0.5*mean = 0.3125.
    close(losses.clipped_value_loss(f32([1.0, 0.0]), f32([0.0, 0.0]), f32([0.5, 1.0]), 0.2), 0.3125)


def test_policy_gradient_loss_value_and_gradient():
    # -mean(log_prob * A) = -((-0.5 * 2) + (-2 * 1)) / 2 = 1.5; d/dlog_prob = -A / B = [-1, -0.5]; none through A.
    log_prob, advantages = f32([-0.5, -2.0]), f32([2.0, 1.0])
    close(losses.policy_gradient_loss(log_prob, advantages), 1.5)
    close(jax.grad(losses.policy_gradient_loss)(log_prob, advantages), [-1.0, -0.5])
    close(jax.grad(losses.policy_gradient_loss, argnums=1)(log_prob, advantages), [0.0, 0.0])


def test_ppo_penalty_loss_value_and_gradient():
    # ratios 1.5 and 0.5, A = [1, -1]: surrogate mean(1.5, -0.5) = 0.5; beta 2 × mean KL 0.2 = 0.4 -> loss -0.1.
    log_prob, old = f32([math.log(1.5), math.log(0.5)]), f32([0.0, 0.0])
    advantages, kl = f32([1.0, -1.0]), f32([0.1, 0.3])
    close(losses.ppo_penalty_loss(log_prob, old, advantages, kl, 2.0), -0.1)
    # d/dlog_prob of -mean(rho A) = -rho A / B = [-0.75, 0.25]; d/dKL = beta / B = [1, 1]
    close(jax.grad(losses.ppo_penalty_loss)(log_prob, old, advantages, kl, 2.0), [-0.75, 0.25])
    close(jax.grad(losses.ppo_penalty_loss, argnums=3)(log_prob, old, advantages, kl, 2.0), [1.0, 1.0])


@pytest.mark.parametrize("measured_kl, expected", [
    (0.005, 0.5),   # below 0.01 / 1.5 = 0.00667: halved
    (0.02, 2.0),    # above 1.5 × 0.01 = 0.015: doubled
    (0.01, 1.0),    # on target
    (0.007, 1.0),   # just inside the lower edge
    (0.014, 1.0),   # just inside the upper edge
])
def test_adapt_kl_coef_follows_the_paper_s_rule(measured_kl, expected):
    close(losses.adapt_kl_coef(f32(1.0), f32(measured_kl), 0.01), expected)


def test_adapt_kl_coef_stays_within_its_bounds():
    low, high = losses.KL_COEF_BOUNDS
    close(losses.adapt_kl_coef(f32(low), f32(0.0), 0.01), low)  # halving at the floor: stays at the floor
    np.testing.assert_allclose(losses.adapt_kl_coef(f32(high), f32(1.0), 0.01), high, rtol=1e-6)


def test_dpo_loss_by_hand():
    alpha, beta = 2.0, 0.6
    # A >= 0, ratio 2: (r - 1) A = 1, drift = 1 - 2 tanh(1/2); A >= 0, ratio 1/2: (r - 1) A < 0, drift 0
    # A < 0, ratio 1/2: log(r) A = log 2, drift = log 2 - 0.6 tanh(log 2 / 0.6); A < 0, ratio 2: log(r) A < 0, drift 0
    objectives = [2.0 - (1.0 - alpha * math.tanh(0.5)),
                  0.5,
                  -0.5 - (math.log(2.0) - beta * math.tanh(math.log(2.0) / beta)),
                  -2.0]
    log_prob = f32([math.log(2.0), math.log(0.5), math.log(0.5), math.log(2.0)])
    advantages = f32([1.0, 1.0, -1.0, -1.0])
    close(losses.dpo_loss(log_prob, f32([0.0] * 4), advantages, alpha, beta), -sum(objectives) / 4)


def test_dpo_loss_is_the_plain_surrogate_near_the_behaviour_policy():
    # the drift grows like x³ around ratio 1, so there its gradient is the surrogate's: d/dlog_prob = -A / B
    advantages = f32([1.5, -0.5, 2.0])
    gradient = jax.grad(losses.dpo_loss)(f32([0.0, 0.0, 0.0]), f32([0.0, 0.0, 0.0]), advantages, 2.0, 0.6)
    close(gradient, [-0.5, 1.0 / 6.0, -2.0 / 3.0])


def test_categorical_kl_divergence_by_hand():
    # p = (1/2, 1/2), q = (1/4, 3/4): KL = 1/2 log 2 + 1/2 log(2/3); KL(p || p) = 0
    expected = 0.5 * math.log(2.0) + 0.5 * math.log(2.0 / 3.0)
    logits_p = f32([[0.0, 0.0], [0.3, -1.0]])
    logits_q = f32([[math.log(0.25), math.log(0.75)], [0.3, -1.0]])
    close(losses.categorical_kl_divergence(logits_p, logits_q), [expected, 0.0])


def test_categorical_kl_divergence_ignores_illegal_actions():
    from stoix_like.ops.masking import mask_illegal

    mask = jnp.asarray([[True, True, False]])
    logits_p = mask_illegal(f32([[0.0, 0.0, 5.0]]), mask)
    logits_q = mask_illegal(f32([[math.log(0.25), math.log(0.75), -3.0]]), mask)
    close(losses.categorical_kl_divergence(logits_p, logits_q), [0.5 * math.log(2.0) + 0.5 * math.log(2.0 / 3.0)])


def test_gaussian_kl_divergence_by_hand():
    # dim 0: N(0, 1) || N(1, 2²) = log 2 + (1 + 1) / 8 - 1/2; dim 1: N(3, 1) || N(3, 1) = 0
    mean_p, log_std_p = f32([[0.0, 3.0]]), f32([[0.0, 0.0]])
    mean_q, log_std_q = f32([[1.0, 3.0]]), f32([[math.log(2.0), 0.0]])
    close(losses.gaussian_kl_divergence(mean_p, log_std_p, mean_q, log_std_q), [math.log(2.0) + 0.25 - 0.5])
    # N(0, 2²) || N(0, 1): log(1/2) + 4/2 - 1/2
    close(losses.gaussian_kl_divergence(f32([[0.0]]), f32([[math.log(2.0)]]), f32([[0.0]]), f32([[0.0]])),
          [math.log(0.5) + 1.5])


def test_huber_and_l2():
    close(losses.huber_loss(f32([0.5, -2.0, 3.0]), 1.0), [0.125, 1.5, 2.5])
    close(losses.l2_loss(f32([2.0, -1.0])), [2.0, 0.5])


# ----------------------------------------------------------------------------------------------------
# Q-learning
# ----------------------------------------------------------------------------------------------------

Q_TM1 = f32([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
A_TM1 = i32([2, 0])
R_T = f32([1.0, 1.0])
DISCOUNT_T = f32([0.5, 0.5])
Q_T = f32([[5.0, 10.0, 1.0], [5.0, 10.0, 1.0]])
MASK_T = jnp.array([[True, False, True], [True, True, True]])


def test_q_learning_masked_max_ignores_illegal_actions():
    # Row 0: max over legal {5, 1} = 5 -> 1 + 2.5 - 3 = 0.5. Row 1: all legal, max 10 -> 1 + 5 - 1 = 5.
    td = losses.q_learning_td_error(Q_TM1, A_TM1, R_T, DISCOUNT_T, Q_T, MASK_T)
    close(td, [0.5, 5.0])


def test_double_q_learning():
    selector = f32([[0.0, 100.0, 2.0], [0.0, 100.0, 2.0]])
    # Row 0: legal argmax of selector is action 2 -> value 1 -> 1 + 0.5 - 3 = -1.5.
    # Row 1: argmax is action 1 -> value 10 -> 1 + 5 - 1 = 5.
    td = losses.double_q_learning_td_error(Q_TM1, A_TM1, R_T, DISCOUNT_T, Q_T, selector, MASK_T)
    close(td, [-1.5, 5.0])


def test_q_learning_gradient_flows_only_through_q_tm1():
    grad_q_t = jax.grad(lambda q: losses.q_learning_td_error(Q_TM1, A_TM1, R_T, DISCOUNT_T, q, MASK_T).sum())(Q_T)
    grad_q_tm1 = jax.grad(lambda q: losses.q_learning_td_error(q, A_TM1, R_T, DISCOUNT_T, Q_T, MASK_T).sum())(Q_TM1)
    close(grad_q_t, np.zeros((2, 3)))
    close(grad_q_tm1, [[0.0, 0.0, -1.0], [-1.0, 0.0, 0.0]])


def test_q_learning_rejects_float_actions():
    with pytest.raises(AssertionError):
        losses.q_learning_td_error(Q_TM1, f32([2.0, 0.0]), R_T, DISCOUNT_T, Q_T, MASK_T)


# ----------------------------------------------------------------------------------------------------
# Munchausen
# ----------------------------------------------------------------------------------------------------


def munchausen_reference(q_t, q_tm1, a_tm1, r_t, discount_t, tau, alpha, l0, mask_t):
    """float64 numpy, one example at a time, written out term by term."""
    out = []
    for b in range(len(r_t)):
        logits_tm1 = np.asarray(q_tm1[b], np.float64) / tau
        log_pi_tm1 = logits_tm1 - math.log(np.sum(np.exp(logits_tm1)))
        bonus = min(max(tau * log_pi_tm1[a_tm1[b]], l0), 0.0)
        legal = [a for a in range(len(q_t[b])) if mask_t[b][a]]
        norm = sum(math.exp(q_t[b][a] / tau) for a in legal)
        soft_value = 0.0
        for a in legal:
            pi = math.exp(q_t[b][a] / tau) / norm
            soft_value += pi * (q_t[b][a] - tau * math.log(pi))
        out.append(r_t[b] + alpha * bonus + discount_t[b] * soft_value)
    return out


def test_munchausen_two_actions_by_hand():
    # tau = 1, q_tm1 = [0, ln 3] -> pi_tm1 = [1/4, 3/4].
    #   Row 0 took action 0: tau*log(1/4) = -1.386 -> clipped to -1 -> bonus 0.9 * -1 = -0.9.
    #   Row 1 took action 1: log(3/4) = -0.28768 -> bonus -0.258912.
    # q_t = [0, 0] -> pi uniform, soft value = sum 0.5 * (0 + ln 2) = ln 2.
    # Row 2: q_t = [0, 100] with action 1 illegal -> pi = [1, 0] -> soft value 0.
    ln3 = math.log(3.0)
    q_tm1 = f32([[0.0, ln3], [0.0, ln3], [0.0, ln3]])
    q_t = f32([[0.0, 0.0], [0.0, 0.0], [0.0, 100.0]])
    mask_t = jnp.array([[True, True], [True, True], [True, False]])
    target = losses.munchausen_q_target(q_t, q_tm1, i32([0, 1, 0]), f32([1.0, 1.0, 1.0]), f32([0.5, 0.5, 0.5]),
                                        1.0, 0.9, -1.0, mask_t)
    close(target, [1.0 - 0.9 + 0.5 * math.log(2.0), 1.0 + 0.9 * math.log(0.75) + 0.5 * math.log(2.0), 1.0 - 0.9])


def test_munchausen_matches_reference_with_small_temperature():
    rng = np.random.default_rng(3)
    q_t = rng.normal(size=(5, 4)) * 3
    q_tm1 = rng.normal(size=(5, 4)) * 3
    a_tm1 = rng.integers(0, 4, size=5)
    r_t = rng.normal(size=5)
    discount_t = np.full(5, 0.99)
    mask_t = rng.random((5, 4)) < 0.7
    mask_t[:, 0] = True
    target = losses.munchausen_q_target(f32(q_t), f32(q_tm1), i32(a_tm1), f32(r_t), f32(discount_t),
                                        0.03, 0.9, -1.0, jnp.asarray(mask_t))
    expected = munchausen_reference(q_t, q_tm1, a_tm1, r_t, discount_t, 0.03, 0.9, -1.0, mask_t)
    close(target, expected, atol=1e-4)
    assert np.all(np.isfinite(np.asarray(target)))


# ----------------------------------------------------------------------------------------------------
# Categorical (C51)
# ----------------------------------------------------------------------------------------------------


def test_categorical_projection_splits_between_neighbours():
    # Support [0, 1, 2]. Atom at 0.5 with mass 0.2 splits 0.1 / 0.1 onto 0 and 1; atom at 1 keeps 0.3 on 1;
    # atom at 3 is clipped to 2 and keeps 0.5 there.
    projected = losses.categorical_l2_project(f32([[0.5, 1.0, 3.0]]), f32([[0.2, 0.3, 0.5]]), f32([0.0, 1.0, 2.0]))
    close(projected, [[0.1, 0.4, 0.5]])
    # 0.25 of the way from 1 to 2: 3/4 of the mass stays on 1, 1/4 moves to 2. Shared (rank-1) z_p.
    projected = losses.categorical_l2_project(f32([1.25]), f32([[1.0]]), f32([0.0, 1.0, 2.0]))
    close(projected, [[0.0, 0.75, 0.25]])


def test_categorical_projection_non_uniform_support():
    # Support [0, 1, 3]: an atom at 2 is halfway between 1 and 3. An atom at -5 clips to 0.
    projected = losses.categorical_l2_project(f32([[2.0, -5.0]]), f32([[0.6, 0.4]]), f32([0.0, 1.0, 3.0]))
    close(projected, [[0.4, 0.3, 0.3]])


def test_categorical_projection_conserves_mass():
    rng = np.random.default_rng(4)
    atoms = np.linspace(-10.0, 10.0, 51)
    probs = rng.dirichlet(np.ones(51), size=8)
    z_p = rng.normal(size=(8, 1)) * 3 + rng.uniform(0.5, 1.0, size=(8, 1)) * atoms[None, :]
    projected = losses.categorical_l2_project(f32(z_p), f32(probs), f32(atoms))
    close(np.sum(np.asarray(projected), axis=-1), np.ones(8), atol=1e-5)
    assert np.all(np.asarray(projected) >= 0.0)
    # The mean is preserved too when nothing falls outside the support (linear interpolation).
    inside = np.abs(z_p).max(axis=-1) <= 10.0
    close((np.asarray(projected) @ atoms)[inside], np.sum(probs * z_p, axis=-1)[inside], atol=1e-4)


def test_categorical_q_learning_loss_by_hand():
    atoms = f32([0.0, 1.0, 2.0])
    # The selector prefers action 1, but it is illegal, so the next action is 0 with target probs
    # [0.2, 0.3, 0.5] on r + d*atoms = [0.5, 1.5, 2.5] -> projected [0.1, 0.1 + 0.15, 0.15 + 0.5]
    # = [0.1, 0.25, 0.65]. Prediction for a_tm1 = 1 is [0.25, 0.25, 0.5]:
    # CE = -(0.1 ln .25 + .25 ln .25 + .65 ln .5) = 0.35 * 2 ln 2 + 0.65 ln 2 = 1.35 ln 2.
    logits_t_target = jnp.log(f32([[[0.2, 0.3, 0.5], [1.0, 1e-6, 1e-6]]]))
    logits_tm1 = jnp.log(f32([[[1 / 3, 1 / 3, 1 / 3], [0.25, 0.25, 0.5]]]))
    loss = losses.categorical_q_learning_loss(
        logits_tm1, atoms, i32([1]), f32([0.5]), f32([1.0]), logits_t_target,
        f32([[0.0, 5.0]]), jnp.array([[True, False]]),
    )
    close(loss, [1.35 * math.log(2.0)])


# ----------------------------------------------------------------------------------------------------
# Quantile regression
# ----------------------------------------------------------------------------------------------------


def test_quantile_huber_loss_by_hand():
    taus = f32([0.25, 0.75])
    # One target sample 0.5 against quantiles [0, 1]: u = 0.5 (weight 0.25), u = -0.5 (weight |0.75-1| = 0.25).
    close(losses.quantile_huber_loss(f32([[0.0, 1.0]]), taus, f32([[0.5]]), 0.0), [0.25])  # 0.25*0.5 * 2
    close(losses.quantile_huber_loss(f32([[0.0, 1.0]]), taus, f32([[0.5]]), 1.0), [0.0625])  # 0.25*0.125 * 2
    # Targets [0.5, 2]: source 0 sees u = 0.5, 2 (both weight 0.25); source 1 sees u = -0.5 (0.25), 1 (0.75).
    # Absolute: mean(0.125, 0.5) + mean(0.125, 0.75) = 0.3125 + 0.4375 = 0.75.
    # Huber(1): mean(0.25*0.125, 0.25*1.5) + mean(0.25*0.125, 0.75*0.5) = 0.203125 * 2 = 0.40625.
    close(losses.quantile_huber_loss(f32([[0.0, 1.0]]), taus, f32([[0.5, 2.0]]), 0.0), [0.75])
    close(losses.quantile_huber_loss(f32([[0.0, 1.0]]), taus, f32([[0.5, 2.0]]), 1.0), [0.40625])


def _huber_by_autodiff(x, delta):
    # the Huber formula with no custom derivative: what autodiff gave before huber_loss had one
    abs_x = jnp.abs(x)
    quadratic = jnp.minimum(abs_x, delta)
    return 0.5 * quadratic**2 + delta * (abs_x - quadratic)


def test_huber_derivative_is_clip_and_matches_autodiff_of_its_formula():
    # ties at |x| = delta and x = 0 included: there autodiff splits the minimum's derivative, which sums to clip
    x = jnp.concatenate([f32([0.0, 1.0, -1.0, 0.5, -3.0]), jax.random.normal(jax.random.PRNGKey(0), (200,)) * 2])
    for delta in (1.0, 0.3):
        grad = jax.grad(lambda v: jnp.sum(losses.huber_loss(v, delta)))(x)
        # autodiff's chain of products rounds (within 1 ulp); clip is the exact derivative
        np.testing.assert_allclose(grad, jax.grad(lambda v: jnp.sum(_huber_by_autodiff(v, delta)))(x), rtol=1e-6)
        np.testing.assert_array_equal(grad, jnp.clip(x, -delta, delta))
        np.testing.assert_array_equal(losses.huber_loss(x, delta), _huber_by_autodiff(x, delta))


@pytest.mark.parametrize("huber_param", [0.0, 1.0])
def test_quantile_huber_loss_matches_its_previous_formula(huber_param):
    # the pairwise loss as written before its weight became one select and its Huber got a hand derivative
    def previous(dist_src, tau_src, dist_target):
        errors = jax.lax.stop_gradient(dist_target)[:, None, :] - dist_src[:, :, None]
        elementwise = _huber_by_autodiff(errors, huber_param) if huber_param > 0.0 else jnp.abs(errors)
        weight = jax.lax.stop_gradient(jnp.abs(tau_src[None, :, None] - (errors < 0.0).astype(errors.dtype)))
        return jnp.sum(jnp.mean(weight * elementwise, axis=-1), axis=-1)

    source_key, target_key = jax.random.split(jax.random.PRNGKey(3))
    dist_src = jax.random.normal(source_key, (64, 10)) * 3.0
    dist_target = jax.random.normal(target_key, (64, 10)) * 3.0
    dist_target = dist_target.at[:, 0].set(dist_src[:, 1] + 1.0)  # ties at |u| = 1 and u = 0 too
    dist_target = dist_target.at[:, 1].set(dist_src[:, 2])
    taus = (jnp.arange(10, dtype=jnp.float32) + 0.5) / 10
    new_loss, new_grad = jax.value_and_grad(lambda s: jnp.mean(losses.quantile_huber_loss(s, taus, dist_target,
                                                                                        huber_param)))(dist_src)
    old_loss, old_grad = jax.value_and_grad(lambda s: jnp.mean(previous(s, taus, dist_target)))(dist_src)
    np.testing.assert_allclose(new_loss, old_loss, rtol=1e-6)
    np.testing.assert_allclose(new_grad, old_grad, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(losses.quantile_huber_loss(dist_src, taus, dist_target, huber_param),
                               previous(dist_src, taus, dist_target), rtol=1e-6)


def test_quantile_q_learning_loss_by_hand():
    taus = f32([0.25, 0.75])
    quantiles_tm1 = f32([[[9.0, 9.0], [0.0, 1.0]]])
    # Selector prefers illegal action 1; action 0 is used: target = 0.5 + 1.0 * [0, 1] = [0.5, 1.5].
    quantiles_t_target = f32([[[0.0, 1.0], [50.0, 60.0]]])
    # Source 0 (tau .25): u = 0.5, 1.5 -> 0.25*(0.5+1.5)/2 = 0.25. Source 1 (tau .75): u = -0.5 -> 0.125,
    # u = 0.5 -> 0.375 -> mean 0.25. Total 0.5.
    loss = losses.quantile_q_learning_loss(
        quantiles_tm1, taus, i32([1]), f32([0.5]), f32([1.0]), quantiles_t_target,
        f32([[0.0, 5.0]]), jnp.array([[True, False]]), 0.0,
    )
    close(loss, [0.5])


# ----------------------------------------------------------------------------------------------------
# Continuous control
# ----------------------------------------------------------------------------------------------------


def test_tanh_gaussian_log_prob_matches_change_of_variables_and_distrax():
    rng = np.random.default_rng(5)
    mean = rng.normal(size=(6, 3))
    log_std = rng.uniform(-1.0, 0.5, size=(6, 3))
    pre_tanh = np.clip(mean + np.exp(log_std) * rng.normal(size=(6, 3)), -2.0, 2.0)
    pre_tanh[0] = [4.0, -6.0, 9.0]  # far into the saturated tails
    mean[0] = [3.0, -5.0, 8.0]
    got = losses.tanh_gaussian_log_prob(f32(mean), f32(log_std), f32(pre_tanh))

    std = np.exp(log_std)
    normal_log_pdf = -0.5 * ((pre_tanh - mean) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi)
    expected = np.sum(normal_log_pdf - np.log(1.0 - np.tanh(pre_tanh) ** 2), axis=-1)
    close(got, expected, atol=2e-4)

    # distrax inverts tanh, which is only accurate away from saturation: compare on the rows with |u| <= 2.
    squashed = distrax.Transformed(distrax.Normal(f32(mean[1:]), f32(std[1:])), distrax.Tanh())
    distrax_log_prob = jnp.sum(squashed.log_prob(jnp.tanh(f32(pre_tanh[1:]))), axis=-1)
    close(got[1:], distrax_log_prob, atol=1e-3)


def test_tanh_gaussian_log_prob_is_finite_at_extreme_samples():
    got = losses.tanh_gaussian_log_prob(f32([[0.0, 0.0]]), f32([[0.0, 0.0]]), f32([[50.0, -50.0]]))
    # log(1 - tanh(u)^2) ~ 2 log 2 - 2|u| for large |u|.
    expected = 2 * (-0.5 * 2500 - 0.5 * math.log(2 * math.pi)) - 2 * (2 * math.log(2.0) - 100.0)
    assert np.isfinite(np.asarray(got)).all()
    close(got, [expected], atol=1e-2)


def test_sac_temperature_loss_value_and_gradient():
    # alpha = 2, log_prob + target_entropy = [-2, -4] (mean -3) -> loss = -2 * -3 = 6; d/dlog_alpha = 6 too.
    log_alpha = f32(math.log(2.0))
    log_prob = f32([-1.0, -3.0])
    loss, grad = jax.value_and_grad(losses.sac_temperature_loss)(log_alpha, log_prob, -1.0)
    close(loss, 6.0)
    close(grad, 6.0)
    close(jax.grad(lambda lp: losses.sac_temperature_loss(log_alpha, lp, -1.0))(log_prob), [0.0, 0.0])


def test_losses_jit_and_keep_float32():
    @jax.jit
    def all_losses(q_tm1, q_t):
        return losses.q_learning_td_error(q_tm1, A_TM1, R_T, DISCOUNT_T, q_t, MASK_T)

    out = all_losses(Q_TM1, Q_T)
    chex.assert_type(out, jnp.float32)
    chex.assert_shape(out, (2,))
