"""A uniformly random permutation drawn with sorts of single uint32 arrays, for shuffling minibatches.

`jax.random.permutation(key, n)` sorts (random key, value) pairs: a sort of two arrays, which XLA runs with a
comparator it calls per comparison. A sort of one uint32 array takes a specialised path instead: on our 2-core CPU
it sorted 2,048 values 4.4× faster (92 µs against 408 µs). So each round here sorts one uint32 array whose high
bits are random and whose low bits are the position: the sorted values' low bits are the new order, and equal
random parts keep their positions' order, as jax's own sort does with equal keys.

Each round has fewer random bits than jax's 32, and more rounds make up for it by jax's own rule for its round
count (2^(random bits × rounds) ≥ n³): 2 rounds for n up to 2,048. On the same CPU the whole permutation was 2.4-4×
faster than jax's for n from 128 to 1,048,576 (2,048: 193 µs against 793 µs). Learning throughput, against the same
learner with jax's permutation (in-process A/Bs, median of 5-7 rounds): PQN on rejax's CartPole config, which
shuffles 2,048 steps in each of 4 epochs, 1.23×; PPO on PureJaxRL's (512 steps), 1.05×.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

# Past 2^20 items a round keeps 12 random bits or fewer; jax's permutation serves those sizes.
MAX_INDEX_BITS = 20
# jax.random's rule for its shuffle's rounds: the random bits over all rounds cover n^3
_COVERAGE_EXPONENT = 3


def rounds_for(num_items: int) -> int:
    """The sort rounds `uniform_permutation` makes for `num_items` (≤ 2^MAX_INDEX_BITS) items."""
    index_bits = max(1, (num_items - 1).bit_length())
    return max(1, math.ceil(_COVERAGE_EXPONENT * math.log2(max(num_items, 2)) / (32 - index_bits)))


def uniform_permutation(key: jax.Array, num_items: int) -> jax.Array:
    """A random permutation of `range(num_items)` (int32), as uniform as `jax.random.permutation`'s."""
    if num_items <= 1:
        return jnp.arange(num_items, dtype=jnp.int32)
    index_bits = (num_items - 1).bit_length()
    if index_bits > MAX_INDEX_BITS:
        return jax.random.permutation(key, num_items).astype(jnp.int32)
    index_mask = jnp.uint32((1 << index_bits) - 1)
    position = lax.iota(jnp.uint32, num_items)
    random_high_bits = jax.random.bits(key, (rounds_for(num_items), num_items), jnp.uint32) & ~index_mask

    def sorted_order(round_bits: jax.Array) -> jax.Array:
        return (lax.sort(round_bits | position) & index_mask).astype(jnp.int32)

    permutation = sorted_order(random_high_bits[0])  # the first round permutes range(num_items) itself
    for round_bits in random_high_bits[1:]:
        permutation = permutation[sorted_order(round_bits)]
    return permutation
