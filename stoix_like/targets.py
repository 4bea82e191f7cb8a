"""Target networks: Polyak averaging every update, or a hard copy every `period` updates."""

from __future__ import annotations

import jax
import optax

from stoix_like.types import Params


def update_target(online: Params, target: Params, update_count: jax.Array, tau: float, period: int) -> Params:
    """`tau < 1`: target ← τ·online + (1−τ)·target each call; `tau == 1`: copy every `period` calls."""
    if tau < 1.0:
        return optax.incremental_update(online, target, tau)
    return optax.periodic_update(online, target, update_count, period)
