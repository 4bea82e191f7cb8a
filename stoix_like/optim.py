"""Optimisers shared by all systems: Adam behind global-norm clipping, with an optional linear decay."""

from __future__ import annotations

import optax


def make_optimizer(learning_rate: float, max_grad_norm: float, decay_steps: int, decay: bool,
                   eps: float = 1e-5) -> optax.GradientTransformation:
    """`decay_steps` is the number of optimiser steps the run really takes, so the rate ends at zero on time."""
    schedule = optax.linear_schedule(learning_rate, 0.0, max(decay_steps, 1)) if decay else learning_rate
    return optax.chain(optax.clip_by_global_norm(max_grad_norm), optax.adam(schedule, eps=eps))
