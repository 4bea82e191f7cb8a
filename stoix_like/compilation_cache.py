"""Compile each distinct program once per process, even when it is built afresh.

Setting up a population of N seeds calls each system's `learner_setup` N times, and every call jits its own
network init, env reset and warm-up rollout: new Python functions, hence N compilations of identical programs
(seconds each on a CPU). JAX's persistent compilation cache keys executables by their program text, so with it
seeds 2..N, and later runs of the same program in this process (a Hydra sweep, a test session), load the
executable instead. A cached executable is the very code compiled the first time: results are bit-identical.

Tracing and lowering a program again costs as much as loading it, so what is set up per seed is also jitted
once per process: `jit_once` keeps one jitted function per key (a network init per network configuration), and
jax's own cache then serves every later call of the same shapes without tracing.

A cache the user configured (`JAX_COMPILATION_CACHE_DIR` or `jax.config`) is used as it is, for every program.
Otherwise the cache is a private temporary directory of this process, removed when it exits, so no state outlives
the run, and it is on only while a run sets up (`setup_programs_cached`): the learner and the evaluators are
compiled afresh. They are compiled once per run anyway, and loading a large CPU executable back
(`deserialize_executable`) crashed a test process once with a segmentation fault (jax 0.10.2, a CI run in which a
second DQN population in one process loaded the first one's learner).
"""

from __future__ import annotations

import atexit
import contextlib
import shutil
import tempfile
from typing import Any, Callable, Dict, Hashable, Iterator

import jax
from jax._src import compilation_cache as jax_compilation_cache  # reset_cache: no public equivalent in jax 0.10

_private_directory: str | None = None
_jitted_by_key: Dict[Hashable, Callable] = {}


@contextlib.contextmanager
def setup_programs_cached() -> Iterator[None]:
    """Within: a process-private persistent compilation cache is on (unless the user configured one, which is
    always on). Setting up N seeds compiles each setup program once and loads it N - 1 times."""
    global _private_directory
    # jax declares its options at run time, so the type checker cannot see this attribute
    if _private_directory is None and jax.config.jax_compilation_cache_dir:  # type: ignore[attr-defined]
        yield  # the user's cache, on for everything
        return
    if _private_directory is None:
        _private_directory = tempfile.mkdtemp(prefix="stoix_like_xla_cache_")
        atexit.register(shutil.rmtree, _private_directory, ignore_errors=True)
        jax.config.update("jax_compilation_cache_dir", _private_directory)
        # small programs (an init, a reset) are exactly the ones compiled again per seed: cache them all
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    _use_private_cache(True)
    try:
        yield
    finally:
        _use_private_cache(False)


def _use_private_cache(enabled: bool) -> None:
    jax.config.update("jax_enable_compilation_cache", enabled)
    # jax decides whether a cache is in use at its first compilation and remembers it: forget the decision
    jax_compilation_cache.reset_cache()


def jit_once(key: Hashable, fn: Callable) -> Callable:
    """`jax.jit(fn)` the first time `key` is seen in this process, and that same jitted function ever after.

    `key` must name everything `fn` computes with besides its arguments: two functions under one key must be
    the same program. A fresh `jax.jit` per call would trace and lower its program again on every call.
    """
    if key not in _jitted_by_key:
        _jitted_by_key[key] = jax.jit(fn)
    return _jitted_by_key[key]


def jitted_init(module: Any) -> Callable:
    """`module.init`, jitted once per process for every flax module of this configuration.

    Flax modules with list fields cannot be hashed, so the module's repr (its type and every field, nested
    modules included) is the key; the input shapes are jit's own cache key.
    """
    return jit_once(("init", repr(module)), module.init)
