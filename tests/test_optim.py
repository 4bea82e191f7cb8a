"""The shared optimiser (optim.make_optimizer): optax's global-norm clipping then Adam, its rate decayed linearly
to zero over the steps asked for, on the params' own tree or (one_vector, the DQN family's) on the params laid end
to end: the same steps either way."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from stoix_like.networks.torsos import MLPTorso
from stoix_like.learner.optim import make_optimizer


def _two_networks() -> dict:
    """Leaves of several shapes in a nested tree, as an actor-critic's params are."""
    actor = MLPTorso(layer_sizes=(8, 4), activation="tanh").init(jax.random.PRNGKey(0), jnp.ones((1, 3)))
    critic = MLPTorso(layer_sizes=(5,), activation="relu").init(jax.random.PRNGKey(1), jnp.ones((1, 3)))
    return {"actor": actor, "critic": critic}


@pytest.mark.parametrize("one_vector", [False, True])
@pytest.mark.parametrize("decay", [True, False])
def test_steps_are_optax_s_clipping_then_adam_on_the_tree(decay, one_vector):
    params = _two_networks()
    schedule = optax.linear_schedule(1e-2, 0.0, 6) if decay else 1e-2
    reference = optax.chain(optax.clip_by_global_norm(0.5), optax.adam(schedule, eps=1e-5))
    ours = make_optimizer(1e-2, 0.5, 6, decay, one_vector=one_vector)
    ours_params, reference_params = params, params
    ours_state, reference_state = ours.init(params), reference.init(params)
    leaves, structure = jax.tree_util.tree_flatten(params)
    # large gradients, which the clip scales down, then small ones, which it leaves alone
    for step, scale in enumerate([30.0, 30.0, 1e-3, 1e-3, 5.0, 1e-2]):
        keys = jax.random.split(jax.random.PRNGKey(100 + step), len(leaves))
        grads = jax.tree_util.tree_unflatten(
            structure, [scale * jax.random.normal(key, leaf.shape) for key, leaf in zip(keys, leaves)])
        ours_updates, ours_state = jax.jit(ours.update)(grads, ours_state, ours_params)
        reference_updates, reference_state = reference.update(grads, reference_state, reference_params)
        assert jax.tree_util.tree_structure(ours_updates) == structure
        for have, want in zip(jax.tree_util.tree_leaves(ours_updates), jax.tree_util.tree_leaves(reference_updates)):
            assert have.shape == want.shape and have.dtype == want.dtype
            np.testing.assert_allclose(have, want, rtol=1e-5, atol=1e-8)
        ours_params = optax.apply_updates(ours_params, ours_updates)
        reference_params = optax.apply_updates(reference_params, reference_updates)


def test_the_state_is_a_moment_per_params_leaf_or_one_vector_per_moment():
    params = _two_networks()
    size = sum(leaf.size for leaf in jax.tree_util.tree_leaves(params))
    for one_vector, shapes in ((False, [leaf.shape for leaf in jax.tree_util.tree_leaves(params)] * 2),
                               (True, [(size,), (size,)])):
        state = make_optimizer(1e-3, 0.5, 10, False, one_vector=one_vector).init(params)
        assert [leaf.shape for leaf in jax.tree_util.tree_leaves(state) if np.ndim(leaf) > 0] == shapes
