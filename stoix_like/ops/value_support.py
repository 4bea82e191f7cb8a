"""Values on a categorical support, as MuZero-style learners predict them.

A value head that regresses returns of very different scales (CartPole's 0..100, Atari's thousands) learns
badly with a squared error. MuZero (Schrittwieser et al., 2020, appendix F) instead squashes the target with an
invertible transform h, spreads h(target) over two neighbouring atoms of a fixed support (two-hot) and trains a
categorical head with cross-entropy; the prediction is the head's expectation on the support, mapped back by h⁻¹.

  * `value_transform` / `inverse_value_transform`: h(x) = sign(x)(√(|x| + 1) − 1) + εx (Pohlen et al., 2018)
    and its exact inverse.
  * `scalar_to_two_hot` / `two_hot_to_scalar`: a scalar as a distribution on an increasing support `[K]` whose
    expectation is the scalar (clipped to the support), and the expectation back.
"""

from __future__ import annotations

import chex
import jax.numpy as jnp

from stoix_like.types import Array, Numeric

# Pohlen et al.'s ε (MuZero's too): the linear term keeps h invertible with a Lipschitz inverse.
VALUE_TRANSFORM_EPSILON = 1e-3


def value_transform(x: Array, epsilon: Numeric = VALUE_TRANSFORM_EPSILON) -> Array:
    """h(x) = sign(x)(√(|x| + 1) − 1) + εx, elementwise, any shape: shrinks large magnitudes to about √|x|.

    h(0) = 0, h is odd and strictly increasing; e.g. h(3) = 1 + 3ε, h(−8) = −2 − 8ε.
    """
    chex.assert_type(x, float)
    # √(|x| + 1) − 1 written as |x| / (√(|x| + 1) + 1): no cancellation near 0 in float32
    magnitude = jnp.abs(x)
    return jnp.sign(x) * magnitude / (jnp.sqrt(magnitude + 1.0) + 1.0) + epsilon * x


def inverse_value_transform(y: Array, epsilon: Numeric = VALUE_TRANSFORM_EPSILON) -> Array:
    """h⁻¹(y), elementwise, any shape: the x with h(x) = y.

    Solving sign(y)·h(|x|) = y for t = √(|x| + 1), a quadratic εt² + t − (|y| + 1 + ε) = 0, gives
      h⁻¹(y) = sign(y) · ((√(1 + 4ε(|y| + 1 + ε)) − 1) / (2ε))² − 1),
    e.g. h⁻¹(1 + 3ε) = 3.
    """
    chex.assert_type(y, float)
    # The same formula rearranged so that float32 loses nothing near 0 (the literal one divides a difference of
    # two numbers near 1 by 2ε, an error of ~1e-4): with z = 4ε(|y| + 1 + ε) and s = √(1 + z),
    # t − 1 = (2|y| + 2ε − z / (1 + s)) / (1 + s), and x = t² − 1 = (t − 1)(t − 1 + 2).
    magnitude = jnp.abs(y)
    z = 4.0 * epsilon * (magnitude + 1.0 + epsilon)
    one_plus_s = 1.0 + jnp.sqrt(1.0 + z)
    t_minus_one = (2.0 * magnitude + 2.0 * epsilon - z / one_plus_s) / one_plus_s
    return jnp.sign(y) * t_minus_one * (t_minus_one + 2.0)


def scalar_to_two_hot(x: Array, support: Array) -> Array:
    """`[...]` scalars -> `[..., K]` probabilities on `support` `[K]` (strictly increasing, K ≥ 2).

    A scalar between atoms z_i ≤ x ≤ z_{i+1} puts (z_{i+1} − x)/(z_{i+1} − z_i) on z_i and the rest on z_{i+1},
    so the expectation is x exactly; a scalar outside [z_0, z_{K−1}] is clipped to the nearer end first.
    E.g. support [−1, 0, 1, 2]: x = 0.25 -> [0, 0.75, 0.25, 0]; x = 5 -> [0, 0, 0, 1].
    """
    chex.assert_rank(support, 1)
    chex.assert_axis_dimension_gt(support, 0, 1)
    chex.assert_type([x, support], float)
    num_atoms = support.shape[0]
    x = jnp.clip(x, support[0], support[-1])
    # the atom at or below x; the top atom's own value falls in the last interval, with all its weight above
    lower = jnp.clip(jnp.searchsorted(support, x, side="right") - 1, 0, num_atoms - 2)
    lower_atom, upper_atom = support[lower], support[lower + 1]
    upper_weight = (x - lower_atom) / (upper_atom - lower_atom)
    atoms = jnp.arange(num_atoms)
    return (jnp.where(atoms == lower[..., None], 1.0 - upper_weight[..., None], 0.0)
            + jnp.where(atoms == lower[..., None] + 1, upper_weight[..., None], 0.0)).astype(x.dtype)


def two_hot_to_scalar(probs: Array, support: Array) -> Array:
    """`[..., K]` probabilities on `support` `[K]` -> `[...]` their expectation Σ_k p_k z_k."""
    chex.assert_rank(support, 1)
    chex.assert_axis_dimension(probs, -1, support.shape[0])
    chex.assert_type([probs, support], float)
    return jnp.sum(probs * support, axis=-1)
