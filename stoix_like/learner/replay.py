"""Replay for off-policy systems: a flashbax trajectory buffer whose state lives in the learner state.

The buffer samples sequences of consecutive stored steps; a `BatchView` says how long they are and what a
learner's batch is made of them:
  * `n_step_batches`: sequences of `n_step` steps, each collapsed into one n-step transition, so every
    value-based or actor-critic loss sees the same 1-step shape `(obs, action, reward, discount, next_obs)`
    whatever `n_step` is;
  * `sequence_batches`: sequences of `sequence_length` steps kept whole, time-major `(L, B, ...)`, with every
    step's reward, discount, `last` flag and true successor observation, for multi-step estimators over them
    (TD(λ), Retrace).
Keeping the buffer state inside the learner state means it is vmapped over seeds, pmapped over devices and
checkpointed like everything else.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import flashbax as fbx
import jax
import jax.numpy as jnp
from omegaconf import DictConfig

from stoix_like.config import validation
from stoix_like.learner import hyperparams
from stoix_like.learner.budget import Budget
from stoix_like.errors import ConfigError
from stoix_like.types import Array, Observation, PyTree


class Transition(NamedTuple):
    """One stored env step. `next_observation` is the true successor (pre-reset), so truncation bootstraps."""

    observation: Observation
    action: PyTree  # an array of actions, or a system's pytree around them (MuZero's SearchedAction)
    reward: Array
    discount: Array  # 0 only where the episode terminated
    last: Array  # the episode ended here (terminated or truncated): an n-step sum stops
    next_observation: Observation
    # the acting network's recurrent state as it entered this step, already reset where the step opens an episode
    # (a replayed sequence starts from its first step's); () for feed-forward systems
    memory: PyTree = ()


class BatchView(NamedTuple):
    """What a learner's batches are: the buffer samples sequences of `sequence_length` stored steps, (B, L, ...),
    and `to_batch` turns them into the batch `learn_from_batch` sees."""

    length_key: str  # the config key that sets sequence_length, named when a buffer cannot serve it
    sequence_length: int
    to_batch: Callable[[Transition], Transition]
    steps_per_item: int  # stored steps each batch item stands for, in the replay ratio (an n-step transition: 1)
    # stored steps between the starts of two sampleable sequences: 1 overlapping (every step starts one), or
    # sequence_length for disjoint sequences, each one priority item (R2D2)
    period: int = 1


def n_step_batches(system_config: DictConfig) -> BatchView:
    """Batches of n-step transitions (B, ...): `system.n_step` steps summed with `system.gamma`."""
    n_step = int(system_config.n_step)

    def to_batch(sequence: Transition) -> Transition:
        # γ read while the learner is traced, so that a sweep's members each discount by their own
        return n_step_transition(sequence, gamma=hyperparams.value(system_config, "gamma"))

    return BatchView("system.n_step", n_step, to_batch, steps_per_item=1)


def sequence_batches(system_config: DictConfig, disjoint: bool = False) -> BatchView:
    """Batches of whole sequences of `system.sequence_length` steps, time-major (L, B, ...); `disjoint`: only
    sequences that start at multiples of the length are sampled, so none overlaps another."""
    length = int(system_config.sequence_length)
    return BatchView("system.sequence_length", length, time_major, steps_per_item=length,
                     period=length if disjoint else 1)


def make_buffer(system_config: DictConfig, budget: Budget, batches: BatchView, prioritized: bool = False):
    """A trajectory buffer per (device, batch) slot, sized so that all slots together hold `total_buffer_size`
    and sample `total_batch_size` sequences of `batches.sequence_length` steps per gradient step.

    Raises a ConfigError, before anything compiles, when the batch does not split exactly over the slots, a
    slot's buffer cannot hold its batch or a sequence, or the first learning step would find no whole sequence.
    """
    slots = budget.n_devices * budget.update_batch_size
    per_slot_size = int(system_config.total_buffer_size) // slots
    total_batch_size = int(system_config.total_batch_size)
    batch_size = total_batch_size // slots
    length_key, length = batches.length_key, batches.sequence_length
    # disjoint sequences tile each env's storage exactly, so a wrapped-around write never splits one
    per_env_length = per_slot_size // budget.num_envs // batches.period * batches.period
    warmup = budget.warmup_rollout_length
    if length < 1:
        raise ConfigError(f"{length_key}={length} must be at least 1.")
    if total_batch_size % slots or batch_size < 1:
        fits = max(total_batch_size // slots, 1) * slots
        raise ConfigError(
            f"system.total_batch_size={total_batch_size} must be a positive multiple of n_devices × "
            f"arch.update_batch_size = {budget.n_devices} × {budget.update_batch_size} = {slots} (each slot samples "
            f"an equal share); try system.total_batch_size={fits} or {fits + slots}.")
    if per_env_length < length or per_slot_size < batch_size:
        raise ConfigError(
            f"system.total_buffer_size={system_config.total_buffer_size} holds {per_slot_size} transitions per "
            f"(device, batch) slot ({per_env_length} per env), fewer than its share of system.total_batch_size="
            f"{total_batch_size} ({batch_size}) or {length_key}={length}; raise system.total_buffer_size to at least "
            f"{max(batch_size, length * budget.num_envs) * slots}."
        )
    if warmup + budget.rollout_length < length:
        raise ConfigError(validation.first_rollout_too_short(length_key, length, warmup, budget.rollout_length))
    kwargs = dict(
        add_batch_size=budget.num_envs,
        sample_batch_size=batch_size,
        sample_sequence_length=length,
        period=batches.period,
        min_length_time_axis=length,
        max_length_time_axis=per_env_length,
    )
    if prioritized:
        # `device` picks flashbax's sum-tree update for this backend (a sequential scan on CPU, bincount elsewhere)
        return fbx.make_prioritised_trajectory_buffer(
            priority_exponent=float(system_config.priority_exponent), device=jax.default_backend(), **kwargs)
    return fbx.make_trajectory_buffer(**kwargs)


def add_rollout(buffer, buffer_state, time_major: Transition):
    """Add a (T, num_envs, ...) rollout; flashbax wants (num_envs, T, ...)."""
    return buffer.add(buffer_state, _swap_time_and_batch(time_major))


def n_step_transition(sequence: Transition, gamma: hyperparams.Number) -> Transition:
    """Collapse sampled sequences (B, n, ...) into n-step transitions (B, ...).

    With m the index of the first step that ends an episode (or n−1): reward = Σ_{k≤m} γ^k r_k,
    discount = γ^{m+1} · d_m (zero if step m terminated), next_observation = next_obs_m. A truncation ends
    the sum but keeps the bootstrap, so time limits are not mistaken for terminations.
    """
    n = sequence.reward.shape[1]
    last = sequence.last.astype(bool)
    # steps after the first episode end belong to another episode and must not count
    ended_before = jnp.cumsum(last, axis=1) - last > 0
    powers = gamma ** jnp.arange(n, dtype=jnp.float32)
    reward = jnp.sum(jnp.where(ended_before, 0.0, sequence.reward) * powers, axis=1)
    bootstrap_index = jnp.where(last.any(axis=1), jnp.argmax(last, axis=1), n - 1)
    take = lambda x: jnp.take_along_axis(x, bootstrap_index.reshape((-1,) + (1,) * (x.ndim - 1)), axis=1)[:, 0]
    discount = (gamma ** (bootstrap_index + 1).astype(jnp.float32)) * take(sequence.discount)
    return Transition(
        observation=jax.tree_util.tree_map(lambda x: x[:, 0], sequence.observation),
        action=sequence.action[:, 0],
        reward=reward,
        discount=discount,
        last=take(last),
        next_observation=jax.tree_util.tree_map(take, sequence.next_observation),
    )


def time_major(sequence: Transition) -> Transition:
    """Sampled sequences (B, L, ...) as time-major ones (L, B, ...), the house layout of trajectories."""
    return _swap_time_and_batch(sequence)


def _swap_time_and_batch(tree):
    return jax.tree_util.tree_map(lambda x: jnp.swapaxes(x, 0, 1), tree)
