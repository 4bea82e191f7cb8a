"""Selecting the entry of the action taken, written once for every loss and system."""

from __future__ import annotations

import chex
import jax

Array = jax.Array


def taken_action_values(values: Array, actions: Array) -> Array:
    """values `[B, A, ...]`, int actions `[B]` -> `[B, ...]`: `values[b, actions[b]]` for every b."""
    chex.assert_rank(actions, 1)
    chex.assert_equal_shape_prefix([values, actions], 1)
    return jax.vmap(lambda row, action: row[action])(values, actions)
