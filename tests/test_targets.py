"""The one target-network rule (docs/glossary.md): every `target_update_period` steps the target moves by
`target ← tau·online + (1 − tau)·target`; tau = 1 is a hard copy, period 1 Polyak averaging at every step."""

import jax.numpy as jnp
import numpy as np
import pytest

from stoix_like.learner import target_networks

ONLINE, TARGET = {"w": jnp.array([4.0, 8.0])}, {"w": jnp.array([0.0, 0.0])}


@pytest.mark.parametrize("step, expected", [(1, [0.0, 0.0]), (2, [1.0, 2.0]), (3, [0.0, 0.0]), (4, [1.0, 2.0])])
def test_polyak_moves_only_every_period(step, expected):
    moved = target_networks.update_target(ONLINE, TARGET, jnp.asarray(step), tau=0.25, period=2)
    np.testing.assert_allclose(moved["w"], expected)


@pytest.mark.parametrize("step, expected", [(63, [0.0, 0.0]), (64, [4.0, 8.0])])
def test_tau_one_is_a_hard_copy_at_the_period(step, expected):
    moved = target_networks.update_target(ONLINE, TARGET, jnp.asarray(step), tau=1.0, period=64)
    np.testing.assert_array_equal(moved["w"], expected)


def test_period_one_moves_at_every_step():
    moved = target_networks.update_target(ONLINE, TARGET, jnp.asarray(7), tau=0.5, period=1)
    np.testing.assert_allclose(moved["w"], [2.0, 4.0])
