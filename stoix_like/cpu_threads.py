"""`arch.cpu_threads`: how many threads XLA's CPU backend runs a program on.

XLA sizes its CPU thread pool once, when jax starts its backends, from the cores the process may run on. A learner
on a few envs (PureJaxRL's PPO config: 4 CartPoles, 128-sample minibatches) is a chain of microsecond kernels. With
a second pool thread, XLA's executor hands ready kernels to it, and the program's state moves between the cores'
caches each time: on a 2-core AMD EPYC (Zen 4) our PPO woke the second thread ~3,000 times a second, used 1.3 cores
and ran at 143k-147k steps/s; with a pool of one thread it ran at 173k-180k (rejax's PPO, one thread either way:
157k-164k). A learner on many envs gains from the second thread instead: with 256 or 2,048 CartPoles, 2 threads
learned 1.3-1.45x faster than 1. Hence null (every core) by default, and 1 for small CPU runs.

The backend starts here with the process limited to its first `cpu_threads` cores, then the limit is lifted for every
thread but the pool's: the Python thread, the backend's other threads (the compiler's) and what they start later may
run anywhere.
"""

from __future__ import annotations

import os
from typing import Optional

from stoix_like.errors import ConfigError

# the pool size this module started the backend with, if it did: a second run in the same process (a sweep, a
# notebook) may ask for the same size again, and nothing else
_started_with: list = []


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
