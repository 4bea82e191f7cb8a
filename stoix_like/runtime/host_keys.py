"""jax's PRNG keys made and split on the host: the very bits of `jax.random.PRNGKey` and `jax.random.split`, with no
XLA program.

A run's setup derives a handful of keys before anything is compiled (a seed's setup and evaluation keys, each
system's network, env and step keys). Eagerly, each `jax.random.split` of a new count compiles a program, and
unpacking its result compiles another (`unstack`): ~0.1-0.2 s apiece on 2 cores, ~0.6 s of a PPO run's start, the
same for every system. Here the split is jax's own Threefry hash (threefry_lowering.threefry2x32) evaluated in
numpy. Where jax is set to another PRNG (`jax_default_prng_impl`) or to its older, non-partitionable split, these
functions defer to jax. tests/test_start_up.py checks the bits against jax's.
"""

from __future__ import annotations

from typing import Any, Union

import jax
import numpy as np

from stoix_like.runtime.threefry_lowering import threefry2x32_on_host

# a key as jax.random makes it, or its raw uint32 bits as numpy (what these functions give where jax's defaults
# hold). Results stay untyped: callers use one as either, and the numpy form goes wherever jax takes a key.
Key = Union[jax.Array, np.ndarray]

_INT32_RANGE = (-(2 ** 31), 2 ** 31)


def _jax_default_threefry() -> bool:
    """jax's defaults: raw uint32[2] Threefry keys, split by hashing (0, i) for i < num (`jax_threefry_partitionable`)."""
    # getattr: jax declares these flags at run time, so a type checker does not see them on jax.config
    return (getattr(jax.config, "jax_default_prng_impl") == "threefry2x32"
            and bool(getattr(jax.config, "jax_threefry_partitionable")))


def seed_key(seed: int) -> Any:
    """`jax.random.PRNGKey(seed)`: uint32 [high word, low word] of the seed. A 32-bit seed's high word is 0."""
    if not (_jax_default_threefry() and _INT32_RANGE[0] <= int(seed) < _INT32_RANGE[1]):
        return jax.random.PRNGKey(seed)
    return np.array([0, int(seed) & 0xFFFFFFFF], np.uint32)


def split(key: Key, num: int = 2) -> Any:
    """`jax.random.split(key, num)` of a raw uint32[2] key: `num` keys, shape (num, 2), as numpy. Unpacking them
    (`a, b = split(key)`) runs nothing either."""
    if not _jax_default_threefry() or jax.dtypes.issubdtype(getattr(key, "dtype", np.uint32), jax.dtypes.prng_key):
        return jax.random.split(key, num)
    key = np.asarray(key, np.uint32)
    if key.shape != (2,):
        raise ValueError(f"host_keys.split takes one raw key of shape (2,), got shape {key.shape}")
    counts_high, counts_low = np.zeros(num, np.uint32), np.arange(num, dtype=np.uint32)
    bits_high, bits_low = threefry2x32_on_host(np.full(num, key[0], np.uint32), np.full(num, key[1], np.uint32),
                                               counts_high, counts_low)
    return np.stack([bits_high, bits_low], axis=-1)


def fold_in(key: Key, data: int) -> Any:
    """`jax.random.fold_in(key, data)` of a raw uint32[2] key and a 32-bit integer, as numpy: the hash of the counts
    (0, data), jax's seed of a 32-bit integer."""
    if not _jax_default_threefry() or jax.dtypes.issubdtype(getattr(key, "dtype", np.uint32), jax.dtypes.prng_key):
        return jax.random.fold_in(key, data)
    key = np.asarray(key, np.uint32)
    if key.shape != (2,) or not 0 <= int(data) < 2 ** 32:
        raise ValueError(f"host_keys.fold_in takes one raw key of shape (2,) and 32-bit data, got shape {key.shape} "
                         f"and {data}")
    bits_high, bits_low = threefry2x32_on_host(key[:1], key[1:], np.zeros(1, np.uint32),
                                               np.array([int(data) & 0xFFFFFFFF], np.uint32))
    return np.concatenate([bits_high, bits_low])
