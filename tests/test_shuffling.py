"""ops/shuffling.uniform_permutation: a permutation, uniform over all of them, with jax's rule for its rounds.

Every check draws from fixed keys: integer hashing and sorting give the same bits on every machine, so the
statistics below are the same numbers everywhere, not a matter of luck per run.
"""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest
from scipy import stats

from stoix_like.ops.shuffling import MAX_INDEX_BITS, rounds_for, uniform_permutation


@pytest.mark.parametrize("num_items", [1, 2, 3, 7, 128, 512, 2048, 3000, 2 ** MAX_INDEX_BITS + 1])
def test_is_a_permutation(num_items):
    permutation = np.asarray(uniform_permutation(jax.random.PRNGKey(num_items), num_items))
    assert permutation.dtype == np.int32 and permutation.shape == (num_items,)
    np.testing.assert_array_equal(np.sort(permutation), np.arange(num_items))


@pytest.mark.parametrize("num_items", [4, 2048, 2 ** MAX_INDEX_BITS])
def test_rounds_cover_n_cubed_like_jax_s_shuffle(num_items):
    """jax.random.permutation's rule, with the random bits a round keeps beside the position's."""
    index_bits = (num_items - 1).bit_length()
    rounds = rounds_for(num_items)
    assert (32 - index_bits) * rounds >= 3 * math.log2(num_items)
    assert (32 - index_bits) * (rounds - 1) < 3 * math.log2(num_items)  # and no more rounds than that


def test_every_permutation_of_five_is_equally_likely():
    num_samples, num_items = 60_000, 5
    draw = jax.jit(jax.vmap(lambda key: uniform_permutation(key, num_items)))
    samples = np.asarray(draw(jax.random.split(jax.random.PRNGKey(0), num_samples)))
    codes = samples @ (num_items ** np.arange(num_items))  # one integer per permutation
    counts = np.unique(codes, return_counts=True)[1]
    assert len(counts) == math.factorial(num_items)
    assert stats.chisquare(counts).pvalue > 1e-3, counts


def test_where_an_item_lands_is_uniform_at_2048_items():
    """Two rounds of 21 random bits each: the first and last items' positions, in 32 bins, over 8,000 draws."""
    num_samples, num_items, bins = 8_000, 2048, 32
    draw = jax.jit(jax.vmap(lambda key: uniform_permutation(key, num_items)))
    samples = np.asarray(draw(jax.random.split(jax.random.PRNGKey(1), num_samples)))
    assert rounds_for(num_items) == 2
    for item in (0, num_items - 1):
        position = np.argmax(samples == item, axis=1)
        counts = np.bincount(position * bins // num_items, minlength=bins)
        assert stats.chisquare(counts).pvalue > 1e-3, (item, counts)
    # neighbours: before the shuffle item i precedes i + 1; after it, either order is as likely
    inverse = np.argsort(samples, axis=1)
    first_before_second = np.mean(inverse[:, :-1] < inverse[:, 1:])
    assert abs(first_before_second - 0.5) < 0.01, first_before_second
