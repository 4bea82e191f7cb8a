"""Target networks: Polyak averaging every update, or a hard copy every `period` updates."""

from __future__ import annotations

from typing import Any

import jax
import optax


def update_target(online: Any, target: Any, update_count: jax.Array, tau: float, period: int) -> Any:
    """`tau < 1`: target ← τ·online + (1−τ)·target each call; `tau == 1`: copy every `period` calls."""
    if tau < 1.0:
        return optax.incremental_update(online, target, tau)
    return optax.periodic_update(online, target, update_count, period)
