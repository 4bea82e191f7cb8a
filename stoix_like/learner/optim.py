"""Optimisers shared by all systems: Adam behind global-norm clipping, with an optional linear decay."""

from __future__ import annotations

import jax
import numpy as np
import optax
from jax.flatten_util import ravel_pytree

from stoix_like.learner.hyperparams import LearningRate


def make_optimizer(learning_rate: LearningRate, max_grad_norm: float, decay_steps: int, decay: bool,
                   eps: float = 1e-5, one_vector: bool = False) -> optax.GradientTransformation:
    """`decay_steps` is the number of optimiser steps the run really takes, so the rate ends at zero on time.
    `one_vector`: step on the params laid end to end (`on_one_vector`), for a learner whose gradient steps are a
    few small kernels each; by default optax's state, a moment per params leaf. `learning_rate`: a number, or a
    swept rate read inside the traced update (`hyperparams.learning_rate`)."""
    schedule = _schedule(learning_rate, decay_steps, decay)
    optimizer = optax.chain(optax.clip_by_global_norm(max_grad_norm), optax.adam(schedule, eps=eps))
    if one_vector:
        optimizer = on_one_vector(optimizer)
    return optax.GradientTransformation(init=zeros_on_host(optimizer.init), update=optimizer.update)


def _schedule(learning_rate: LearningRate, decay_steps: int, decay: bool) -> optax.ScalarOrSchedule:
    """optax's linear decay of a number; a swept rate times the same decay's factor (1 → 0), read per update.
    Both give rate × fraction left, the same floats: optax computes (rate - 0) × fraction + 0."""
    if not callable(learning_rate):
        return optax.linear_schedule(learning_rate, 0.0, max(decay_steps, 1)) if decay else learning_rate
    swept_rate = learning_rate
    if not decay:
        return lambda count: swept_rate()
    fraction_left = optax.linear_schedule(1.0, 0.0, max(decay_steps, 1))
    return lambda count: swept_rate() * fraction_left(count)


def on_one_vector(optimizer: optax.GradientTransformation) -> optax.GradientTransformation:
    """`optimizer` run on the params' leaves laid end to end in one vector: its state is one vector per moment, and
    the updates come back in the params' own tree. The arithmetic is per element, so the steps are optax's own up
    to the order the global norm sums in.

    Why only where asked: on the CPU a leaf's elementwise update is a kernel of its own, and for a small network a
    kernel costs more to launch than to run, so one vector launches a handful instead of ~4 per leaf; but it also
    makes every leaf's step wait for the network's last gradient, where a pool of several threads would have run
    it beside the rest of the backward pass. Interleaved A/Bs on a 2-core Zen 4, one vector against the tree: DQN
    (64-transition gradient steps, one thread) learned 1.13x faster (0.881x without it, 3 rounds of its 500k-step
    budget); PPO on PureJaxRL's CartPole config 1.00x on one thread, but 0.84-0.89x on two and 0.78x with 8 seeds
    in one program (2 threads). So the DQN family asks for it (`value_based.q_optimizer`); the rest do not."""

    def init(params: optax.Params) -> optax.OptState:
        return optimizer.init(ravel_pytree(params)[0])

    def update(updates: optax.Updates, state: optax.OptState, params: optax.Params = None):
        flat_updates, unflatten = ravel_pytree(updates)
        flat_params = None if params is None else ravel_pytree(params)[0]
        flat_updates, state = optimizer.update(flat_updates, state, flat_params)
        return unflatten(flat_updates), state

    return optax.GradientTransformation(init, update)


def zeros_on_host(init: optax.TransformInitFn) -> optax.TransformInitFn:
    """`init` of an optimiser whose initial state is all zeros (Adam's step count and moments, a schedule's step
    count, clipping's empty state), made in numpy from `init`'s shapes alone. Run eagerly, optax's init compiles a
    program for each distinct leaf shape: ~0.3 s of a PPO run's start on 2 cores, for the same values
    (tests/test_start_up.py)."""

    def init_zeros(params: optax.Params) -> optax.OptState:
        return jax.tree_util.tree_map(lambda leaf: np.zeros(leaf.shape, leaf.dtype), jax.eval_shape(init, params))

    return init_zeros
