"""Hand-worked checks of the masking and action-selection primitives (stoix_like.ops.masking, ops.indexing)."""

import jax
import jax.numpy as jnp
import numpy as np

from stoix_like.learner.exploration import epsilon_greedy
from stoix_like.networks.distributions import MaskedCategorical
from stoix_like.ops.indexing import taken_action_values
from stoix_like.ops.masking import ILLEGAL_ACTION_VALUE, mask_illegal, masked_argmax, masked_max

Q_VALUES = jnp.array([[1.0, 5.0, 3.0], [1.0, 5.0, 3.0], [1.0, 5.0, 3.0]])
ACTION_MASK = jnp.array([[True, True, True], [True, False, True], [False, False, False]])


def test_masked_max_ignores_illegal_actions_and_gives_a_dead_end_zero():
    # no legal action (a terminal state in some suites): 0, so that discount 0 × value stays 0
    np.testing.assert_array_equal(masked_max(Q_VALUES, ACTION_MASK), [5.0, 3.0, 0.0])


def test_masked_max_of_values_below_the_fill_is_still_the_legal_max():
    # a legal value is never confused with the fill as long as it is above it
    values = jnp.array([[-5e8, 7.0]])
    np.testing.assert_array_equal(masked_max(values, jnp.array([[True, False]])), [-5e8])


def test_masked_argmax_picks_the_best_legal_action():
    np.testing.assert_array_equal(masked_argmax(Q_VALUES[:2], ACTION_MASK[:2]), [1, 2])
    assert masked_argmax(Q_VALUES, ACTION_MASK).dtype == jnp.int32


def test_mask_illegal_fills_only_illegal_entries_with_the_one_fill_value():
    np.testing.assert_array_equal(mask_illegal(Q_VALUES[1], ACTION_MASK[1]), [1.0, ILLEGAL_ACTION_VALUE, 3.0])


def test_every_masked_consumer_agrees_on_the_greedy_legal_action():
    # acting greedily (ε = 0) and a masked policy's mode pick the masked argmax
    mask = ACTION_MASK[:2]
    greedy = epsilon_greedy(jax.random.PRNGKey(0), Q_VALUES[:2], mask, 0.0)
    np.testing.assert_array_equal(greedy, [1, 2])
    np.testing.assert_array_equal(MaskedCategorical(Q_VALUES[:2], mask).mode(), [1, 2])
    # an illegal action has probability 0, and the entropy stays finite
    distribution = MaskedCategorical(Q_VALUES[:2], mask)
    assert float(jnp.exp(distribution.log_prob(jnp.array([1, 1])))[1]) == 0.0
    assert np.all(np.isfinite(distribution.entropy()))


def test_taken_action_values_selects_per_row_with_trailing_axes():
    values = jnp.arange(12.0).reshape(2, 3, 2)  # [B=2, A=3, atoms=2]
    np.testing.assert_array_equal(taken_action_values(values, jnp.array([2, 0])), [[4.0, 5.0], [6.0, 7.0]])
    np.testing.assert_array_equal(taken_action_values(Q_VALUES[:2], jnp.array([0, 1])), [1.0, 5.0])
