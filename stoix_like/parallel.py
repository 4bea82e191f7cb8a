"""Every piece of device and axis handling, in one place.

Learner state leaves carry leading axes `(n_devices, update_batch_size, ...)`. The learner is
`pmap(over "device") ∘ vmap(over "batch")`; gradients and loss metrics are averaged over "batch" and then over
"device". Changing the backend (pmap today, shard_map tomorrow) means changing this file only.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Tuple

import jax
import jax.numpy as jnp
import numpy as np

DEVICE_AXIS = "device"
BATCH_AXIS = "batch"


def maybe_initialize_distributed(multihost: bool, coordinator_address: str | None = None,
                                 num_processes: int | None = None, process_id: int | None = None) -> None:
    """Start `jax.distributed` when asked to, or when a SLURM/TPU-pod launch is detected.

    Must run before any other jax call touches the devices. With an explicit coordinator (e.g. several
    processes on one machine) the CPU collectives go through gloo, which is what makes `pmean` over
    "device" span processes on CPU.
    """
    auto_detected = "SLURM_JOB_ID" in os.environ and int(os.environ.get("SLURM_NTASKS", "1")) > 1
    if not (multihost or auto_detected or coordinator_address):
        return
    if jax.distributed.is_initialized():
        return
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if coordinator_address:
        jax.distributed.initialize(coordinator_address, num_processes=num_processes, process_id=process_id)
    else:
        jax.distributed.initialize()


def device_count() -> int:
    """Devices across all processes: what the global env count is split over."""
    return jax.device_count()


def local_device_count() -> int:
    return jax.local_device_count()


def is_main_process() -> bool:
    """Only process 0 logs and checkpoints in a multi-host run."""
    return jax.process_index() == 0


def pmean_batch_then_device(tree: Any) -> Any:
    """Average over the update batch, then over devices: every replica ends with the same value."""
    tree = jax.lax.pmean(tree, axis_name=BATCH_AXIS)
    return jax.lax.pmean(tree, axis_name=DEVICE_AXIS)


def psum_batch_then_device(tree: Any) -> Any:
    tree = jax.lax.psum(tree, axis_name=BATCH_AXIS)
    return jax.lax.psum(tree, axis_name=DEVICE_AXIS)


def scan_updates(update_step: Callable[[Any], Tuple[Any, Any]], num_updates: int) -> Callable:
    """Build a learner: `num_updates` calls of `update_step`, each vmapped over the update batch.

    `update_step(state) -> (state, outputs)` works on one batch element; the returned learner takes and
    returns a state with a leading `update_batch_size` axis and stacks outputs as (update_batch, num_updates, ...).
    """
    batched_update_step = jax.vmap(update_step, axis_name=BATCH_AXIS)

    def learner_fn(learner_state: Any) -> Tuple[Any, Any]:
        def one_update(state: Any, _: None) -> Tuple[Any, Any]:
            return batched_update_step(state)

        learner_state, outputs = jax.lax.scan(one_update, learner_state, None, length=num_updates)
        # scan stacks on axis 0; put the batch axis first so every output reads (batch, update, ...)
        outputs = jax.tree_util.tree_map(lambda x: jnp.swapaxes(x, 0, 1), outputs)
        return learner_state, outputs

    return learner_fn


def distribute(learner_fn: Callable) -> Callable:
    """Run one copy of the learner per local device; collectives over "device" span all processes."""
    return jax.pmap(learner_fn, axis_name=DEVICE_AXIS)


def broadcast_to_devices_and_batch(tree: Any, update_batch_size: int) -> Any:
    """Copy a single pytree to every (local device, batch element) slot: identical initial params."""
    n_local = local_device_count()

    def expand(x: Any) -> Any:
        x = jnp.asarray(x)
        return jnp.broadcast_to(x, (n_local, update_batch_size) + x.shape)

    # pmap shards a leading local-device axis itself on the first call, and its outputs stay sharded
    return jax.tree_util.tree_map(expand, tree)


def split_key_per_slot(key: jax.Array, update_batch_size: int, num_per_slot: int | None = None) -> jax.Array:
    """Independent keys shaped (local devices, update batch[, num_per_slot], 2), distinct across processes."""
    n_local = local_device_count()
    # fold in the process index so that processes do not reuse each other's randomness
    key = jax.random.fold_in(key, jax.process_index())
    shape = (n_local, update_batch_size) + (() if num_per_slot is None else (num_per_slot,))
    keys = jax.random.split(key, int(np.prod(shape)))
    return keys.reshape(shape + keys.shape[1:])


def first_slot(tree: Any) -> Any:
    """The (device 0, batch 0) copy of a learner-state pytree, on the host side of the call."""
    return jax.tree_util.tree_map(lambda x: x[0, 0], tree)


def first_device(tree: Any) -> Any:
    return jax.tree_util.tree_map(lambda x: x[0], tree)


def reset_envs_per_slot(batched_env: Any, key: jax.Array, update_batch_size: int, num_envs: int) -> Any:
    """Reset `num_envs` envs in every (local device, batch element) slot with independent keys."""
    keys = split_key_per_slot(key, update_batch_size, num_envs)
    return jax.jit(jax.vmap(jax.vmap(batched_env.reset)))(keys)
