"""threefry_lowering: the straight-line lowering of jax's PRNG hash gives jax's own bits, and a learner compiled with
it (parallel.compile_learner) learns bit-identically to the same learner lowered with jax's rolled loop."""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from stoix_like import envs as envs_lib
from stoix_like.run import experiment
from stoix_like.learner import budget as budget_lib
from stoix_like.runtime import parallel
from stoix_like.systems.on_policy import pqn
from stoix_like.runtime.threefry_lowering import unrolled_threefry


def _compiled_text_and_result(fn: Callable, key: jax.Array, unrolled: bool):
    # a fresh function object every time: nothing jit cached for one lowering is reused for the other
    fresh = jax.jit(lambda k: fn(k))
    if unrolled:
        with unrolled_threefry():
            lowered = fresh.lower(key)
    else:
        lowered = fresh.lower(key)
    compiled = lowered.compile()
    return compiled.as_text(), jax.device_get(compiled(key))


def test_the_unrolled_hash_gives_jax_s_own_bits():
    key = jax.random.PRNGKey(1234)
    draws = {
        "split": lambda k: jax.random.split(k),  # a hash of 2 counts
        "split5": lambda k: jax.random.split(k, 5),
        "bits": lambda k: jax.random.bits(jax.random.fold_in(k, 7), (3, 33), jnp.uint32),
        "uniform": lambda k: jax.random.uniform(k, (17, 2)),
        "normal": lambda k: jax.random.normal(k, (9,)),
        "permutation": lambda k: jax.random.permutation(k, 2048),
        "categorical": lambda k: jax.random.categorical(k, jnp.log(jnp.array([0.2, 0.3, 0.5])), shape=(64,)),
    }
    for name, draw in draws.items():
        rolled_text, rolled = _compiled_text_and_result(draw, key, unrolled=False)
        unrolled_text, unrolled = _compiled_text_and_result(draw, key, unrolled=True)
        if jax.default_backend() == "cpu":  # the two really are different programs there
            assert " while(" in rolled_text and " while(" not in unrolled_text, name
        np.testing.assert_array_equal(unrolled, rolled, err_msg=name)


def test_the_rule_is_restored_after_the_block():
    key = jax.random.PRNGKey(0)
    with unrolled_threefry():
        pass
    text, _ = _compiled_text_and_result(lambda k: jax.random.split(k), key, unrolled=False)
    if jax.default_backend() == "cpu":
        assert " while(" in text


def test_a_block_reaches_only_the_thread_that_opened_it():
    """A program lowered on another thread while this thread is inside a block keeps jax's loop, and the block's
    own thread writes every hash out."""
    import threading

    if jax.default_backend() != "cpu":
        return  # the rule is CPU's only
    key = jax.random.PRNGKey(0)
    draw = lambda k: jax.random.uniform(k, (16, 4))  # noqa: E731
    lowered_elsewhere = []
    opened, lowered = threading.Event(), threading.Event()

    def other_thread():
        opened.wait()
        lowered_elsewhere.append(_compiled_text_and_result(draw, key, unrolled=False)[0])
        lowered.set()

    thread = threading.Thread(target=other_thread)
    thread.start()
    with unrolled_threefry():
        opened.set()
        lowered.wait()
        here, _ = _compiled_text_and_result(draw, key, unrolled=False)  # inside this thread's block
    thread.join()
    assert " while(" not in here
    assert " while(" in lowered_elsewhere[0]


def test_a_learner_compiled_unrolled_learns_bit_identically(compose):
    # 1 evaluation × 2 updates × 8 steps × 4 envs: ε-greedy acting, auto-resets and the minibatch shuffle all draw
    config = compose("pqn", ["arch.total_num_envs=4", "system.rollout_length=8", "system.num_minibatches=2",
                             "arch.num_evaluation=1", "arch.total_timesteps=64",
                             "network.q_network.pre_torso.layer_sizes=[16]"])
    budget = budget_lib.make_budget(config)
    train_env, _ = envs_lib.make(config.env)
    prepared = experiment.set_up(pqn.learner_setup, train_env, config, budget, [0])
    rolled = parallel.distribute(prepared.system.learner_fn).lower(prepared.fresh_state).compile()
    jax.clear_caches()  # jax caches a function's lowering by the function: this one must be lowered again
    unrolled = parallel.compile_learner(prepared.system.learner_fn, prepared.fresh_state)
    if jax.default_backend() == "cpu":
        assert rolled.as_text().count(" while(") > unrolled.as_text().count(" while(")
    expected = jax.device_get(rolled(prepared.fresh_state))  # (learner state, outputs: train and episode metrics)
    got = jax.device_get(unrolled(prepared.fresh_state))
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(expected)
    for (path, want), have in zip(jax.tree_util.tree_leaves_with_path(expected), jax.tree_util.tree_leaves(got)):
        np.testing.assert_array_equal(have, want, err_msg=jax.tree_util.keystr(path))


def test_the_unrolled_hash_matches_jax_s_on_many_counts_and_keys():
    # every size, not only the ones unrolled inside learners: the hash itself is the same function
    from jax.extend.random import threefry2x32_p

    from stoix_like.runtime.threefry_lowering import threefry2x32

    words = jax.random.bits(jax.random.PRNGKey(5), (4, 1000), jnp.uint32)
    expected = threefry2x32_p.bind(*words)
    got = jax.jit(threefry2x32)(*words)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(expected))
