"""Every piece of device and axis handling, in one place.

Learner state leaves carry leading axes `(n_devices, update_batch_size, ...)`. The learner is
`pmap(over "device") ∘ vmap(over "batch")`; gradients and loss metrics are averaged over "batch" and then over
"device". Changing the backend (pmap today, shard_map tomorrow) means changing this file only.

Independent seeds add an axis after the device axis, `(n_devices, num_seeds, update_batch_size, ...)`, when
there is more than one. A sweep's members (grid points × seeds, stoix_like/config/sweep.py) take the seeds' place on
that axis, each told its index there so that it reads its own hyperparameters (`distribute(..., member_indexed=True)`).
In a multi-host run each process holds its local devices' slots; `gather_to_host` and `local_share` move whole
learner states between that layout and one global host copy (checkpoints).

Many processes, one order. In a multi-process run every step that involves several processes runs on every
process, in the same order, and only through this file:

    learn (the pmapped learner's pmeans span processes) → evaluation (the pmapped evaluator spans processes)
    → checkpoint gather (save) ... and, before the loop, the restore broadcast

Each such step sits in a `collective_stage(name)`, which a watchdog thread watches: a process that waits
longer than `arch.collective_timeout_seconds` for its peers prints one line naming itself, the stage and the
wait, and exits (a blocked gloo/NCCL call cannot be interrupted any other way). An exception inside a stage
ends the process the same way, since its peers would otherwise wait in that stage for it. Everything else is
process-local: `first_slot`, `seed_view` and `local_host_copy` read this process's own shards
(`addressable_shards`) and never index or fetch a global array, which would run a program across every
process (on one process only, a deadlock). On one process none of this costs anything: the stages are no-ops.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
import time
import traceback
from typing import Callable, Iterator, Protocol, Sequence, Tuple, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from omegaconf import DictConfig

from stoix_like.runtime import host_keys
from stoix_like.errors import ConfigError
from stoix_like.runtime.threefry_lowering import unrolled_threefry
from stoix_like.types import EnvState, HostTree, LearnerState, PyTree, TimeStep

DEVICE_AXIS = "device"
BATCH_AXIS = "batch"
MEMBER_AXIS = "member"  # a sweep's members (grid points × seeds), batched: read by axis_index only

# a pytree handed back with its structure and the kind of its leaves unchanged
T = TypeVar("T")

# arch defaults (config/arch/anakin.yaml); a config without the keys gets these
DEFAULT_INIT_TIMEOUT_SECONDS = 300
DEFAULT_HEARTBEAT_TIMEOUT_SECONDS = 100
DEFAULT_COLLECTIVE_TIMEOUT_SECONDS = 600


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


def maybe_initialize_distributed(arch: DictConfig) -> None:
    """Start `jax.distributed` when `arch.multihost` asks for it or a multi-process launch is detected.

    Must run before any other jax call touches the devices. With `arch.coordinator_address` the processes
    are named explicitly (several processes on one machine, or a cluster jax cannot detect); otherwise
    jax reads the SLURM / TPU-pod / MPI environment. CPU collectives go through gloo, which is what makes
    `pmean` over "device" span processes on CPU (GPUs and TPUs use their own interconnect).
    """
    coordinator_address = arch.get("coordinator_address")
    if not (arch.multihost or coordinator_address or multihost_environment()):
        return
    timeouts = {name: _seconds_or_default(arch, name, default) for name, default in (
        ("multihost_init_timeout_seconds", DEFAULT_INIT_TIMEOUT_SECONDS),
        ("heartbeat_timeout_seconds", DEFAULT_HEARTBEAT_TIMEOUT_SECONDS),
        ("collective_timeout_seconds", DEFAULT_COLLECTIVE_TIMEOUT_SECONDS))}
    _watchdog.timeout_seconds = timeouts["collective_timeout_seconds"]
    if jax.distributed.is_initialized():
        return
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    # a process that never hears from its peers at start-up, or loses one later, ends instead of waiting
    initialization_timeout = int(timeouts["multihost_init_timeout_seconds"])
    heartbeat_timeout_seconds = int(timeouts["heartbeat_timeout_seconds"])
    if coordinator_address:
        num_processes, process_id = arch.get("num_processes"), arch.get("process_id")
        if num_processes is None or process_id is None:
            raise ConfigError(
                f"arch.coordinator_address={coordinator_address} also needs arch.num_processes and "
                f"arch.process_id (this process's index, 0 to num_processes - 1)."
            )
        jax.distributed.initialize(coordinator_address, num_processes=int(num_processes),
                                   process_id=int(process_id), initialization_timeout=initialization_timeout,
                                   heartbeat_timeout_seconds=heartbeat_timeout_seconds)
    else:
        jax.distributed.initialize(initialization_timeout=initialization_timeout,
                                   heartbeat_timeout_seconds=heartbeat_timeout_seconds)


def _seconds_or_default(arch: DictConfig, name: str, default: int) -> float:
    """A timeout's seconds; null means our default. Its range was checked with the rest of the config
    (config_schema.validate runs before this)."""
    value = arch.get(name)
    return float(default if value is None else value)


# ----------------------------------------------------------------------------------------------------------------
# Stages that span processes, and the watchdog that bounds them.


def _meet_peers(stage: str, timeout_seconds: float) -> None:
    """Wait until every process has reached this stage (a coordination-service barrier, not a collective)."""
    from jax._src import distributed  # the client jax.distributed.initialize connected

    client = distributed.global_state.client
    if client is None or not hasattr(client, "wait_at_barrier"):
        return
    _stages_entered[0] += 1
    # numbered: processes in different stages never meet, and time out naming their own stage
    barrier = f"stoix_like/{_stages_entered[0]}/{stage}"
    start = time.monotonic()
    try:
        client.wait_at_barrier(barrier, int(timeout_seconds * 1000))
    except Exception as error:  # noqa: BLE001 - a barrier that times out or loses its service: a lost peer
        _end_process(f"waited {time.monotonic() - start:.0f}s in stage '{stage}' for its peers; a peer process "
                     f"was lost or is stuck (arch.collective_timeout_seconds={_watchdog.timeout_seconds:g}; "
                     f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})")


class _Watchdog:
    """One daemon thread that ends this process when it waits in a cross-process stage for too long."""

    def __init__(self) -> None:
        self.timeout_seconds = float(DEFAULT_COLLECTIVE_TIMEOUT_SECONDS)
        self._lock = threading.Lock()
        self._changed = threading.Event()
        self._stage: Tuple[str, float, float] | None = None  # (name, monotonic start, allowance seconds)
        self._thread: threading.Thread | None = None

    def enter(self, name: str, allowance_seconds: float) -> None:
        with self._lock:
            self._stage = (name, time.monotonic(), max(0.0, float(allowance_seconds)))
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="collective-watchdog", daemon=True)
                self._thread.start()
        self._changed.set()

    def leave(self) -> None:
        with self._lock:
            self._stage = None
        self._changed.set()

    def _watch(self) -> None:
        while True:
            self._changed.clear()  # before reading: a change made after the read wakes the wait below
            with self._lock:
                stage = self._stage
            if stage is None:
                self._changed.wait()
                continue
            name, start, allowance = stage
            remaining = start + self.timeout_seconds + allowance - time.monotonic()
            if remaining > 0:
                self._changed.wait(remaining)
                continue
            allowed = f"arch.collective_timeout_seconds={self.timeout_seconds:g}" + (
                f", plus {allowance:.0f}s allowed for the stage's own work" if allowance >= 1 else "")
            _end_process(f"waited {time.monotonic() - start:.0f}s in stage '{name}' for its peers; a peer "
                         f"process was lost or is stuck ({allowed})")


_watchdog = _Watchdog()
_stages_entered = [0]  # the same count on every process, since they enter the same stages in the same order
_ending = threading.Lock()


def _end_process(what: str) -> None:
    """One line on stderr, then exit at once: no atexit handlers, whose distributed shutdown would wait too."""
    _ending.acquire()  # the watchdog and the main thread may both get here: one line only; never released
    sys.stdout.flush()
    sys.stderr.write(f"error: process {jax.process_index()} of {jax.process_count()} {what}\n")
    sys.stderr.flush()
    os._exit(1)


@contextlib.contextmanager
def collective_stage(name: str, allowance_seconds: float = 0.0) -> Iterator[None]:
    """Run a step that involves every process, bounded by `arch.collective_timeout_seconds` (+ `allowance_seconds`).

    Every process must enter the same stages in the same order. On one process this is a no-op. The processes
    first meet at a barrier of the coordination service, so that the stage's collectives start together
    (gloo gives up on a peer that is 30 s late to a new communicator, whatever the timeouts here). Past the
    limit, or on an exception inside the stage (its peers would wait for it forever), the process prints
    `error: process I of N ...` naming the stage and exits with status 1.
    """
    if jax.process_count() == 1:
        yield
        return
    _watchdog.enter(name, allowance_seconds)
    start = time.monotonic()
    try:
        _meet_peers(name, _watchdog.timeout_seconds + allowance_seconds)
        yield
    except BaseException as error:  # noqa: BLE001 - the peers cannot be told; end every process instead
        traceback.print_exc()
        _end_process(f"failed after {time.monotonic() - start:.0f}s in stage '{name}' "
                     f"({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}); "
                     f"its peers will stop at their own watchdog")
    finally:
        _watchdog.leave()


def device_count() -> int:
    """Devices across all processes: what the global env count is split over."""
    return jax.device_count()


def local_device_count() -> int:
    return jax.local_device_count()


def is_main_process() -> bool:
    """Only process 0 logs and checkpoints in a multi-host run."""
    return jax.process_index() == 0


# Set while `scan_updates` traces an update step for an update batch of one, which it runs without the batch vmap:
# the "batch" axis is then unbound, and a mean or sum over one replica is that replica's value. Thread-local: Sebulba
# traces its learner on a thread of its own.
_tracing_unbatched = threading.local()


def _over_batch(collective: Callable[..., PyTree], tree: T) -> T:
    if getattr(_tracing_unbatched, "active", False):
        return tree
    return collective(tree, axis_name=BATCH_AXIS)


@contextlib.contextmanager
def _unbatched_trace() -> Iterator[None]:
    previous = getattr(_tracing_unbatched, "active", False)
    _tracing_unbatched.active = True
    try:
        yield
    finally:
        _tracing_unbatched.active = previous


def _over_devices(collective: Callable[..., PyTree], tree: T) -> T:
    # Over one device the mean and the sum are that device's value, yet XLA keeps the all-reduce: on the CPU
    # it is a rendezvous per gradient step, with a thread hand-off when the pool has several threads. The size
    # is static inside pmap and counts every process's devices, so a multi-host run still reduces.
    if jax.lax.axis_size(DEVICE_AXIS) == 1:
        return tree
    return collective(tree, axis_name=DEVICE_AXIS)


def pmean_batch_then_device(tree: T) -> T:
    """Average over the update batch, then over devices: every replica ends with the same value."""
    return _over_devices(jax.lax.pmean, _over_batch(jax.lax.pmean, tree))


def psum_batch_then_device(tree: T) -> T:
    return _over_devices(jax.lax.psum, _over_batch(jax.lax.psum, tree))


def psum_over_devices(tree: T) -> T:
    """A sum over the devices alone: for what the update batch's vmap has already handed out as an axis (a PBT
    population's fitness, summed over each member's batch before it meets the devices)."""
    return _over_devices(jax.lax.psum, tree)


def scan_updates(update_step: Callable[[LearnerState], Tuple[LearnerState, PyTree]], num_updates: int
                 ) -> Callable[[LearnerState], Tuple[LearnerState, PyTree]]:
    """Build a learner: `num_updates` calls of `update_step`, each vmapped over the update batch.

    `update_step(state) -> (state, outputs)` works on one batch element; the returned learner takes and
    returns a state with a leading `update_batch_size` axis and stacks outputs as (update_batch, num_updates, ...).

    An update batch of one (the default) runs `update_step` on the squeezed state, not vmapped: a vmap over one
    element still batches every op (a dot becomes a batched dot, a gather gains a batch dimension), and on CPU
    (jax 0.10.2) that cost PQN ~1/3 of its throughput on CartPole (59k → 88k steps/s, interleaved A/B). The math
    is the same; the batch collectives are the identity there (`_over_batch`).
    """
    batched_update_step = jax.vmap(update_step, axis_name=BATCH_AXIS)

    def one_slot_update(state: LearnerState, _: None) -> Tuple[LearnerState, PyTree]:
        with _unbatched_trace():
            return update_step(state)

    def batched_update(state: LearnerState, _: None) -> Tuple[LearnerState, PyTree]:
        return batched_update_step(state)

    def learner_fn(learner_state: LearnerState) -> Tuple[LearnerState, PyTree]:
        update_batch_size = jax.tree_util.tree_leaves(learner_state)[0].shape[0]
        if update_batch_size == 1:
            # The batch axis is dropped once around the whole loop, not inside each update: squeezed and restored
            # in every iteration, XLA kept two copies of a replay buffer written in the loop (one per shape) and
            # copied both in full every update; SAC with a 1,048,576-transition buffer learned 2x slower.
            learner_state, outputs = jax.lax.scan(one_slot_update, jax.tree_util.tree_map(lambda x: x[0], learner_state),
                                                  None, length=num_updates)
            return jax.tree_util.tree_map(lambda x: x[None], (learner_state, outputs))
        learner_state, outputs = jax.lax.scan(batched_update, learner_state, None, length=num_updates)
        # scan stacks on axis 0; put the batch axis first so every output reads (batch, update, ...)
        outputs = jax.tree_util.tree_map(lambda x: jnp.swapaxes(x, 0, 1), outputs)
        return learner_state, outputs

    return learner_fn


SEED_LOOPS = ("vmap", "map", "map_on_cpu")  # arch.seed_loop: how one program runs its N seeds


def seed_loop_of(config: DictConfig) -> str:
    """A run config's `arch.seed_loop`; vmap where a config built by hand leaves it out (the schema's default)."""
    return str(config.arch.get("seed_loop", "vmap"))


def seeds_in_sequence(seed_loop: str) -> bool:
    """Whether an N-seed program runs its seeds one after another (`lax.map`) rather than batched (`vmap`).

    Batching amortises per-op overhead, which is what a learner of small ops pays for (PPO on 32 CartPoles: 8 seeds
    cost 5.6-6.1x one seed's learning time batched, 6.3-8.0x in sequence). A learner of big matrix products has nothing
    to amortise, and on the CPU its batched products run slower than one seed's (SAC on Pendulum, 256-sample
    minibatches through 128-wide MLPs: 8 seeds cost 8.1-9.8x one seed batched, 7.9-8.2x in sequence), hence
    map_on_cpu; on a GPU batching is what fills the device."""
    if seed_loop not in SEED_LOOPS:
        raise ConfigError(f"arch.seed_loop={seed_loop!r} must be one of {', '.join(SEED_LOOPS)}.")
    return seed_loop == "map" or (seed_loop == "map_on_cpu" and jax.default_backend() == "cpu")


def distribute(learner_fn: Callable, num_seeds: int = 1, seed_loop: str = "vmap", member_indexed: bool = False
               ) -> jax.stages.Wrapped:
    """Run one copy of the learner per local device; collectives over "device" span all processes.

    With several seeds every device runs all of them, batched by one more vmap or one after another
    (`seeds_in_sequence`). Neither has an axis name, so the "batch" and "device" collectives of a seed never mix
    it with another seed. `member_indexed`: the seeds are a sweep's members, and `learner_fn(state, member_index)`
    is told which one it runs (each reads its own hyperparameters by it: stoix_like/learner/hyperparams.py).
    """
    if member_indexed:
        learner_fn = _told_its_member(learner_fn, num_seeds, seeds_in_sequence(seed_loop))
    elif num_seeds > 1:
        learner_fn = functools.partial(jax.lax.map, learner_fn) if seeds_in_sequence(seed_loop) \
            else jax.vmap(learner_fn)
    return jax.pmap(learner_fn, axis_name=DEVICE_AXIS)


def _told_its_member(learner_fn: Callable, num_members: int, in_sequence: bool) -> Callable:
    """`learner_fn(state, member_index)` over the members' axis, batched or in sequence as seeds are. The batched
    axis is named only so that `axis_index` can read a member's place on it; no collective names it."""
    if num_members == 1:  # one member: its state has no members' axis (stack_seeds)
        return lambda state: learner_fn(state, jnp.zeros((), jnp.int32))
    if in_sequence:
        return lambda states: jax.lax.map(lambda pair: learner_fn(*pair),
                                          (states, jnp.arange(num_members, dtype=jnp.int32)))
    return jax.vmap(lambda state: learner_fn(state, jax.lax.axis_index(MEMBER_AXIS)), axis_name=MEMBER_AXIS)


def compile_learner(learner_fn: Callable, example_state: LearnerState, num_seeds: int = 1, seed_loop: str = "vmap",
                    member_indexed: bool = False) -> Callable:
    """The distributed learner, compiled now so that compilation is timed apart from learning.

    On several processes each call turns this process's local arrays into global ones and back (the AOT
    executable takes global arrays only), as the pmapped function would. There each call is the stage 'learn', which
    returns only once the step is done (its pmeans wait for every process), and is allowed twice its longest earlier
    call (the compile time, for the first) on top of `arch.collective_timeout_seconds`.
    """
    return compile_distributed(distribute(learner_fn, num_seeds, seed_loop, member_indexed), example_state)


def distribute_population(population_fn: Callable) -> jax.stages.Wrapped:
    """A learner that takes every member's state at once (a PBT population, leaves (members, batch, ...) on each
    device: stoix_like/learner/pbt.py), run as one copy per local device."""
    return jax.pmap(population_fn, axis_name=DEVICE_AXIS)


def compile_distributed(learn: jax.stages.Wrapped, example_state: LearnerState) -> Callable:
    """`learn` (`distribute`'s or `distribute_population`'s) compiled for `example_state`: see compile_learner."""
    compile_start = time.monotonic()
    with unrolled_threefry():  # the same random bits in fewer ops on CPU (threefry_lowering.py says why)
        lowered = learn.lower(example_state)
    compiled = lowered.compile()
    if jax.process_count() == 1:
        return compiled
    longest = [time.monotonic() - compile_start]
    # the executable takes and gives global arrays: each process's local part goes in and comes out as the
    # pmapped function would move it, without tracing and compiling the learner a second time at its first call
    (in_shardings,), _ = compiled.input_shardings
    out_shardings = compiled.output_shardings
    specs = lambda shardings: jax.tree_util.tree_map(lambda sharding: sharding.spec, shardings)  # noqa: E731
    mesh = jax.tree_util.tree_leaves(in_shardings)[0].mesh

    def run_compiled(learner_state: LearnerState) -> Tuple[LearnerState, PyTree]:
        global_state = multihost_utils.host_local_array_to_global_array(learner_state, mesh, specs(in_shardings))
        return multihost_utils.global_array_to_host_local_array(compiled(global_state), mesh, specs(out_shardings))

    def learn_with_peers(learner_state: LearnerState) -> Tuple[LearnerState, PyTree]:
        start = time.monotonic()
        with collective_stage("learn", allowance_seconds=2 * longest[0]):
            result = jax.block_until_ready(run_compiled(learner_state))
        longest[0] = max(longest[0], time.monotonic() - start)
        return result

    return learn_with_peers


def stack_seeds(states: Sequence[T]) -> T:
    """Independent learner states side by side: (devices, seeds, batch, ...); one seed keeps (devices, batch, ...)."""
    if len(states) == 1:
        return states[0]
    # Stacked on the host: an XLA stack compiles a program per leaf shape (or one program with every leaf), which
    # took seconds on a CPU, while copying a fresh state once costs milliseconds. The values are the same.
    return jax.tree_util.tree_map(
        lambda *leaves: jax.device_put(np.stack([np.asarray(leaf) for leaf in leaves], axis=1)), *states)


def seed_view(tree: PyTree, seed_index: int, num_seeds: int) -> HostTree:
    """One seed's part of a (devices, [seeds,] batch, ...) pytree, in the single-seed layout (devices, batch, ...).

    This process's devices only, as numpy (`local_host_copy`): never a program across processes.
    """
    tree = local_host_copy(tree)
    if num_seeds == 1:
        return tree
    return jax.tree_util.tree_map(lambda x: x[:, seed_index], tree)


def local_host_copy(tree: PyTree) -> HostTree:
    """Every leaf as numpy, holding this process's devices' part only (local devices on axis 0).

    Reads this process's own shards: unlike `np.asarray`, `jax.device_get` or indexing, it never runs a program
    across processes, so any one process may call it at any time. Numpy leaves pass through unchanged.
    """
    return jax.tree_util.tree_map(_local_numpy, tree)


def _local_numpy(leaf: object) -> object:
    if not isinstance(leaf, jax.Array):
        return leaf
    if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
        raise TypeError("local_host_copy takes raw key data, not typed PRNG keys: use jax.random.key_data first.")
    if leaf.is_fully_addressable:
        return np.asarray(leaf)
    return np.concatenate([np.asarray(shard.data) for shard in _local_shards(leaf)], axis=0)


def _local_shards(leaf: jax.Array) -> list[jax.Shard]:
    """This process's shards of a leaf split over devices on axis 0 only, in axis-0 order, one per distinct slice."""
    by_start: dict[int, jax.Shard] = {}
    for shard in leaf.addressable_shards:
        index = tuple(shard.index)
        if any(part != slice(None) for part in index[1:]):
            raise ValueError(f"a leaf of shape {leaf.shape} is split on an axis other than the device axis")
        start = (index[0].start or 0) if index else 0
        by_start.setdefault(start, shard)  # replicas of one slice: keep one
    return [by_start[start] for start in sorted(by_start)]


def broadcast_to_devices_and_batch(tree: PyTree, update_batch_size: int) -> PyTree:
    """Copy a single pytree to every (local device, batch element) slot: identical initial params."""
    n_local = local_device_count()

    def expand(x: jax.typing.ArrayLike) -> jax.Array:
        x = jnp.asarray(x)
        return jnp.broadcast_to(x, (n_local, update_batch_size) + x.shape)

    # pmap shards a leading local-device axis itself on the first call, and its outputs stay sharded
    return jax.tree_util.tree_map(expand, tree)


def split_key_per_slot(key: jax.Array, update_batch_size: int, num_per_slot: int | None = None) -> jax.Array:
    """Independent keys shaped (local devices, update batch[, num_per_slot], 2), distinct across processes, split on
    the host before any setup program runs (`host_keys`: jax's bits, no XLA program)."""
    n_local = local_device_count()
    shape = (n_local, update_batch_size) + (() if num_per_slot is None else (num_per_slot,))
    # fold in the process index so that processes do not reuse each other's randomness
    keys = host_keys.split(host_keys.fold_in(key, jax.process_index()), int(np.prod(shape)))
    return keys.reshape(shape + keys.shape[1:])


def first_slot(tree: PyTree, seed_index: int = 0, num_seeds: int = 1) -> PyTree:
    """The (first local device, batch 0) copy of a learner-state pytree (of one seed).

    Process-local: a jax leaf is indexed within this process's first device shard (on that device, so a large
    state is never copied whole); numpy leaves are indexed on the host. Slots hold identical params on every
    device of every process, so any process's first slot is the run's.
    """
    index = (0,) if num_seeds == 1 else (seed_index, 0)

    def slot(leaf: jax.Array | np.ndarray) -> jax.Array | np.ndarray:
        if isinstance(leaf, jax.Array):  # the first local device's shard: (1, ...), or the whole leaf if unsplit
            leaf = _local_shards(leaf)[0].data
        return leaf[(0,) + index]

    return jax.tree_util.tree_map(slot, tree)


def fill_slots(per_seed: Sequence[PyTree], like: T, num_seeds: int) -> T:
    """Copy seed k's single pytree `per_seed[k]` into all of its (local device, batch) slots, shaped like `like`."""

    def fill(like_leaf: jax.Array, *values: jax.typing.ArrayLike) -> jax.Array:
        if num_seeds == 1:
            return jnp.broadcast_to(values[0], like_leaf.shape)
        slot_shape = like_leaf.shape[:1] + like_leaf.shape[2:]
        return jnp.stack([jnp.broadcast_to(value, slot_shape) for value in values], axis=1)

    return jax.tree_util.tree_map(fill, like, *per_seed)


class Resettable(Protocol):
    """What `reset_envs_per_slot` needs of an env (stoix_like.envs.environment.Environment has it)."""

    def reset(self, key: jax.Array) -> Tuple[EnvState, TimeStep]: ...


def reset_envs_per_slot(env: Resettable, keys: jax.Array) -> Tuple[EnvState, TimeStep]:
    """Reset copies of the (unbatched) `env` in every (local device, batch element) slot, one per key of `keys`
    (`split_key_per_slot(key, update_batch_size, num_envs)`)."""
    with unrolled_threefry():  # a setup program
        return _reset_every_slot(env, keys)


# the env is static (hashed by identity): every seed's setup resets the same env object with the same program
@functools.partial(jax.jit, static_argnums=0)
def _reset_every_slot(env: Resettable, keys: jax.Array) -> Tuple[EnvState, TimeStep]:
    return jax.vmap(jax.vmap(jax.vmap(env.reset)))(keys)


def process_index() -> int:
    return jax.process_index()


def process_count() -> int:
    return jax.process_count()


def gather_to_host(tree: PyTree) -> HostTree:
    """The whole learner state as numpy: every process's local devices, in process order, on axis 0.

    A collective in a multi-host run (the stage 'checkpoint gather'): every process must call it, although
    only process 0 keeps the result.
    """
    local = local_host_copy(tree)
    if jax.process_count() == 1:
        return local
    with collective_stage("checkpoint gather"):
        return local_host_copy(multihost_utils.process_allgather(local, tiled=True))


def local_share(global_tree: T) -> T:
    """This process's devices' part of a `gather_to_host` tree (the inverse of the gather)."""
    n_local = local_device_count()
    start = jax.process_index() * n_local
    return jax.tree_util.tree_map(lambda x: x[start:start + n_local], global_tree)


def broadcast_from_main(tree: T, stage: str = "broadcast") -> T:
    """Process 0's value of a host pytree on every process (same shapes everywhere); a no-op on one process."""
    if jax.process_count() == 1:
        return tree
    with collective_stage(stage):
        return local_host_copy(multihost_utils.broadcast_one_to_all(tree))


def global_shape(local_shape: Tuple[int, ...]) -> Tuple[int, ...]:
    """The shape a learner-state leaf has once every process's devices are gathered on axis 0."""
    return (local_shape[0] * jax.process_count(),) + tuple(local_shape[1:])


# ------------------------------------------------------------------------------------------------ Sebulba
# arch=sebulba learns on a chosen subset of devices (arch.learner_device_ids) while actor threads act on others; its
# learner is the same pmap ∘ vmap with the same axis names, so a system's double pmean works unchanged.


def devices_by_index(indices: Sequence[int], key: str) -> list[jax.Device]:
    """`jax.devices()[i]` for each index, or a ConfigError naming the devices there are."""
    devices = jax.devices()
    bad = [index for index in indices if not 0 <= int(index) < len(devices)]
    if bad:
        raise ConfigError(f"{key}={list(indices)}: device {bad[0]} does not exist; jax sees {len(devices)} "
                          f"device{'s' if len(devices) > 1 else ''} (indices 0..{len(devices) - 1}: "
                          f"{', '.join(str(d) for d in devices)}).")
    return [devices[int(index)] for index in indices]


def distribute_learn_step(learn_step: Callable, devices: Sequence[jax.Device]) -> Callable:
    """`learn(state, batch)`: one update on every learner device, each vmapped over its (size-1) update batch, so
    that `pmean_batch_then_device` averages gradients over the learner devices."""
    return jax.pmap(jax.vmap(learn_step, axis_name=BATCH_AXIS), axis_name=DEVICE_AXIS, devices=list(devices))


def place_as_learn_step_outputs(tree: T, devices: Sequence[jax.Device]) -> T:
    """`tree` (arrays with one leading entry per device) placed on `devices` exactly as `distribute_learn_step`'s
    function places its outputs: sharded over a mesh whose one axis is named after its pmap axis. That function
    compiles for the placement of its inputs: called first with host arrays and then with its own outputs, it would
    compile twice (seconds under load, and Ctrl-C cannot cut a compile short)."""
    sharding = jax.sharding.NamedSharding(jax.sharding.Mesh(np.asarray(list(devices)), (DEVICE_AXIS,)),
                                          jax.sharding.PartitionSpec(DEVICE_AXIS))
    return jax.device_put(tree, sharding)


def replicate_over_slots(tree: PyTree, n_devices: int) -> HostTree:
    """A single pytree in every (learner device, batch of 1) slot, on the host: pmap places it."""
    return jax.tree_util.tree_map(lambda x: np.broadcast_to(np.asarray(x), (n_devices, 1) + np.shape(x)), tree)


def split_env_axis_over_slots(trajectory: HostTree, n_devices: int) -> HostTree:
    """Time-major `(T, envs, ...)` host leaves -> `(n_devices, 1, T, envs / n_devices, ...)`: each learner device
    learns from its share of the envs, as each Anakin device does from its own."""

    def split(x: np.ndarray) -> np.ndarray:
        length, envs = x.shape[:2]
        x = x.reshape((length, n_devices, 1, envs // n_devices) + x.shape[2:])
        return np.moveaxis(np.moveaxis(x, 1, 0), 2, 1)  # (T, n, 1, E) -> (n, T, 1, E) -> (n, 1, T, E)

    return jax.tree_util.tree_map(split, trajectory)
