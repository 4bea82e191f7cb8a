"""Threefry-2x32 lowered as straight-line code on CPU while our programs compile: the same bits, fewer XLA ops.

jax lowers its default PRNG's hash (`threefry2x32_p`) on CPU as a 5-iteration while loop. On CPU a small-network
learner's time goes to per-op overhead, and that loop is among the costliest things it runs: every iteration copies
the loop state (16 XLA ops per iteration, 13 of them copies), so one random call costs ~80 executed ops, and a PQN
env step on CartPole makes 8 of them (~640 of its ~770 ops). Written out, the 20 rounds are elementwise integer
arithmetic that XLA fuses into a few kernels, and compiles sooner than the loop.

The bits are the same (integer adds, rotations and xors: there is nothing to reorder); tests/test_threefry_lowering.py
checks them. Learning is bit-identical wherever XLA fuses the floating-point ops around a hash as it did before,
as it does for every CartPole learner we measured (PPO, PQN, DQN, SAC, C51, recurrent PPO, MuZero); where a hash
fuses into a floating-point consumer the kernel may round differently (PPO on brax ant learns with other low bits).

The rule applies only to what a thread lowers while `unrolled_threefry()` is active in that thread
(parallel.compile_learner, the evaluators, compilation_cache.jit_setup_program), not to the whole process: other jax
code keeps jax's own choice. Lowering happens once per program, at `.lower()`; the compiled program keeps what it was
lowered with, and jax reuses a function's cached lowering, so a function already lowered outside a block keeps jax's
loop (compile_learner lowers a fresh pmap of each learner).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Callable, Iterator, List, Protocol, Sequence, Tuple, TypeVar

import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.core import ShapedArray
from jax.extend.random import threefry2x32_p
# the StableHLO op builders and the lowering helpers that broadcast: jax's public `mlir` module re-exports neither
from jax._src.interpreters import mlir as mlir_helpers
from jax._src.lib.mlir.dialects import hlo
from jax.interpreters import mlir

_PLATFORM = "cpu"
# Threefry-2x32's rotation constants (Salmon et al., 2011), alternating every 4 rounds, and its key-schedule parity
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_KEY_PARITY = np.uint32(0x1BD11BDA)


def _rotate_left(value: jnp.ndarray, distance: int) -> jnp.ndarray:
    return lax.shift_left(value, np.uint32(distance)) | lax.shift_right_logical(value, np.uint32(32 - distance))


def _rotate_left_on_host(value: np.ndarray, distance: int) -> np.ndarray:
    return (value << np.uint32(distance)) | (value >> np.uint32(32 - distance))  # logical: value is unsigned


class _Uint32Words(Protocol):
    """What `threefry2x32` hashes with: uint32 jax arrays, numpy arrays or `_Emitted` values, one kind throughout."""

    def __add__(self: _Words, other: _Words | np.uint32, /) -> _Words: ...

    def __xor__(self: _Words, other: _Words | np.uint32, /) -> _Words: ...


_Words = TypeVar("_Words", bound=_Uint32Words)
RotateLeft = Callable[[_Words, int], _Words]


def threefry2x32(key1: _Words, key2: _Words, x1: _Words, x2: _Words,
                 rotate_left: RotateLeft[_Words] = _rotate_left,  # type: ignore[assignment]  # for jax arrays
                 ) -> Tuple[_Words, _Words]:
    """The 20-round hash of counts (x1, x2) under key (key1, key2), all uint32 arrays of one shape: jax arrays
    while lowering, or numpy arrays with `rotate_left=_rotate_left_on_host` (host_keys.py)."""
    keys: Sequence[_Words] = (key1, key2, key1 ^ key2 ^ _KEY_PARITY)
    x: List[_Words] = [x1 + keys[0], x2 + keys[1]]
    for block in range(5):  # 5 blocks of 4 rounds, each followed by a key injection
        for distance in _ROTATIONS[block % 2]:
            x[0] = x[0] + x[1]
            x[1] = x[0] ^ rotate_left(x[1], distance)
        x = [x[0] + keys[(block + 1) % 3], x[1] + keys[(block + 2) % 3] + np.uint32(block + 1)]
    return x[0], x[1]


def threefry2x32_on_host(key1: np.ndarray, key2: np.ndarray, x1: np.ndarray, x2: np.ndarray
                         ) -> Tuple[np.ndarray, np.ndarray]:
    """`threefry2x32` in numpy: no XLA program. Arrays, not numpy scalars, which would warn on the wrap-around
    that the hash relies on."""
    return threefry2x32(key1, key2, x1, x2, rotate_left=_rotate_left_on_host)


class _Emitted:
    """A uint32 value of the program being lowered, whose operators emit StableHLO ops: `threefry2x32` run on these
    writes the hash into the program directly, the same ops in the same order. `mlir.lower_fun` traced the same code
    into a jaxpr first: ~25 ms per hash, 0.24 s of PPO's setup programs' lowering (9 hashes), against ~8 ms now."""

    def __init__(self, ctx: mlir.LoweringRuleContext, value: mlir.ir.Value, aval: ShapedArray):
        self.ctx, self.value, self.aval = ctx, value, aval

    def _combine(self, other: "_Emitted | np.uint32", op: Callable[[mlir.ir.Value, mlir.ir.Value], mlir.ir.Value]
                 ) -> "_Emitted":
        if not isinstance(other, _Emitted):  # a numpy constant, as wide as this operand
            other = _Emitted(self.ctx, mlir_helpers.full_like_aval(self.ctx, other, self.aval), self.aval)
        shape = np.broadcast_shapes(self.aval.shape, other.aval.shape)  # numpy's rule, as jnp's operators follow
        aval = next((x.aval for x in (self, other) if x.aval.shape == shape), None) or self.aval.update(shape=shape)
        return _Emitted(self.ctx, op(self._broadcast_to(aval), other._broadcast_to(aval)), aval)

    def _broadcast_to(self, aval: ShapedArray) -> mlir.ir.Value:
        if self.aval.shape == aval.shape:
            return self.value
        rank, own_rank = len(aval.shape), len(self.aval.shape)
        return mlir_helpers.broadcast_in_dim(self.ctx, self.value, aval, broadcast_dimensions=range(rank - own_rank, rank))

    def __add__(self, other: "_Emitted | np.uint32") -> "_Emitted":
        return self._combine(other, hlo.add)

    def __xor__(self, other: "_Emitted | np.uint32") -> "_Emitted":
        return self._combine(other, hlo.xor)

    def __or__(self, other: "_Emitted | np.uint32") -> "_Emitted":
        return self._combine(other, hlo.or_)


def _rotate_left_emitted(value: _Emitted, distance: int) -> _Emitted:
    return (value._combine(np.uint32(distance), hlo.shift_left)
            | value._combine(np.uint32(32 - distance), hlo.shift_right_logical))


def _unrolled_rule(ctx: mlir.LoweringRuleContext, *args: mlir.ir.Value) -> Sequence[mlir.ir.Value]:
    """`threefry2x32_p` lowered as the straight-line hash: the ops `threefry2x32` makes, written out."""
    key1, key2, x1, x2 = (_Emitted(ctx, arg, aval)  # type: ignore[arg-type]  # a uint32 array's aval: a ShapedArray
                          for arg, aval in zip(args, ctx.avals_in, strict=True))
    hashed = threefry2x32(key1, key2, x1, x2, rotate_left=_rotate_left_emitted)
    return [x._broadcast_to(aval) for x, aval in zip(hashed, ctx.avals_out, strict=True)]


# Every hash is written out, whatever its size. Until 2026-11-27 learners unrolled only hashes of at most 2 counts
# (a key split in two): larger ones, then lowered by tracing jnp code, were slower in A/Bs (PPO 0.65-0.76x). Emitted
# as StableHLO (`_Emitted`) and measured again in-process, every hash written out is the faster choice on 2 cores:
# PPO (PureJaxRL's config) 1.033x, PQN 1.035x, DQN 1.08x, SAC 1.07x, C51 1.08x, recurrent PPO 1.03x, MuZero 1.02x
# (noisy), and each learner compiles ~0.3-0.4 s sooner (PPO, PQN and DQN, measured in separate processes).

# How many `unrolled_threefry` blocks this thread is inside. Swapping one process-wide rule in and out, as this module
# once did, let a program lowered on another thread meanwhile take the block's rule, and two overlapping blocks on two
# threads restored in the wrong order and left one block's rule installed for the rest of the process.
_depth = threading.local()
_install_lock = threading.Lock()
_installed = False


def _inside_a_block() -> bool:
    return getattr(_depth, "blocks", 0) > 0


def _install_dispatching_rule() -> None:
    """Once per process: a CPU rule that is the straight-line hash inside an `unrolled_threefry` block of the
    lowering thread, and jax's own rule outside. jax keeps its per-platform rules in a dict that has no public
    reader."""
    global _installed
    with _install_lock:
        if _installed:
            return
        jax_rule = mlir._platform_specific_lowerings[_PLATFORM].get(threefry2x32_p) or mlir._lowerings[threefry2x32_p]

        def rule(ctx: mlir.LoweringRuleContext, *args: mlir.ir.Value
                 ) -> Sequence[mlir.ir.Value | Sequence[mlir.ir.Value]]:
            return _unrolled_rule(ctx, *args) if _inside_a_block() else jax_rule.rule(ctx, *args)

        mlir.register_lowering(threefry2x32_p, rule, platform=_PLATFORM)
        _installed = True


@contextlib.contextmanager
def unrolled_threefry() -> Iterator[None]:
    """Programs this thread lowers inside lower `threefry2x32_p` on CPU as straight-line code (other platforms
    unchanged): learners and evaluators, which run it millions of times, and setup programs, which run once and
    compile sooner with it (a 64×64 normal draw in ~0.15 s instead of ~0.5 s: compilation_cache.jit_setup_program)."""
    _install_dispatching_rule()
    _depth.blocks = getattr(_depth, "blocks", 0) + 1
    try:
        yield
    finally:
        _depth.blocks -= 1
