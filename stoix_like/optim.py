"""Optimisers shared by all systems: Adam behind global-norm clipping, with an optional linear decay."""

from __future__ import annotations

import jax
import numpy as np
import optax


def make_optimizer(learning_rate: float, max_grad_norm: float, decay_steps: int, decay: bool,
                   eps: float = 1e-5) -> optax.GradientTransformation:
    """`decay_steps` is the number of optimiser steps the run really takes, so the rate ends at zero on time.

    The state is optax's own, a moment per params leaf. Laying the leaves end to end in one vector (as this module
    did for a day, to launch fewer kernels) made every leaf's Adam step wait for the last gradient of the network:
    on a 2-thread CPU pool, where XLA runs a leaf's update beside the next leaf's backward pass, PPO then learned
    1.12-1.20x slower on PureJaxRL's CartPole config and 1.28x slower with 8 seeds in one program; on one thread it
    bought nothing (0.998-1.010x), and DQN and PQN with 8 seeds were 1.01-1.03x either way (interleaved A/Bs)."""
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
