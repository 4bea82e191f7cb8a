"""`arch.cpu_threads`: how many threads XLA's CPU backend runs a program on.

XLA sizes its CPU thread pool once, when jax starts its backends, from the cores the process may run on. A learner
on a few envs (PureJaxRL's PPO config: 4 CartPoles, 128-sample minibatches) is a chain of microsecond kernels. With
a second pool thread, XLA's executor hands ready kernels to it, and the program's state moves between the cores'
caches each time: on a 2-core AMD EPYC (Zen 4) our PPO woke the second thread ~3,000 times a second, used 1.3 cores
and ran at 143k-147k steps/s; with a pool of one thread it ran at 173k-180k (rejax's PPO, one thread either way:
157k-164k). A learner on many envs gains from the second thread instead: with 256 or 2,048 CartPoles, 2 threads
learned 1.3-1.45x faster than 1.

So null chooses per run (`start_backend_for_run`): one thread for a small run on the CPU alone, every core
otherwise. Steady PPO on the same machine, PureJaxRL's shape (128-step rollouts, 4 epochs of 4 minibatches), one
thread against two, two rounds: 4 envs 1.09-1.12x, 16 envs 1.15-1.45x, 32 envs 1.01-1.11x, 64 envs 0.86-0.94x,
256 envs 0.71-0.75x. Again after the optimiser's moments went per params leaf (optim.py), two rounds of a fresh process
each: 4 envs 1.05-1.17x, 16 envs 1.00-1.25x, 32 envs 0.90-1.01x, 64 envs 0.79-0.80x. The rule takes the envs one
device steps over all its batched seeds (arch.seed_loop vmap; seeds run one after another count once), at most
SMALL_RUN_ENVS.

The backend starts here with the process limited to its first `cpu_threads` cores, then the limit is lifted for every
thread but the pool's: the Python thread, the backend's other threads (the compiler's) and what they start later may
run anywhere.
"""

from __future__ import annotations

import os
import re
import warnings
from importlib import metadata, util
from typing import Any, Mapping, Optional

from stoix_like.errors import ConfigError

# a run on the CPU alone whose device steps at most this many envs, over its batched seeds, gets a pool of one thread
# when arch.cpu_threads is null (measured in the module's docstring: 16 gained, 32 broke even, 64 lost)
SMALL_RUN_ENVS = 16

# the pool size this module started the backend with, if it did: a second run in the same process (a sweep, a
# notebook) may ask for the same size again, and nothing else
_started_with: list = []


def start_backend_for_run(arch: Mapping[str, Any]) -> None:
    """Start jax's backends for an Anakin run: with `arch.cpu_threads` threads if given (refused as
    `start_backend_with_cpu_threads` refuses), else with one thread when `is_small_cpu_run(arch)`. A choice null made
    is never refused: where the backend has already started, it stays as it is."""
    if arch.get("cpu_threads") is not None:
        start_backend_with_cpu_threads(int(arch["cpu_threads"]))
        return
    from jax._src import xla_bridge

    small = is_small_cpu_run(arch)
    if _started_with and not small and _started_with[0] < len(os.sched_getaffinity(0)):
        # a sweep's later job in the same process, whose pool an earlier job sized
        warnings.warn(f"XLA's CPU pool has {_started_with[0]} thread(s), sized by an earlier run in this process; "
                      "this run would use every core. Run it in a fresh process (a sweep: "
                      "hydra/launcher=submitit_local).", stacklevel=2)
    if small and not _started_with and not xla_bridge.backends_are_initialized() and hasattr(os, "sched_setaffinity"):
        start_backend_with_cpu_threads(1)


def is_small_cpu_run(arch: Mapping[str, Any]) -> bool:
    """Whether one pool thread is the faster choice: at most SMALL_RUN_ENVS envs (over batched seeds) on the one CPU
    device of the one process, and no accelerator that jax could pick instead."""
    # batched seeds make every op num_seeds times bigger; seeds run one after another (arch.seed_loop map, or
    # map_on_cpu, which maps here: the rule applies on the CPU alone) keep one seed's ops
    batched_seeds = int(arch.get("num_seeds", 1)) if arch.get("seed_loop", "vmap") == "vmap" else 1
    envs = int(arch.get("total_num_envs", SMALL_RUN_ENVS + 1)) * batched_seeds
    one_process = arch.get("num_processes") in (None, 1) and not arch.get("coordinator_address") \
        and not arch.get("multihost")
    return envs <= SMALL_RUN_ENVS and one_process and _one_cpu_device() and not _accelerator_possible()


def _one_cpu_device() -> bool:
    """No more than one CPU device asked for (XLA's forced device count, or jax's own setting)."""
    import jax

    forced = re.search(r"--xla_force_host_platform_device_count=(\d+)", os.environ.get("XLA_FLAGS", ""))
    return (not forced or int(forced.group(1)) <= 1) and int(getattr(jax.config, "jax_num_cpu_devices", -1)) <= 1


def _accelerator_possible() -> bool:
    """Whether jax may start a backend other than the CPU's: JAX_PLATFORMS names one, or, where it names none, a
    GPU or TPU plugin is installed (jax finds them as `jax_plugins` entry points or modules, and libtpu)."""
    import jax

    platforms = getattr(jax.config, "jax_platforms", None)  # JAX_PLATFORMS or jax.config.update
    if platforms:
        return any(platform.strip() not in ("", "cpu") for platform in platforms.split(","))
    return bool(metadata.entry_points(group="jax_plugins")) or util.find_spec("jax_plugins") is not None \
        or util.find_spec("libtpu") is not None


def start_backend_with_cpu_threads(cpu_threads: Optional[int]) -> None:
    """Start jax's backends with an XLA CPU thread pool of `cpu_threads` threads (null: jax's own choice, every core
    the process may run on). Raises ConfigError, before anything else starts, for a count the process cannot have."""
    if cpu_threads is None:
        return
    from jax._src import xla_bridge  # jax has no public "have the backends started?"

    if _started_with:
        if _started_with[0] != cpu_threads:
            raise ConfigError(f"arch.cpu_threads={cpu_threads}: this process started XLA's CPU backend with "
                              f"{_started_with[0]} threads, and a backend is sized once; run it in a fresh process.")
        return
    if xla_bridge.backends_are_initialized():
        raise ConfigError(f"arch.cpu_threads={cpu_threads} takes effect only before jax starts its backends, and in "
                          f"this process they had already started; set it in a fresh process, or leave it null.")
    if not hasattr(os, "sched_setaffinity"):
        raise ConfigError(f"arch.cpu_threads={cpu_threads} needs CPU affinity, which this platform does not offer; "
                          f"leave it null.")
    cores = sorted(os.sched_getaffinity(0))
    if cpu_threads > len(cores):
        raise ConfigError(f"arch.cpu_threads={cpu_threads} exceeds the {len(cores)} cores this process may run on; "
                          f"give 1 to {len(cores)}, or null for all of them.")
    import jax

    os.sched_setaffinity(0, cores[:cpu_threads])
    try:
        jax.devices()  # starts the backends: the CPU client sizes its pool from the cores allowed now
    finally:
        os.sched_setaffinity(0, cores)
        _release_all_but_the_pool(cores)
    _started_with.append(cpu_threads)


# XLA's name for the threads of the pool programs run on (tsl's "tf_" prefix on the pool's name)
POOL_THREAD_NAME = "tf_XLAEigen"


def _release_all_but_the_pool(cores: list) -> None:
    """The backend's other threads were started on the limited cores too, and so would be every thread they start:
    the compiler's among them (PPO's learner compiled in 5.5 s instead of 3.1-3.7 s with them held to one core).
    Only the pool stays where it was started."""
    task_dir = "/proc/self/task"
    if not os.path.isdir(task_dir):
        return
    for thread_id in os.listdir(task_dir):
        try:
            with open(os.path.join(task_dir, thread_id, "comm")) as comm:
                if comm.read().strip() != POOL_THREAD_NAME:
                    os.sched_setaffinity(int(thread_id), cores)
        except OSError:  # the thread ended meanwhile
            continue
