"""Compile each distinct program once per process, even when it is built afresh.

Setting up a population of N seeds calls each system's `learner_setup` N times, and every call jits its own
network init, env reset and warm-up rollout: new Python functions, hence N compilations of identical programs
(seconds each on a CPU). JAX's persistent compilation cache keys executables by their program text, so with it
seeds 2..N, and later runs of the same program in this process (a Hydra sweep, a test session), load the
executable instead. A cached executable is the very code compiled the first time: results are bit-identical.

Tracing and lowering a program again costs as much as loading it, so what is set up per seed is also jitted
once per process: `jit_once` keeps one jitted function per key (a network init per network configuration), and
jax's own cache then serves every later call of the same shapes without tracing.

Between runs: a command-line run (`python -m experiments.<algo>`) keeps every compiled program in a cache
directory of the user's (`use_user_cache`, on by default, `arch.compilation_cache=False` turns it off), so the
second run of a configuration loads its learner, evaluators and setup programs instead of compiling them. The
directory is `$STOIX_LIKE_CACHE_DIR`, else `$XDG_CACHE_HOME/stoix_like/xla`, else `~/.cache/stoix_like/xla`,
bounded to USER_CACHE_MAX_BYTES (jax evicts the least recently used programs).

A cache the user configured (`JAX_COMPILATION_CACHE_DIR` or `jax.config`) is used as it is, for every program.
Otherwise, in a run started in code (`experiment.train`, as the tests do), the cache is a private temporary
directory of this process, removed when it exits, so no state outlives the run, and it is on only while a run sets
up (`setup_programs_cached`; `arch.compilation_cache=False` leaves it off too): the learner and the evaluators are
compiled afresh. They are compiled once per run
anyway, and loading a large CPU executable back into the process that compiled it (`deserialize_executable`)
crashed a test process once with a segmentation fault (jax 0.10.2, a CI run in which a second DQN population in
one process loaded the first one's learner), and writing a setup program crashed one once more (stop 27's CI check,
a pytest worker's dozenth training): the tests run in-process trainings with the switch off. A command-line run
loads programs a previous process wrote.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import pathlib
import shutil
import tempfile
from typing import Any, Callable, Dict, Hashable, Iterator, Optional, ParamSpec, Protocol, Tuple, TypeVar

import jax
from jax._src import compilation_cache as jax_compilation_cache  # reset_cache: no public equivalent in jax 0.10

from stoix_like.runtime.threefry_lowering import unrolled_threefry
from stoix_like.types import Params, PyTree

_private_directory: str | None = None
_jitted_by_key: Dict[Hashable, Callable] = {}

P = ParamSpec("P")  # a program's arguments
R = TypeVar("R")  # and what it returns: jitting changes neither


class FlaxModule(Protocol):
    """What `jitted_inits` needs of a flax module (flax.linen.Module has it)."""

    def init(self, rngs: jax.Array, /, *args: PyTree) -> Params: ...

# The user cache's bound: PPO's CartPole run writes ~2 MB, a brax learner tens of MB, so this holds hundreds of
# configurations before the least recently used ones go.
USER_CACHE_MAX_BYTES = 2 * 1024**3


def user_cache_directory() -> pathlib.Path:
    """Where command-line runs keep compiled programs: `$STOIX_LIKE_CACHE_DIR`, else the XDG cache directory's
    `stoix_like/xla`."""
    if os.environ.get("STOIX_LIKE_CACHE_DIR"):
        return pathlib.Path(os.environ["STOIX_LIKE_CACHE_DIR"]).expanduser()
    xdg_cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(xdg_cache) / "stoix_like" / "xla"


def use_user_cache(enabled: bool) -> Optional[str]:
    """For a command-line run, before anything compiles: keep compiled programs between runs. Returns the
    directory in use (the user's own if they configured one, whatever `enabled` says), or None when off.

    Every program is cached, however fast it compiled: a run's many small programs (inits, resets, the
    evaluators' pieces) add up to seconds on a CPU, and loading one is cheaper than compiling it.
    """
    configured = jax.config.jax_compilation_cache_dir  # type: ignore[attr-defined]
    if configured:
        return str(configured)
    if not enabled:
        return None
    directory = user_cache_directory()
    directory.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(directory))
    jax.config.update("jax_compilation_cache_max_size", USER_CACHE_MAX_BYTES)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    return str(directory)


@contextlib.contextmanager
def setup_programs_cached(enabled: bool = True) -> Iterator[None]:
    """Within: a process-private persistent compilation cache is on (unless the user configured one, which is
    always on). Setting up N seeds compiles each setup program once and loads it N - 1 times. `enabled=False`
    (`arch.compilation_cache=False`) leaves it off: every seed compiles its own setup programs."""
    global _private_directory
    # jax declares its options at run time, so the type checker cannot see this attribute
    if not enabled or (_private_directory is None and jax.config.jax_compilation_cache_dir):  # type: ignore[attr-defined]
        yield  # off, or the user's cache, on for everything
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


# Setup programs (network inits, env resets, initial states) run once per seed, so XLA's CPU backend need not spend
# LLVM's expensive optimisation passes on them: PPO's CartPole setup compiled in ~40% less time without them, with
# bit-identical initial states (tests/test_start_up.py). The learner and the evaluators, which run
# millions of steps, are compiled fully.
SETUP_COMPILER_OPTIONS = {"xla_llvm_disable_expensive_passes": True}


def jit_setup_program(fn: Callable[P, R], **jit_kwargs: Any) -> Callable[P, R]:
    """`jax.jit` for a program that runs once per seed at setup (see SETUP_COMPILER_OPTIONS), its random bits
    hashed by straight-line Threefry code: the same bits, compiled in a third of the time of jax's loop on CPU
    (threefry_lowering.py). A program is lowered at its first call, so every call is made inside the switch."""
    jitted = jax.jit(fn, compiler_options=SETUP_COMPILER_OPTIONS, **jit_kwargs)

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        with unrolled_threefry():
            return jitted(*args, **kwargs)

    return run


def jit_once(key: Hashable, fn: Callable[P, R]) -> Callable[P, R]:
    """`jit_setup_program(fn)` the first time `key` is seen in this process, and that same jitted function ever
    after.

    `key` must name everything `fn` computes with besides its arguments: two functions under one key must be
    the same program. A fresh `jax.jit` per call would trace and lower its program again on every call.
    """
    if key not in _jitted_by_key:
        _jitted_by_key[key] = jit_setup_program(fn)
    return _jitted_by_key[key]


def jitted_init(module: FlaxModule) -> Callable:
    """`module.init`, jitted once per process for every flax module of this configuration (`jitted_inits` of
    one module)."""
    inits = jitted_inits(module)
    return lambda key, *inputs: inits((key,), *inputs)[0]


def jitted_inits(*modules: FlaxModule) -> Callable:
    """`(keys, *inputs, own_inputs=None) -> (modules[0].init(keys[0], *own_inputs[0], *inputs), ...)`: several
    modules' inits (an actor's and a critic's) as one program, compiled once per process. One compilation instead of
    one per module: ~0.7 s less per module on 2 cores, for the same numbers. `own_inputs`, one tuple per module,
    go before the shared inputs (each recurrent network's own initial hidden state).

    Flax modules with list fields cannot be hashed, so the modules' reprs (each one's type and every field, nested
    modules included) are the key; the input shapes are jit's own cache key.
    """

    def init(keys: Tuple[jax.Array, ...], *inputs: PyTree, own_inputs: Optional[Tuple[Tuple[PyTree, ...], ...]] = None
             ) -> Tuple[Params, ...]:
        own = ((),) * len(modules) if own_inputs is None else own_inputs
        return tuple(module.init(key, *module_inputs, *inputs)
                     for module, key, module_inputs in zip(modules, keys, own, strict=True))

    return jit_once(("inits",) + tuple(repr(module) for module in modules), init)
