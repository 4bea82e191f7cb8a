"""Hand-worked checks of stoix_like.ops.value_support (MuZero's value transform and two-hot supports) and of
ops.losses.policy_distillation_loss (AlphaZero's policy loss).

Expected numbers are worked out in the comments, never by calling the function under test.
"""

import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stoix_like.ops import losses, value_support

EPS = value_support.VALUE_TRANSFORM_EPSILON


def f32(x):
    return jnp.asarray(x, dtype=jnp.float32)


def close(actual, expected, atol=1e-5, rtol=1e-5):
    np.testing.assert_allclose(np.asarray(actual), np.asarray(expected, dtype=np.float64), atol=atol, rtol=rtol)


# ----------------------------------------------------------------------------------------------------
# h(x) = sign(x)(sqrt(|x| + 1) - 1) + eps x, and its inverse
# ----------------------------------------------------------------------------------------------------


def test_value_transform_by_hand():
    # h(0) = 0; h(3) = sqrt(4) - 1 + 3 eps = 1 + 3 eps; h(-8) = -(sqrt(9) - 1) - 8 eps = -2 - 8 eps;
    # h(99) = sqrt(100) - 1 + 99 eps = 9 + 99 eps
    close(value_support.value_transform(f32([0.0, 3.0, -8.0, 99.0])),
          [0.0, 1.0 + 3 * EPS, -2.0 - 8 * EPS, 9.0 + 99 * EPS])


def test_value_transform_takes_its_epsilon():
    # with eps = 0.5: h(3) = 1 + 1.5 = 2.5
    close(value_support.value_transform(f32(3.0), epsilon=0.5), 2.5)


def test_inverse_value_transform_by_hand():
    # the images worked out above go back to where they came from
    close(value_support.inverse_value_transform(f32([0.0, 1.0 + 3 * EPS, -2.0 - 8 * EPS, 9.0 + 99 * EPS])),
          [0.0, 3.0, -8.0, 99.0], atol=1e-3, rtol=1e-4)
    # eps = 0.5, y = 2.5: t = (sqrt(1 + 4·0.5·(2.5 + 1 + 0.5)) - 1) / (2·0.5) = sqrt(9) - 1 = 2; x = t² - 1 = 3
    close(value_support.inverse_value_transform(f32(2.5), epsilon=0.5), 3.0)


def test_the_inverse_undoes_the_transform_over_many_scales():
    # in float32, near 0 as well: the implementation avoids the cancellation of the formula as written
    x = np.concatenate([-np.logspace(-3, 4, 50), [0.0], np.logspace(-3, 4, 50)])
    roundtrip = value_support.inverse_value_transform(value_support.value_transform(f32(x)))
    close(roundtrip, x, atol=1e-7, rtol=1e-5)


def test_the_transform_is_increasing_and_odd():
    x = jnp.linspace(-100.0, 100.0, 401)
    h = value_support.value_transform(x)
    assert bool(jnp.all(jnp.diff(h) > 0))
    close(h, -value_support.value_transform(-x))


def test_the_transform_keeps_shapes_and_refuses_integers():
    assert value_support.value_transform(jnp.zeros((3, 4, 5))).shape == (3, 4, 5)
    with pytest.raises(AssertionError):
        value_support.value_transform(jnp.arange(3))


# ----------------------------------------------------------------------------------------------------
# two-hot encoding on a support, and the expectation back
# ----------------------------------------------------------------------------------------------------

SUPPORT = f32([-1.0, 0.0, 1.0, 2.0])


@pytest.mark.parametrize("x, expected", [
    (0.25, [0.0, 0.75, 0.25, 0.0]),  # between atoms 0 and 1: (1 - 0.25) on 0, 0.25 on 1
    (-1.0, [1.0, 0.0, 0.0, 0.0]),  # the bottom atom itself
    (1.0, [0.0, 0.0, 1.0, 0.0]),  # an inner atom itself
    (2.0, [0.0, 0.0, 0.0, 1.0]),  # the top atom itself
    (1.9, [0.0, 0.0, 0.1, 0.9]),
    (5.0, [0.0, 0.0, 0.0, 1.0]),  # clipped to the top
    (-7.0, [1.0, 0.0, 0.0, 0.0]),  # clipped to the bottom
])
def test_two_hot_by_hand(x, expected):
    close(value_support.scalar_to_two_hot(f32(x), SUPPORT), expected)


def test_two_hot_on_an_uneven_support():
    # atoms [0, 1, 5]: x = 2 lies a quarter of the way from 1 to 5 -> 0.75 on 1, 0.25 on 5
    close(value_support.scalar_to_two_hot(f32(2.0), f32([0.0, 1.0, 5.0])), [0.0, 0.75, 0.25])


def test_two_hot_is_batched_and_its_expectation_is_the_clipped_scalar():
    x = f32([[0.25, -3.0, 1.5], [2.0, 0.0, 1.999]])
    probs = value_support.scalar_to_two_hot(x, SUPPORT)
    chex.assert_shape(probs, (2, 3, 4))
    close(probs.sum(-1), np.ones((2, 3)))
    assert bool(jnp.all(probs >= 0))
    close(value_support.two_hot_to_scalar(probs, SUPPORT), [[0.25, -1.0, 1.5], [2.0, 0.0, 1.999]])


def test_expectation_by_hand():
    # 0.5·(-1) + 0.25·1 + 0.25·2 = 0.25
    close(value_support.two_hot_to_scalar(f32([0.5, 0.0, 0.25, 0.25]), SUPPORT), 0.25)


def test_two_hot_composes_with_the_transform_through_jit():
    # MuZero's use: a return squashed by h, two-hot on a support of h-values, back by the expectation and h⁻¹
    support = jnp.linspace(-10.0, 10.0, 21)

    @jax.jit
    def roundtrip(x):
        probs = value_support.scalar_to_two_hot(value_support.value_transform(x), support)
        return value_support.inverse_value_transform(value_support.two_hot_to_scalar(probs, support))

    close(roundtrip(f32([0.0, 3.0, -8.0, 57.5])), [0.0, 3.0, -8.0, 57.5], atol=1e-3, rtol=1e-4)


def test_two_hot_refuses_bad_supports():
    with pytest.raises(AssertionError):
        value_support.scalar_to_two_hot(f32(0.0), f32([1.0]))  # one atom has no interval
    with pytest.raises(AssertionError):
        value_support.two_hot_to_scalar(f32([0.5, 0.5]), SUPPORT)  # three atoms too few


# ----------------------------------------------------------------------------------------------------
# AlphaZero's policy loss: cross-entropy from the search's action weights
# ----------------------------------------------------------------------------------------------------


def test_policy_distillation_loss_by_hand():
    # logits [0, log 3] -> pi = [1/4, 3/4]; target [1/2, 1/2] -> -(0.5 log 0.25 + 0.5 log 0.75);
    # a second row with target [1, 0] and uniform logits -> log 2. The loss is their mean.
    target = f32([[0.5, 0.5], [1.0, 0.0]])
    logits = f32([[0.0, math.log(3.0)], [0.0, 0.0]])
    expected = (-(0.5 * math.log(0.25) + 0.5 * math.log(0.75)) + math.log(2.0)) / 2
    close(losses.policy_distillation_loss(target, logits), expected)


def test_policy_distillation_loss_gradient_is_pi_minus_target():
    # d/dlogits of -sum p log softmax(logits) is softmax(logits) - p, divided by the batch of 1
    target = f32([[0.2, 0.3, 0.5]])
    logits = f32([[1.0, -1.0, 0.5]])
    grad = jax.grad(losses.policy_distillation_loss, argnums=1)(target, logits)
    close(grad, jax.nn.softmax(logits) - target)
    assert not np.any(jax.grad(losses.policy_distillation_loss)(target, logits))  # the target is not learnt


def test_policy_distillation_loss_ignores_masked_actions():
    # an illegal action (finite fill logit) with target weight 0 changes nothing: [1/2, 1/2, 0] on logits
    # [0, 0, -1e9] costs log 2, as on the two legal actions alone
    close(losses.policy_distillation_loss(f32([[0.5, 0.5, 0.0]]), f32([[0.0, 0.0, -1e9]])), math.log(2.0))
