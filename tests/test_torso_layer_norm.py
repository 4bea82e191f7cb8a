"""Where the MLP torso's LayerNorm sits: between each dense layer and its activation (PQN's order, the default), or
after the activation (brax's MLP, whose order Playground's SAC Q-networks use)."""

from __future__ import annotations

import jax
import numpy as np

from stoix_like.networks.torsos import MLPTorso


def _features(**torso) -> np.ndarray:
    module = MLPTorso(layer_sizes=(256,), activation="relu", use_layer_norm=True, **torso)
    observations = jax.random.normal(jax.random.PRNGKey(0), (64, 17))
    return np.asarray(module.init_with_output(jax.random.PRNGKey(1), observations)[0])


def test_layer_norm_before_the_relu_leaves_non_negative_features_about_half_of_them_zero():
    features = _features()
    assert features.min() >= 0.0
    assert 0.3 < np.mean(features == 0.0) < 0.7


def test_layer_norm_after_the_relu_leaves_each_row_normalised_with_negative_entries():
    features = _features(layer_norm_after_activation=True)
    np.testing.assert_allclose(features.mean(axis=-1), 0.0, atol=1e-4)
    np.testing.assert_allclose(features.var(axis=-1), 1.0, atol=1e-2)
    assert features.min() < 0.0


def test_the_order_is_inert_without_layer_norm():
    module = MLPTorso(layer_sizes=(32, 32))
    observations = jax.random.normal(jax.random.PRNGKey(0), (8, 5))
    params = module.init(jax.random.PRNGKey(1), observations)
    after = MLPTorso(layer_sizes=(32, 32), layer_norm_after_activation=True)
    np.testing.assert_array_equal(module.apply(params, observations), after.apply(params, observations))
