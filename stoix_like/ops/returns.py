"""Time-major return estimators.

Every array here is time-major: axis 0 is time (length T), any further axes (typically the env batch B)
are carried along elementwise. Episode boundaries inside a rollout follow the house convention
(see DESIGN.md, "Environments"): an auto-reset environment reports, for step t, the reward r_t, whether
the episode ended at t, and the *pre-reset* successor observation, so `next_values[t]` is always the value
of the state that step t really led to, even when the next row of the rollout belongs to a new episode.

Two flags describe an ending, and they play different roles:
  * termination (discount 0) removes the bootstrap: nothing follows a true terminal state;
  * any ending (termination or truncation by a time limit) cuts the multi-step recursion, because the
    next row of the rollout belongs to another episode. At a truncation the bootstrap still comes from
    `next_values[t]`, so nothing is lost by cutting there.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp

from stoix_like.types import Array, Numeric


def _as_float(x: Array, like: Array) -> Array:
    """Casts a bool/int/float flag array to the dtype of `like` (float32 in practice)."""
    return jnp.asarray(x).astype(like.dtype)


def truncated_gae(
    rewards: Array,
    values: Array,
    next_values: Array,
    dones: Array,
    truncations: Array,
    gamma: Numeric,
    gae_lambda: Numeric,
) -> tuple[Array, Array]:
    """Generalised advantage estimation that handles time-limit truncation inside a rollout.

    Shapes: all five arrays are time-major `(T, ...)` with identical shapes (typically `(T, B)`).

    Args:
      rewards: r_t, reward received for the transition at step t.
      values: V(s_t), value of the observation the action at step t was taken from.
      next_values: V(s'_t), value of the true (pre-reset) successor observation of step t.
      dones: True where the episode ended at step t, for any reason (termination or truncation).
        bool or {0, 1} float.
      truncations: True where the episode ended at step t because of a time limit (a subset of `dones`).
      gamma: discount factor, a scalar.
      gae_lambda: GAE lambda, a scalar.

    With terminated_t = dones_t and not truncations_t:
      delta_t = r_t + gamma * (1 - terminated_t) * next_values_t - values_t
      A_t     = delta_t + gamma * gae_lambda * (1 - dones_t) * A_{t+1},   A_T = 0
    so the recursion never crosses an episode boundary, a truncated step bootstraps from its own
    `next_values`, and a terminated step does not bootstrap at all. The last row needs no special case
    because `next_values[T-1]` already carries the bootstrap for the unfinished episode.

    Returns:
      (advantages, value_targets), both `(T, ...)`, with value_targets = advantages + values.
      Both are wrapped in `stop_gradient`: they are regression targets, not differentiable quantities.
    """
    chex.assert_rank([rewards, values, next_values, dones, truncations], rewards.ndim)
    chex.assert_axis_dimension_gt(rewards, 0, 0)
    chex.assert_equal_shape([rewards, values, next_values, dones, truncations])
    chex.assert_type([rewards, values, next_values], float)

    done = _as_float(dones, rewards)
    truncated = _as_float(truncations, rewards)
    not_terminated = 1.0 - done * (1.0 - truncated)
    deltas = rewards + gamma * not_terminated * next_values - values
    recursion_weights = gamma * gae_lambda * (1.0 - done)

    def accumulate_backwards(advantage_after, step):
        delta, recursion_weight = step
        advantage = delta + recursion_weight * advantage_after
        return advantage, advantage

    _, advantages = jax.lax.scan(
        accumulate_backwards,
        jnp.zeros_like(rewards[0]),
        (deltas, recursion_weights),
        reverse=True,
    )
    advantages = jax.lax.stop_gradient(advantages)
    value_targets = jax.lax.stop_gradient(advantages + values)
    return advantages, value_targets


def lambda_returns(
    rewards: Array,
    discounts: Array,
    next_values: Array,
    continuations: Array,
    lam: Numeric,
) -> Array:
    """Peng-style Q(lambda) / TD(lambda) returns with explicit episode cuts (as used by PQN).

    Shapes: all four arrays are time-major `(T, ...)` with identical shapes (typically `(T, B)`).

    Args:
      rewards: r_t, reward for the transition at step t.
      discounts: gamma * (1 - terminated_t); zero where the episode truly terminated at step t.
      next_values: bootstrap value of the true (pre-reset) successor of step t, e.g. max_a Q(s'_t, a).
      continuations: 1 where the next row of the rollout continues the same episode, 0 where the episode
        ended at step t for any reason (termination or truncation). bool or {0, 1} float.
      lam: the lambda mixing coefficient, a scalar in [0, 1].

    Definition (computed backwards with `lax.scan`):
      G_t = r_t + discounts_t * [(1 - lam) * next_values_t + lam * H_t]
      H_t = G_{t+1}          if t < T-1 and continuations_t == 1
      H_t = next_values_t    otherwise (episode ended at t, or t is the last row)
    so lam = 0 gives the one-step target r_t + discounts_t * next_values_t and lam = 1 gives the
    discounted return to the episode end (or to the end of the rollout, bootstrapped there).

    Returns:
      `(T, ...)` returns G, wrapped in `stop_gradient`.
    """
    chex.assert_rank([rewards, discounts, next_values, continuations], rewards.ndim)
    chex.assert_axis_dimension_gt(rewards, 0, 0)
    chex.assert_equal_shape([rewards, discounts, next_values, continuations])
    chex.assert_type([rewards, discounts, next_values], float)

    continuing = _as_float(continuations, rewards)

    def accumulate_backwards(return_after, step):
        reward, discount, next_value, continues = step
        tail = continues * return_after + (1.0 - continues) * next_value
        blended = (1.0 - lam) * next_value + lam * tail
        lambda_return = reward + discount * blended
        return lambda_return, lambda_return

    # Seeding the carry with the last bootstrap makes the final row use next_values[T-1] as its tail.
    _, returns = jax.lax.scan(
        accumulate_backwards,
        next_values[-1],
        (rewards, discounts, next_values, continuing),
        reverse=True,
    )
    return jax.lax.stop_gradient(returns)


def vtrace(
    rewards: Array,
    values: Array,
    next_values: Array,
    dones: Array,
    truncations: Array,
    log_rhos: Array,
    gamma: Numeric,
    clip_rho_threshold: Numeric = 1.0,
    clip_c_threshold: Numeric = 1.0,
    clip_pg_rho_threshold: Numeric = 1.0,
    lam: Numeric = 1.0,
) -> tuple[Array, Array]:
    """V-trace targets and policy-gradient advantages (Espeholt et al., 2018, IMPALA), for off-policy actor-critics
    whose behaviour policy μ lags the learner's π, with the house's episode boundaries.

    Shapes: all six arrays are time-major `(T, ...)` with identical shapes (typically `(T, B)`).

    Args:
      rewards: r_t.
      values: V(s_t) under the learner's critic.
      next_values: V(s'_t) of the true (pre-reset) successor of step t; the last row's is the rollout's bootstrap.
      dones: the episode ended at step t (termination or truncation); the recursion never crosses it.
      truncations: the time limit ended it (a subset of `dones`): its successor is still bootstrapped from.
      log_rhos: log π(a_t|s_t) − log μ(a_t|s_t).
      gamma: discount; clip_rho_threshold: ρ̄ (the fixed point's policy); clip_c_threshold: c̄ (how far traces
      reach); clip_pg_rho_threshold: the advantage's ρ clip; lam: an extra λ on the traces (1: the paper's).

    With ρ_t = min(ρ̄, π/μ), c_t = λ min(c̄, π/μ), γ_t = γ (1 − terminated_t):
      δ_t = ρ_t (r_t + γ_t V(s'_t) − V(s_t))
      v_t = V(s_t) + δ_t + γ c_t (1 − done_t) (v_{t+1} − V(s_{t+1}))     (v_T − V(s_T) = 0)
      A_t = min(ρ̄_pg, π/μ) (r_t + γ_t v'_{t+1} − V(s_t)),  v'_{t+1} = v_{t+1} if the episode goes on, else V(s'_t)
    Where the episode goes on, V(s_{t+1}) = V(s'_t) (the same state), so `next_values` serves both.

    Returns:
      (vs, pg_advantages), both `(T, ...)` and wrapped in `stop_gradient`.
    """
    chex.assert_rank([rewards, values, next_values, dones, truncations, log_rhos], rewards.ndim)
    chex.assert_axis_dimension_gt(rewards, 0, 0)
    chex.assert_equal_shape([rewards, values, next_values, dones, truncations, log_rhos])
    chex.assert_type([rewards, values, next_values, log_rhos], float)

    done = _as_float(dones, rewards)
    not_terminated = 1.0 - done * (1.0 - _as_float(truncations, rewards))
    rhos = jnp.exp(log_rhos)
    clipped_rhos = jnp.minimum(clip_rho_threshold, rhos)
    traces = lam * jnp.minimum(clip_c_threshold, rhos)
    deltas = clipped_rhos * (rewards + gamma * not_terminated * next_values - values)
    recursion_weights = gamma * traces * (1.0 - done)

    def accumulate_backwards(correction_after, step):
        delta, recursion_weight = step
        correction = delta + recursion_weight * correction_after
        return correction, correction

    _, corrections = jax.lax.scan(accumulate_backwards, jnp.zeros_like(rewards[0]), (deltas, recursion_weights),
                                  reverse=True)
    vs = values + corrections
    # v_{t+1} where the episode goes on inside the rollout; the true successor's value at its end and on the last row
    vs_after = jnp.concatenate([vs[1:], next_values[-1:]], axis=0)
    successor = done * next_values + (1.0 - done) * vs_after
    pg_advantages = jnp.minimum(clip_pg_rho_threshold, rhos) * (
        rewards + gamma * not_terminated * successor - values)
    return jax.lax.stop_gradient(vs), jax.lax.stop_gradient(pg_advantages)


def n_step_returns(
    rewards: Array,
    discounts: Array,
    last: Array,
    bootstrap_values: Array,
    n_step: int,
    gamma: Numeric,
) -> Array:
    """n-step returns from every step of a sequence, cut at episode ends and at the sequence's end.

    Shapes: all four arrays are time-major `(T, ...)` with identical shapes (typically `(T, B)`).

    Args:
      rewards: r_t, the reward of step t.
      discounts: the env's discount of step t: 0 where the episode terminated at t, else 1 (not yet × γ).
      last: whether the episode ended at step t (terminated or truncated): the sum stops there.
      bootstrap_values: v_t, the value of the true (pre-reset) successor of step t.
      n_step: the most rewards summed before bootstrapping, a static int ≥ 1.
      gamma: the discount factor.

    Definition: with m = min(first k ≥ t where the episode ended, t + n_step − 1, T − 1),
      G_t = Σ_{k=t..m} γ^{k−t} r_k + γ^{m−t+1} · discounts_m · v_m,
    so a termination drops the bootstrap, a truncation keeps it (v_m is its true successor's value), and the
    steps near the sequence's end take as many rewards as the sequence still holds.

    Returns:
      `(T, ...)` returns, wrapped in `stop_gradient`.
    """
    chex.assert_rank([rewards, discounts, last, bootstrap_values], rewards.ndim)
    chex.assert_equal_shape([rewards, discounts, last, bootstrap_values])
    chex.assert_type([rewards, discounts, bootstrap_values], float)
    if n_step < 1:
        raise ValueError(f"n_step={n_step} must be at least 1")
    length = rewards.shape[0]
    ended = _as_float(last, rewards) > 0

    def ahead(x: Array, k: int, fill) -> Array:
        """x[t + k] at row t; `fill` past the sequence's end."""
        padding = jnp.full((k,) + x.shape[1:], fill, x.dtype)
        return jnp.concatenate([x[k:], padding], axis=0)

    returns = jnp.zeros_like(rewards)
    summing = jnp.ones(rewards.shape, bool)  # step t + k still belongs to t's return
    at_sequence_end = jnp.arange(length).reshape((length,) + (1,) * (rewards.ndim - 1)) == length - 1
    for k in range(n_step):
        returns = returns + jnp.where(summing, gamma**k * ahead(rewards, k, 0.0), 0.0)
        stops = summing & (ahead(ended, k, True) | ahead(at_sequence_end, k, True) | (k == n_step - 1))
        bootstrap = gamma ** (k + 1) * ahead(discounts, k, 0.0) * ahead(bootstrap_values, k, 0.0)
        returns = returns + jnp.where(stops, bootstrap, 0.0)
        summing = summing & ~stops
    return jax.lax.stop_gradient(returns)
