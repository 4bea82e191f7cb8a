"""Illegal-action masking, written once: every masked max, argmax and masked logit in the library is here.

Action masks are bool `[..., A]`, True for legal actions. Illegal entries are replaced by one finite fill value
rather than -inf: 0 × (masked entry) stays 0 (a zero discount times the value of a dead end, a zero
probability times its log), and dividing by a temperature cannot overflow. It is far below any value or logit
a network produces, so the max, argmax and softmax over legal actions are exactly those of the legal entries.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

Array = jax.Array

ILLEGAL_ACTION_VALUE = -1e9


def mask_illegal(values: Array, action_mask: Array) -> Array:
    """`values` `[..., A]` with every illegal entry replaced by ILLEGAL_ACTION_VALUE (same shape and dtype)."""
    return jnp.where(action_mask, values, jnp.asarray(ILLEGAL_ACTION_VALUE, values.dtype))


def masked_argmax(values: Array, action_mask: Array) -> Array:
    """`[..., A]` -> `[...]` int32: the legal action of highest value (the first, on ties)."""
    return jnp.argmax(mask_illegal(values, action_mask), axis=-1).astype(jnp.int32)


def masked_max(values: Array, action_mask: Array) -> Array:
    """`[..., A]` -> `[...]`: the highest legal value.

    A row with no legal action (some suites' terminal states) gets 0, never the fill value: it is only ever
    bootstrapped from with a zero discount, and 0 keeps even a wrongly nonzero discount from adding -1e9.
    """
    best = jnp.max(mask_illegal(values, action_mask), axis=-1)
    return jnp.where(jnp.any(action_mask, axis=-1), best, jnp.zeros_like(best))
