"""Target networks, one rule for every system: every `target_update_period` gradient steps the target moves by
`target ← tau·online + (1 − tau)·target` (tau = 1: a hard copy; period 1: Polyak averaging at every step)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from stoix_like.learner.hyperparams import Number
from stoix_like.types import Params

def update_target(online: Params, target: Params, step: jax.Array, tau: Number, period: int) -> Params:
    """The target after a gradient step: moved when `step % period == 0`, else unchanged.

    `step` is the counter the period runs on, and so decides where in each period the move lands: the DQN family
    passes the gradient steps taken so far (a copy after steps period, 2·period, ...), the deterministic-policy
    systems the steps taken before this one (the target moves together with their delayed actor update).
    """
    # a swept τ (a traced scalar, learner/hyperparams.py) always averages: τ = 1 then gives the copy's values
    hard_copy = not isinstance(tau, jax.Array) and tau == 1.0
    moved = online if hard_copy else optax.incremental_update(online, target, tau)
    if period == 1:
        return moved
    # a select rather than optax.periodic_update's lax.cond: the Polyak arithmetic then compiles as it does
    # unconditionally, to the bit (a cond branch may fuse it differently)
    due = step % period == 0
    return jax.tree_util.tree_map(lambda new, old: jnp.where(due, new, old), moved, target)
