"""`arch.cpu_threads` sizes XLA's CPU thread pool when the backend starts, and refuses what cannot take effect."""

import os
import subprocess
import sys
import textwrap

import pytest

from stoix_like.runtime.cpu_threads import start_backend_with_cpu_threads
from stoix_like.errors import ConfigError

from conftest import REPO_ROOT

# run in a fresh interpreter: the backend sizes its pool once per process, and this test process's has started
POOL_AND_HELD_THREADS = textwrap.dedent("""
    import glob, os, sys
    from stoix_like.runtime.cpu_threads import start_backend_with_cpu_threads
    cores = len(os.sched_getaffinity(0))
    start_backend_with_cpu_threads({threads})
    start_backend_with_cpu_threads({threads})  # a second run in the same process may ask for the same size
    import jax
    jax.devices()  # null leaves the start to jax, which is then sized as it would be anyway
    jax.jit(lambda x: x + 1)(1).block_until_ready()  # the compiler's threads start now
    names = {{int(path.split("/")[-2]): open(path).read().strip() for path in glob.glob("/proc/self/task/*/comm")}}
    pool = sum(name == "tf_XLAEigen" for name in names.values())
    # every other thread (the Python thread, the backend's own, the compiler's) may run on every core again
    held = sum(len(os.sched_getaffinity(thread)) != cores for thread, name in names.items() if name != "tf_XLAEigen")
    print(pool, held, cores)
""")


def _pool_held_threads_and_cores(threads):
    result = subprocess.run([sys.executable, "-c", POOL_AND_HELD_THREADS.format(threads=threads)], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert result.returncode == 0, result.stderr
    return [int(field) for field in result.stdout.split()]


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or not os.path.isdir("/proc/self/task"),
                    reason="needs Linux CPU affinity")
def test_one_thread_gives_a_pool_of_one_and_gives_the_cores_back():
    pool, held, cores = _pool_held_threads_and_cores(1)
    assert pool == 1
    assert held == 0
    if cores > 1:  # every core by default: the setting is what made the pool smaller
        default_pool, _, _ = _pool_held_threads_and_cores(None)
        assert default_pool == cores


def test_more_threads_than_cores_is_refused_in_one_line():
    too_many = len(os.sched_getaffinity(0)) + 1 if hasattr(os, "sched_getaffinity") else 10_000
    with pytest.raises(ConfigError, match=r"arch.cpu_threads=\d+ (exceeds|needs)"):
        _in_a_process_whose_backend_has_not_started(too_many)


def test_a_size_that_can_no_longer_take_effect_is_refused():
    import jax

    jax.devices()  # this test process's backend has started
    with pytest.raises(ConfigError, match="before jax starts its backends"):
        start_backend_with_cpu_threads(1)
    start_backend_with_cpu_threads(None)  # null asks for nothing, so it is never refused


def _in_a_process_whose_backend_has_not_started(threads):
    from jax._src import xla_bridge

    initialized = xla_bridge.backends_are_initialized
    xla_bridge.backends_are_initialized = lambda: False  # the range is checked before anything starts
    try:
        start_backend_with_cpu_threads(threads)
    finally:
        xla_bridge.backends_are_initialized = initialized


# null chooses per run: one thread for a small run on the CPU alone, jax's own pool otherwise
POOL_FOR_RUN = textwrap.dedent("""
    import glob
    from stoix_like.runtime.cpu_threads import start_backend_for_run
    start_backend_for_run({arch})
    import jax
    jax.jit(lambda x: x + 1)(1).block_until_ready()
    print(sum(open(path).read().strip() == "tf_XLAEigen" for path in glob.glob("/proc/self/task/*/comm")))
""")


def _pool_for_run(arch, **env):
    result = subprocess.run([sys.executable, "-c", POOL_FOR_RUN.format(arch=repr(arch))], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "JAX_PLATFORMS": "cpu", **env})
    assert result.returncode == 0, result.stderr
    return int(result.stdout.split()[-1])


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs Linux CPU affinity and two cores")
def test_null_gives_a_small_cpu_run_one_thread_and_a_large_one_every_core():
    cores = len(os.sched_getaffinity(0))
    assert _pool_for_run({"total_num_envs": 4, "num_seeds": 4, "cpu_threads": None}) == 1
    assert _pool_for_run({"total_num_envs": 4, "num_seeds": 8, "cpu_threads": None}) == cores  # 32 envs
    assert _pool_for_run({"total_num_envs": 4, "cpu_threads": 2}) == 2  # a size given is kept, small run or not


@pytest.mark.parametrize("arch, env, small", [
    ({"total_num_envs": 16}, {}, True),
    ({"total_num_envs": 16, "num_seeds": 2}, {}, False),
    ({"total_num_envs": 16, "num_seeds": 8, "seed_loop": "map"}, {}, True),  # seeds in sequence: one seed's ops
    ({"total_num_envs": 16, "num_seeds": 8, "seed_loop": "map_on_cpu"}, {}, True),
    ({"total_num_envs": 4, "num_processes": 2, "coordinator_address": "127.0.0.1:1234"}, {}, False),
    ({"total_num_envs": 4}, {"XLA_FLAGS": "--xla_force_host_platform_device_count=2"}, False),
    ({"total_num_envs": 4}, {"JAX_PLATFORMS": "cuda,cpu"}, False),
])
def test_what_counts_as_a_small_cpu_run(arch, env, small):
    code = ("from stoix_like.runtime.cpu_threads import is_small_cpu_run; "
            f"print(is_small_cpu_run({arch!r}))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True,
                            timeout=120, env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "JAX_PLATFORMS": "cpu",
                                              "XLA_FLAGS": "", **env})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-1] == str(small)


def test_a_choice_null_made_is_never_refused():
    import jax

    from stoix_like.runtime.cpu_threads import start_backend_for_run

    jax.devices()  # this test process's backend has started with the pool it has
    start_backend_for_run({"total_num_envs": 4, "cpu_threads": None})  # would have been 1 thread: left as it is


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs two cores")
def test_a_larger_run_after_a_small_one_in_the_same_process_is_told_its_pool_is_small(monkeypatch):
    from stoix_like.runtime import cpu_threads

    monkeypatch.setattr(cpu_threads, "_started_with", [1])  # as a sweep's first, small job leaves it
    with pytest.warns(UserWarning, match="sized by an earlier run in this process"):
        cpu_threads.start_backend_for_run({"total_num_envs": 256, "cpu_threads": None})
