"""Recurrent torsos (LSTM or GRU behind one interface) and the actor and critic built around them.

A recurrent network reads a time-major sequence `(T, B, ...)` and a per-step `reset` flag `(T, B)`: where `reset`
is set, that step opens an episode, and the hidden state is set back to its initial value (zeros) *before* the
step is read, inside the scan. So a sequence may cross episode boundaries (a rollout does) and an episode's
outputs are the same whether or not another episode preceded it in the sequence.

Acting is a sequence of length 1 carried step by step; learning replays the rollout's whole sequences from the
hidden state stored at its start (truncated backpropagation through time over the rollout). The heads see the
steps flattened time-major, `(T · B, features)`: the distributions and losses are per step, rank 2.
"""

from __future__ import annotations

from typing import Tuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from stoix_like.types import Observation, PyTree, TimeStep

# The cells behind one interface, by the name `network.*.recurrent_core.cell` gives (config_spec.RECURRENT_CELLS).
CELLS = {"lstm": nn.OptimizedLSTMCell, "gru": nn.GRUCell}

Hidden = PyTree  # an LSTM's (c, h) or a GRU's h, each leaf `(B, hidden_size)`


def initial_hidden(cell: str, hidden_size: int, batch_size: int, on_host: bool = False) -> Hidden:
    """The hidden state an episode starts from: zeros (the cells' default `carry_init`). `on_host`: numpy zeros, for
    a setup's inputs (made eagerly, jnp's zeros compile a program of their own)."""
    zeros = (np if on_host else jnp).zeros((batch_size, hidden_size), np.float32)
    return (zeros, zeros) if cell == "lstm" else zeros


def opens_episode(timestep: TimeStep) -> jax.Array:
    """Whether the observation of `timestep` is an episode's first, where a hidden state is reset: the first reset
    (FIRST), or the auto-reset observation a LAST step carries."""
    return timestep.first() | timestep.last()


def reset_where(reset: jax.Array, hidden: Hidden) -> Hidden:
    """`hidden` with the rows where `reset` `(B,)` is set back to the initial (zero) state."""
    return jax.tree_util.tree_map(lambda h: jnp.where(reset[:, None], jnp.zeros_like(h), h), hidden)


class _ResettingCell(nn.Module):
    """One step of the cell, its hidden state reset first where the step opens an episode. With `emit_hidden` the
    step's output is `(output, hidden after the step)`: a learner that bootstraps from each step's true successor
    reads it from there (R2D2). The flag changes no parameter."""

    cell: str
    hidden_size: int
    emit_hidden: bool = False

    @nn.compact
    def __call__(self, hidden: Hidden, step: Tuple[jax.Array, jax.Array]) -> Tuple[Hidden, PyTree]:
        features, reset = step
        hidden, output = CELLS[self.cell](features=self.hidden_size)(reset_where(reset, hidden), features)
        return hidden, ((output, hidden) if self.emit_hidden else output)


class RecurrentCore(nn.Module):
    """An LSTM or GRU scanned over time: `(hidden, (features (T, B, F), reset (T, B))) -> (hidden, (T, B, H))`."""

    cell: str = "lstm"
    hidden_size: int = 64

    @nn.compact
    def __call__(self, hidden: Hidden, inputs: Tuple[jax.Array, jax.Array], emit_hidden: bool = False
                 ) -> Tuple[Hidden, PyTree]:
        """With `emit_hidden` the outputs are `((T, B, H), hidden after each step, leaves (T, B, hidden_size))`."""
        if self.cell not in CELLS:
            raise ValueError(f"unknown recurrent cell {self.cell!r}; choose one of {sorted(CELLS)}")
        scan = nn.scan(_ResettingCell, variable_broadcast="params", split_rngs={"params": False}, in_axes=0,
                       out_axes=0)
        return scan(self.cell, self.hidden_size, emit_hidden)(hidden, inputs)

    def initial_hidden(self, batch_size: int, on_host: bool = False) -> Hidden:
        return initial_hidden(self.cell, self.hidden_size, batch_size, on_host)


def _steps_flattened(x: jax.Array) -> jax.Array:
    """`(T, B, ...)` -> `(T · B, ...)`, time-major."""
    return x.reshape((-1,) + x.shape[2:])


class RecurrentActor(nn.Module):
    """`(hidden, observation (T, B, ...), reset (T, B)) -> (hidden, action distribution over the T · B steps)`."""

    pre_torso: nn.Module
    recurrent_core: RecurrentCore
    action_head: nn.Module

    @nn.compact
    def __call__(self, hidden: Hidden, observation: Observation, reset: jax.Array):
        hidden, outputs = self.recurrent_core(hidden, (self.pre_torso(observation.agent_view), reset))
        return hidden, self.action_head(_steps_flattened(outputs), _steps_flattened(observation.action_mask))


class RecurrentCritic(nn.Module):
    """`(hidden, observation (T, B, ...), reset (T, B)) -> (hidden, V of the T · B steps)`."""

    pre_torso: nn.Module
    recurrent_core: RecurrentCore
    critic_head: nn.Module

    @nn.compact
    def __call__(self, hidden: Hidden, observation: Observation, reset: jax.Array):
        hidden, outputs = self.recurrent_core(hidden, (self.pre_torso(observation.agent_view), reset))
        return hidden, self.critic_head(_steps_flattened(outputs))


class RecurrentQNetwork(nn.Module):
    """`(hidden, observation (T, B, ...), reset (T, B)) -> (hidden, Q-values (T, B, A))`; with `emit_hidden`, the
    hidden state after every step too: `(hidden, (Q-values, hidden per step, leaves (T, B, hidden_size)))`.

    Unlike the actor and critic, the values keep their time and batch axes: a sequence learner (R2D2) indexes them
    by step."""

    pre_torso: nn.Module
    recurrent_core: RecurrentCore
    q_head: nn.Module

    @nn.compact
    def __call__(self, hidden: Hidden, observation: Observation, reset: jax.Array, emit_hidden: bool = False):
        hidden, outputs = self.recurrent_core(hidden, (self.pre_torso(observation.agent_view), reset), emit_hidden)
        features, per_step_hidden = outputs if emit_hidden else (outputs, None)
        q_values = self.q_head(_steps_flattened(features)).reshape(features.shape[:2] + (-1,))
        return hidden, ((q_values, per_step_hidden) if emit_hidden else q_values)
