"""Sequential Monte Carlo's particle bookkeeping (SPO, Macfarlane et al., 2024): weights, their effective sample
size, and systematic resampling.

A set of N particles carries unnormalised log-weights `[N]`; nothing here reads a config or keeps state, and every
function takes one particle set (vmap it over a batch of sets).

  * `normalized_weights`: the weights as probabilities, softmax of the log-weights.
  * `effective_sample_size`: (Σ w)² / Σ w², between 1 (one particle holds all the weight) and N (uniform).
  * `weight_entropy`: the entropy of the normalised weights, between 0 and log N.
  * `systematic_resample`: N ancestor indices drawn with one uniform offset u ~ U[0, 1): the j-th is the particle
    whose cumulative weight interval holds (u + j) / N. Each particle i is drawn ⌊N w_i⌋ or ⌈N w_i⌉ times, the
    lowest-variance of the standard schemes. `systematic_ancestors` is the same with the offset given (what the
    tests work by hand).
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp

Array = jax.Array


def normalized_weights(log_weights: Array) -> Array:
    """`[N]` unnormalised log-weights -> `[N]` probabilities summing to 1."""
    chex.assert_rank(log_weights, 1)
    return jax.nn.softmax(log_weights)


def effective_sample_size(log_weights: Array) -> Array:
    """`[N]` log-weights -> scalar (Σ w)² / Σ w², computed in log space: exp(2 lse(log w) − lse(2 log w))."""
    chex.assert_rank(log_weights, 1)
    return jnp.exp(2.0 * jax.nn.logsumexp(log_weights) - jax.nn.logsumexp(2.0 * log_weights))


def weight_entropy(log_weights: Array) -> Array:
    """`[N]` log-weights -> scalar entropy of the normalised weights (0: one particle holds all; log N: uniform)."""
    chex.assert_rank(log_weights, 1)
    log_probs = jax.nn.log_softmax(log_weights)
    return -jnp.sum(jnp.where(log_probs > -jnp.inf, jnp.exp(log_probs) * log_probs, 0.0))


def systematic_ancestors(log_weights: Array, offset: Array) -> Array:
    """`[N]` log-weights and a scalar offset u in [0, 1) -> `[N]` int32 ancestor indices, non-decreasing.

    The j-th index is the i with C_{i-1} <= (u + j) / N < C_i, C the cumulative normalised weights (C_{-1} = 0).
    """
    chex.assert_rank(log_weights, 1)
    chex.assert_rank(offset, 0)
    num_particles = log_weights.shape[0]
    cumulative = jnp.cumsum(normalized_weights(log_weights))
    positions = (offset + jnp.arange(num_particles, dtype=cumulative.dtype)) / num_particles
    ancestors = jnp.searchsorted(cumulative, positions, side="right")
    # rounding can leave the last cumulative weight a hair below a position near 1: that is the last particle
    return jnp.minimum(ancestors, num_particles - 1).astype(jnp.int32)


def systematic_resample(key: jax.Array, log_weights: Array) -> Array:
    """`[N]` log-weights -> `[N]` ancestor indices, systematic resampling with one uniform offset drawn from `key`."""
    return systematic_ancestors(log_weights, jax.random.uniform(key, (), log_weights.dtype))
