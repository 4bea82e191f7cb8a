"""`kernel_init` of the MLP torso and the continuous heads: orthogonal with the layer's gain (the default), or
brax's lecun_uniform."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stoix_like.networks.heads import ScalarCriticHead, TanhGaussianHead
from stoix_like.networks.torsos import MLPTorso, kernel_init_by_name


def _first_kernel(params) -> np.ndarray:
    return np.asarray(params["params"]["Dense_0"]["kernel"])


def test_the_torso_s_default_is_orthogonal_with_gain_root_two_and_lecun_is_bounded_by_its_fan_in():
    observation = jnp.ones((1, 27))
    orthogonal = _first_kernel(MLPTorso(layer_sizes=(64,)).init(jax.random.PRNGKey(0), observation))
    np.testing.assert_allclose(orthogonal @ orthogonal.T, 2.0 * np.eye(27), atol=1e-4)  # (27, 64): orthogonal rows
    lecun = _first_kernel(MLPTorso(layer_sizes=(64,), kernel_init="lecun_uniform").init(jax.random.PRNGKey(0),
                                                                                       observation))
    assert np.abs(lecun).max() <= np.sqrt(3.0 / 27) + 1e-6  # U(±√(3 / fan_in))
    assert not np.allclose(lecun @ lecun.T, np.diag(np.diag(lecun @ lecun.T)), atol=1e-2)


def test_the_policy_head_starts_the_same_in_every_state_only_under_its_small_orthogonal_init():
    features = jax.random.normal(jax.random.PRNGKey(1), (32, 64))
    head = dict(action_dim=3, low=(-1.0,) * 3, high=(1.0,) * 3)
    scales = {}
    for name in ("orthogonal", "lecun_uniform"):
        module = TanhGaussianHead(**head, kernel_init=name)
        params = module.init(jax.random.PRNGKey(2), features, None)
        scales[name] = np.asarray(module.apply(params, features, None).scale)
    assert scales["orthogonal"].std() < 0.01  # gain 0.01: softplus(≈0) everywhere
    assert scales["lecun_uniform"].std() > 0.1  # brax's: the noise varies with the state from the start


def test_the_critic_head_takes_the_same_names_and_an_unknown_name_says_which_exist():
    features = jnp.ones((2, 8))
    for name in ("orthogonal", "lecun_uniform"):
        values = ScalarCriticHead(kernel_init=name).init_with_output(jax.random.PRNGKey(0), features)[0]
        assert values.shape == (2,)
    with pytest.raises(ValueError, match="orthogonal, lecun_uniform"):
        kernel_init_by_name("he_normal", 1.0)
