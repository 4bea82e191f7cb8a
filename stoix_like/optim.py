"""Optimisers shared by all systems: Adam behind global-norm clipping, with an optional linear decay."""

from __future__ import annotations

import jax
import numpy as np
import optax


def make_optimizer(learning_rate: float, max_grad_norm: float, decay_steps: int, decay: bool,
                   eps: float = 1e-5) -> optax.GradientTransformation:
    """`decay_steps` is the number of optimiser steps the run really takes, so the rate ends at zero on time."""
    schedule = optax.linear_schedule(learning_rate, 0.0, max(decay_steps, 1)) if decay else learning_rate
    optimizer = optax.chain(optax.clip_by_global_norm(max_grad_norm), optax.adam(schedule, eps=eps))
    return optax.GradientTransformation(init=zeros_on_host(optimizer.init), update=optimizer.update)


def zeros_on_host(init: optax.TransformInitFn) -> optax.TransformInitFn:
    """`init` of an optimiser whose initial state is all zeros (Adam's step count and moments, a schedule's step
    count, clipping's empty state), made in numpy from `init`'s shapes alone. Run eagerly, optax's init compiles a
    program for each distinct leaf shape: ~0.3 s of a PPO run's start on 2 cores, for the same values
    (tests/test_start_up.py)."""

    def init_zeros(params: optax.Params) -> optax.OptState:
        return jax.tree_util.tree_map(lambda leaf: np.zeros(leaf.shape, leaf.dtype), jax.eval_shape(init, params))

    return init_zeros
