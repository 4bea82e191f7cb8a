"""Running observation statistics, kept identical on every device and batch element.

Each replica computes the sums of its own observations; a psum over "batch" and "device" makes every
replica merge the same global batch, so the statistics never drift apart.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from stoix_like.runtime import parallel
from stoix_like.types import Observation

_EPS = 1e-8


class RunningStatistics(NamedTuple):
    mean: jax.Array
    var: jax.Array
    # shadows tuple.count, but the field name is in the key paths that checkpoints record and check
    count: jax.Array  # type: ignore[assignment]


def init(shape) -> RunningStatistics:
    return RunningStatistics(jnp.zeros(shape, jnp.float32), jnp.ones(shape, jnp.float32), jnp.zeros((), jnp.float32))


def update(stats: RunningStatistics, batch: jax.Array) -> RunningStatistics:
    """Merge a batch of observations (..., *obs_shape) from every replica (Chan et al.'s parallel update).

    Must be called inside the learner, where the "batch" and "device" axes are bound.
    """
    obs_shape = stats.mean.shape
    flat = batch.reshape((-1,) + obs_shape).astype(jnp.float32)
    n, total, total_sq = parallel.psum_batch_then_device(
        (jnp.asarray(flat.shape[0], jnp.float32), flat.sum(0), jnp.square(flat).sum(0))
    )
    batch_mean = total / n
    batch_var = jnp.maximum(total_sq / n - jnp.square(batch_mean), 0.0)
    new_count = stats.count + n
    delta = batch_mean - stats.mean
    mean = stats.mean + delta * n / new_count
    m2 = stats.var * stats.count + batch_var * n + jnp.square(delta) * stats.count * n / new_count
    return RunningStatistics(mean, m2 / new_count, new_count)


def normalize(stats, observation: Observation) -> Observation:
    """Standardise `agent_view`; `stats == ()` means normalisation is switched off."""
    if not isinstance(stats, RunningStatistics):
        return observation
    view = (observation.agent_view - stats.mean) / jnp.sqrt(stats.var + _EPS)
    return observation._replace(agent_view=jnp.clip(view, -10.0, 10.0))
