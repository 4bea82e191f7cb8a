"""What makes a command-line run start fast (issue 15's first result) changes no number: the categorical written
without distrax, setup programs compiled without LLVM's expensive passes, and gymnax's rendering imports deferred."""

from __future__ import annotations

import subprocess
import sys

import distrax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from stoix_like import compilation_cache
from stoix_like.networks.distributions import MaskedCategorical
from stoix_like.networks.torsos import MLPTorso
from stoix_like.ops.masking import mask_illegal

LOGITS = jax.random.normal(jax.random.PRNGKey(3), (257, 5)) * 4.0
MASK = jax.random.bernoulli(jax.random.PRNGKey(4), 0.7, (257, 5)).at[:, 0].set(True)  # one legal action at least


def _ours_and_distrax(logits: jax.Array):
    return MaskedCategorical(logits, MASK), distrax.Categorical(logits=mask_illegal(logits, MASK))


def test_the_masked_categorical_samples_scores_and_differentiates_as_distrax_does_bit_for_bit():
    ours, reference = _ours_and_distrax(LOGITS)
    for key in jax.random.split(jax.random.PRNGKey(5), 4):
        np.testing.assert_array_equal(ours.sample(key), reference.sample(seed=key))
    actions = reference.sample(seed=jax.random.PRNGKey(6))
    np.testing.assert_array_equal(ours.log_prob(actions), reference.log_prob(actions))
    np.testing.assert_array_equal(ours.entropy(), reference.entropy())

    def loss(use_ours: bool):
        def of(logits):
            dist = _ours_and_distrax(logits)[0 if use_ours else 1]
            return jnp.sum(dist.log_prob(actions) + 0.01 * dist.entropy())
        return jax.jit(jax.grad(of))

    np.testing.assert_array_equal(loss(True)(LOGITS), loss(False)(LOGITS))


def test_a_setup_program_compiled_without_llvm_s_expensive_passes_computes_the_same_bits():
    torso = MLPTorso(layer_sizes=(64, 64), activation="tanh")
    key, observation = jax.random.PRNGKey(0), jnp.ones((1, 4))
    fully = jax.jit(torso.init)(key, observation)
    lightly = compilation_cache.jit_setup_program(torso.init)(key, observation)
    for full_leaf, light_leaf in zip(jax.tree_util.tree_leaves(fully), jax.tree_util.tree_leaves(lightly)):
        np.testing.assert_array_equal(full_leaf, light_leaf)


def test_the_gymnax_suite_loads_no_plotting_library_until_something_draws():
    script = (
        "import sys\n"
        "from stoix_like import envs\n"
        "envs.make({'suite': 'gymnax', 'scenario': {'name': 'CartPole-v1'}, 'kwargs': {}})\n"
        "print('pandas' in sys.modules, type(sys.modules['seaborn']).__name__)\n"
        "import seaborn, matplotlib.pyplot as plt\n"  # what gymnax's renderers do, then draw
        "print(len(seaborn.color_palette('cubehelix', 3)), callable(plt.subplots), 'pandas' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["False", "DeferredModule", "3", "True", "True"]


def test_a_deferred_module_not_installed_is_left_for_its_importer_to_report():
    from stoix_like import deferred_imports

    deferred_imports.defer("no_such_module_stoix_like")
    assert "no_such_module_stoix_like" not in sys.modules
