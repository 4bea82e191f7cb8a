"""Every piece of device and axis handling, in one place.

Learner state leaves carry leading axes `(n_devices, update_batch_size, ...)`. The learner is
`pmap(over "device") ∘ vmap(over "batch")`; gradients and loss metrics are averaged over "batch" and then over
"device". Changing the backend (pmap today, shard_map tomorrow) means changing this file only.

Independent seeds add an axis after the device axis, `(n_devices, num_seeds, update_batch_size, ...)`, when
there is more than one. In a multi-host run each process holds its local devices' slots; `gather_to_host`
and `local_share` move whole learner states between that layout and one global host copy (checkpoints).
"""

from __future__ import annotations

import os
from typing import Any, Callable, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils

from stoix_like.errors import ConfigError

DEVICE_AXIS = "device"
BATCH_AXIS = "batch"


def multihost_environment() -> str | None:
    """The cluster launcher that started this process as one of several, if any (what jax can auto-detect)."""
    # srun's step, not the batch script: one of several tasks started together
    if int(os.environ.get("SLURM_STEP_NUM_TASKS", "1")) > 1 and "SLURM_JOB_ID" in os.environ:
        return "SLURM"
    if "," in os.environ.get("TPU_WORKER_HOSTNAMES", ""):
        return "TPU pod"
    if int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1")) > 1:
        return "Open MPI"
    return None


def maybe_initialize_distributed(arch: Any) -> None:
    """Start `jax.distributed` when `arch.multihost` asks for it or a multi-process launch is detected.

    Must run before any other jax call touches the devices. With `arch.coordinator_address` the processes
    are named explicitly (several processes on one machine, or a cluster jax cannot detect); otherwise
    jax reads the SLURM / TPU-pod / MPI environment. CPU collectives go through gloo, which is what makes
    `pmean` over "device" span processes on CPU (GPUs and TPUs use their own interconnect).
    """
    coordinator_address = arch.get("coordinator_address")
    if not (arch.multihost or coordinator_address or multihost_environment()):
        return
    if jax.distributed.is_initialized():
        return
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if coordinator_address:
        num_processes, process_id = arch.get("num_processes"), arch.get("process_id")
        if num_processes is None or process_id is None:
            raise ConfigError(
                f"arch.coordinator_address={coordinator_address} also needs arch.num_processes and "
                f"arch.process_id (this process's index, 0 to num_processes - 1)."
            )
        jax.distributed.initialize(coordinator_address, num_processes=int(num_processes),
                                   process_id=int(process_id))
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


def distribute(learner_fn: Callable, num_seeds: int = 1) -> Callable:
    """Run one copy of the learner per local device; collectives over "device" span all processes.

    With several seeds every device runs all of them through one more vmap. It has no axis name, so the
    "batch" and "device" collectives of a seed never mix it with another seed.
    """
    if num_seeds > 1:
        learner_fn = jax.vmap(learner_fn)
    return jax.pmap(learner_fn, axis_name=DEVICE_AXIS)


def compile_learner(learner_fn: Callable, example_state: Any, num_seeds: int = 1) -> Callable:
    """The distributed learner, compiled now so that compilation is timed apart from learning.

    On several processes calls go through the pmapped function, which turns each process's local arrays
    into global ones and back (the AOT executable takes global arrays only); the program compiled here is
    the one its first call finds in the cache.
    """
    learn = distribute(learner_fn, num_seeds)
    compiled = learn.lower(example_state).compile()
    return compiled if jax.process_count() == 1 else learn


def stack_seeds(states: Sequence[Any]) -> Any:
    """Independent learner states side by side: (devices, seeds, batch, ...); one seed keeps (devices, batch, ...)."""
    if len(states) == 1:
        return states[0]
    return jax.tree_util.tree_map(lambda *leaves: jnp.stack(leaves, axis=1), *states)


def seed_view(tree: Any, seed_index: int, num_seeds: int) -> Any:
    """One seed's part of a (devices, [seeds,] batch, ...) pytree, in the single-seed layout (devices, batch, ...)."""
    if num_seeds == 1:
        return tree
    return jax.tree_util.tree_map(lambda x: x[:, seed_index], tree)


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


def first_slot(tree: Any, seed_index: int = 0, num_seeds: int = 1) -> Any:
    """The (device 0, batch 0) copy of a learner-state pytree (of one seed), on the host side of the call."""
    if num_seeds == 1:
        return jax.tree_util.tree_map(lambda x: x[0, 0], tree)
    return jax.tree_util.tree_map(lambda x: x[0, seed_index, 0], tree)


def fill_slots(per_seed: Sequence[Any], like: Any, num_seeds: int) -> Any:
    """Copy seed k's single pytree `per_seed[k]` into all of its (local device, batch) slots, shaped like `like`."""

    def fill(like_leaf: Any, *values: Any) -> Any:
        if num_seeds == 1:
            return jnp.broadcast_to(values[0], like_leaf.shape)
        slot_shape = like_leaf.shape[:1] + like_leaf.shape[2:]
        return jnp.stack([jnp.broadcast_to(value, slot_shape) for value in values], axis=1)

    return jax.tree_util.tree_map(fill, like, *per_seed)


def first_device(tree: Any) -> Any:
    return jax.tree_util.tree_map(lambda x: x[0], tree)


def reset_envs_per_slot(batched_env: Any, key: jax.Array, update_batch_size: int, num_envs: int) -> Any:
    """Reset `num_envs` envs in every (local device, batch element) slot with independent keys."""
    keys = split_key_per_slot(key, update_batch_size, num_envs)
    return jax.jit(jax.vmap(jax.vmap(batched_env.reset)))(keys)


def process_index() -> int:
    return jax.process_index()


def process_count() -> int:
    return jax.process_count()


def gather_to_host(tree: Any) -> Any:
    """The whole learner state as numpy: every process's local devices, in process order, on axis 0.

    A collective in a multi-host run: every process must call it, although only process 0 keeps the result.
    """
    local = jax.device_get(tree)
    if jax.process_count() == 1:
        return local
    return multihost_utils.process_allgather(local, tiled=True)


def local_share(global_tree: Any) -> Any:
    """This process's devices' part of a `gather_to_host` tree (the inverse of the gather)."""
    n_local = local_device_count()
    start = jax.process_index() * n_local
    return jax.tree_util.tree_map(lambda x: x[start:start + n_local], global_tree)


def broadcast_from_main(tree: Any) -> Any:
    """Process 0's value of a host pytree on every process (same shapes everywhere); a no-op on one process."""
    if jax.process_count() == 1:
        return tree
    return multihost_utils.broadcast_one_to_all(tree)


def global_shape(local_shape: Tuple[int, ...]) -> Tuple[int, ...]:
    """The shape a learner-state leaf has once every process's devices are gathered on axis 0."""
    return (local_shape[0] * jax.process_count(),) + tuple(local_shape[1:])
