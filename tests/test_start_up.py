"""What makes a command-line run start fast (issue 15's first result) changes no number: the categorical written
without distrax, setup programs compiled without LLVM's expensive passes, and gymnax's rendering imports deferred."""

from __future__ import annotations

import subprocess
import sys

import chex
import distrax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stoix_like.runtime import compilation_cache
from stoix_like.networks.distributions import MaskedCategorical
from stoix_like.networks.torsos import MLPTorso
from stoix_like.ops.masking import mask_illegal
from stoix_like.runtime.threefry_lowering import unrolled_threefry

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


def test_a_setup_program_compiled_lightly_with_straight_line_threefry_computes_the_same_bits():
    # jit_setup_program: no LLVM expensive passes, and every Threefry hash unrolled (threefry_lowering.py)
    torso = MLPTorso(layer_sizes=(64, 64), activation="tanh")
    key, observation = jax.random.PRNGKey(0), jnp.ones((1, 4))
    fully = jax.jit(torso.init)(key, observation)
    lightly = compilation_cache.jit_setup_program(torso.init)(key, observation)
    for full_leaf, light_leaf in zip(jax.tree_util.tree_leaves(fully), jax.tree_util.tree_leaves(lightly)):
        np.testing.assert_array_equal(full_leaf, light_leaf)


def test_setup_programs_hash_every_draw_in_straight_line_code():
    # a 64×64 draw (4,096 counts) loses jax's rolled loop inside the block jit_setup_program lowers in, for the
    # same bits
    draw = lambda key: jax.random.normal(key, (64, 64))  # noqa: E731
    key = jax.random.PRNGKey(5)
    with unrolled_threefry():
        written_out = jax.jit(lambda k: draw(k)).lower(key).compile()
    looped = jax.jit(lambda k: draw(k)).lower(key).compile()
    if jax.default_backend() == "cpu":
        assert " while(" not in written_out.as_text() and " while(" in looped.as_text()
    np.testing.assert_array_equal(written_out(key), looped(key))
    np.testing.assert_array_equal(compilation_cache.jit_setup_program(draw)(key), looped(key))


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
    from stoix_like.runtime import deferred_imports

    deferred_imports.defer("no_such_module_stoix_like")
    assert "no_such_module_stoix_like" not in sys.modules


def _small_setup(compose, algorithm: str, learner_setup, overrides=()):
    from stoix_like import envs as envs_lib
    from stoix_like.run import experiment
    from stoix_like.learner import budget as budget_lib

    config = compose(algorithm, ["arch.total_num_envs=4", "arch.num_evaluation=1", "arch.num_eval_episodes=6",
                                 *overrides])
    budget = budget_lib.make_budget(config)
    train_env, eval_env = envs_lib.make(config.env)
    return experiment.set_up(learner_setup, train_env, config, budget, [0, 1]), eval_env


@pytest.mark.parametrize("algorithm", ["ppo", "dqn"])  # an actor-critic and a value-based state
def test_eval_params_only_select_so_the_loop_may_slice_after_selecting(compose, algorithm):
    # shared.eval_params_of applies a system's eval_params to the whole state, then takes one slot
    import importlib

    from stoix_like.run import shared
    from stoix_like.runtime import parallel

    module = {"ppo": "stoix_like.systems.on_policy.ppo", "dqn": "stoix_like.systems.q_learning.dqn"}[algorithm]
    # a budget of whole updates after each system's warm-up
    overrides = {"ppo": [], "dqn": ["arch.total_timesteps=6600", "system.total_buffer_size=4096"]}[algorithm]
    prepared, _ = _small_setup(compose, algorithm, importlib.import_module(module).learner_setup, overrides)
    for seed_index in (0, 1):
        selected_then_sliced = shared.eval_params_of(prepared.system, prepared.fresh_state, seed_index, 2)
        sliced_then_selected = parallel.local_host_copy(
            prepared.system.eval_params(parallel.first_slot(prepared.fresh_state, seed_index, 2)))
        chex.assert_trees_all_equal(selected_then_sliced, sliced_then_selected)
    first, second = (jax.tree_util.tree_leaves(shared.eval_params_of(prepared.system, prepared.fresh_state, k, 2))
                     for k in (0, 1))
    assert any(not np.array_equal(a, b) for a, b in zip(first, second)), "two seeds' params should differ"


def test_an_evaluator_compiled_beside_the_learner_evaluates_as_one_compiled_at_its_first_call(compose):
    from stoix_like.run import experiment, shared
    from stoix_like.learner.evaluator import make_evaluator
    from stoix_like.systems.on_policy import ppo

    prepared, eval_env = _small_setup(compose, "ppo", ppo.learner_setup)
    params = shared.eval_params_of(prepared.system, prepared.fresh_state, 1, 2)
    at_first_call = make_evaluator(eval_env, prepared.system.eval_policy, 6)
    ahead = make_evaluator(eval_env, prepared.system.eval_policy, 6)
    learn, _ = experiment.compile_programs(prepared.system, prepared.fresh_state, 2, ahead, params)
    assert not hasattr(ahead._run_on_devices, "lower"), "compile_programs left the evaluator uncompiled"
    key = jax.random.PRNGKey(3)
    chex.assert_trees_all_equal(ahead(params, key), at_first_call(params, key))
    assert ahead(params, key)["episode_return"].shape == (6,)


@pytest.mark.parametrize("seed", [0, 3, 42, 1007, -1, 2 ** 31 - 1, -(2 ** 31)])
def test_keys_made_and_split_on_the_host_are_jax_s_bit_for_bit(seed):
    from stoix_like.runtime import host_keys

    key = host_keys.seed_key(seed)
    np.testing.assert_array_equal(key, np.asarray(jax.random.PRNGKey(seed)))
    for num in (1, 2, 3, 5, 10, 17):
        keys = host_keys.split(key, num)
        expected = np.asarray(jax.random.split(jax.random.PRNGKey(seed), num))
        assert keys.dtype == expected.dtype and keys.shape == expected.shape
        np.testing.assert_array_equal(keys, expected)
        # a split of a split: keys of every bit pattern, not only a seed's (high word 0)
        np.testing.assert_array_equal(host_keys.split(keys[-1], 3), np.asarray(jax.random.split(expected[-1], 3)))
    for data in (0, 1, 7, 2**31 - 1, 2**32 - 1):  # a process index folded into a slot's key, and the extremes
        folded = host_keys.fold_in(host_keys.split(key, 3)[2], data)
        expected = np.asarray(jax.random.fold_in(jax.random.split(jax.random.PRNGKey(seed), 3)[2], data))
        assert folded.dtype == expected.dtype and folded.shape == expected.shape
        np.testing.assert_array_equal(folded, expected)


def test_slot_keys_split_on_the_host_are_the_keys_jax_splits():
    from stoix_like.runtime import host_keys, parallel

    key = host_keys.split(host_keys.seed_key(11), 2)[1]
    for num_per_slot in (None, 1, 4):
        on_host = parallel.split_key_per_slot(key, 3, num_per_slot)
        assert isinstance(on_host, np.ndarray)
        shape = (jax.local_device_count(), 3) + (() if num_per_slot is None else (num_per_slot,))
        by_jax = jax.random.split(jax.random.fold_in(jnp.asarray(key), jax.process_index()), int(np.prod(shape)))
        np.testing.assert_array_equal(on_host, np.asarray(by_jax).reshape(shape + (2,)))


def test_a_split_on_the_host_defers_to_jax_for_typed_keys():
    from stoix_like.runtime import host_keys

    typed = jax.random.key(7)
    np.testing.assert_array_equal(jax.random.key_data(host_keys.split(typed, 3)),
                                  jax.random.key_data(jax.random.split(typed, 3)))


@pytest.mark.parametrize("decay", [True, False])
def test_the_optimizer_state_made_on_the_host_is_optax_s_initial_state(decay):
    import optax

    from stoix_like.learner.optim import make_optimizer

    params = MLPTorso(layer_sizes=(8, 4), activation="tanh").init(jax.random.PRNGKey(0), jnp.ones((1, 3)))
    schedule = optax.linear_schedule(1e-3, 0.0, 10) if decay else 1e-3
    expected = optax.chain(optax.clip_by_global_norm(0.5), optax.adam(schedule, eps=1e-5)).init(params)
    got = make_optimizer(1e-3, 0.5, 10, decay).init(params)
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(expected)
    for have, want in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(expected)):
        assert have.dtype == want.dtype and have.shape == want.shape
        np.testing.assert_array_equal(have, want)


ENTRY_AS_PROGRAM = """
import atexit, gc, sys
from stoix_like.entry import hydra_entry

{name} = hydra_entry("ppo", lambda config: print("frozen in the run:", gc.get_freeze_count() > 0) or 0.0)
atexit.register(lambda: print("frozen at exit:", gc.get_freeze_count() > 0))
sys.argv = ["run", "hydra.run.dir=."]
{name}()
"""


@pytest.mark.parametrize("name, frozen", [("main", True), ("entry", False)])
def test_the_collector_skips_what_is_loaded_only_when_the_entry_is_the_program(tmp_path, name, frozen):
    """`python -m experiments.<algo>` (the program's `main` is the entry) keeps what is loaded before its run out of
    the cycle collector's walks, and exits without Python's last collections; an entry called by other code
    (here: not the program's `main`) leaves the collector alone."""
    from conftest import run_python

    completed = run_python(["-c", ENTRY_AS_PROGRAM.format(name=name)], cwd=tmp_path, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert f"frozen in the run: {frozen}" in completed.stdout, completed.stdout[-3000:]
    assert f"frozen at exit: {frozen}" in completed.stdout, completed.stdout[-3000:]


SETUP_COMPILES = """
import logging, jax
from hydra import compose, initialize_config_dir
from stoix_like import envs as envs_lib
from stoix_like.learner import budget as budget_lib
from stoix_like.run import experiment
from stoix_like.config.compose import CONFIG_DIR
from stoix_like.systems import system_module

compiled = []
class Compilations(logging.Handler):
    def emit(self, record):
        message = record.getMessage()
        if message.startswith("Finished XLA compilation of "):
            compiled.append(message.split()[4])
with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
    config = compose(config_name="{algorithm}", overrides=["arch.seed=3"])
budget = budget_lib.make_budget(config)
train_env, _ = envs_lib.make(config.env)
logging.getLogger("jax").addHandler(Compilations())
jax.config.update("jax_log_compiles", True)
jax.block_until_ready(experiment.set_up(system_module("{algorithm}").learner_setup, train_env, config, budget,
                                        [3]).fresh_state)
print("compiled:", sorted(compiled))
"""


@pytest.mark.parametrize("algorithm, programs", [
    ("ppo", ["jit(_initial_learner_state)", "jit(init)"]),
    ("pqn", ["jit(_initial_learner_state)", "jit(init)"]),
    # off-policy: the replay buffer's zeros, env resets and replication are one program; the warm-up is another
    ("dqn", ["jit(_fun)", "jit(init)", "jit(initial_state)"]),
    # networks with memory: their example hidden states are numpy, and recurrent PPO's two inits are one program
    ("rec_ppo", ["jit(_initial_learner_state)", "jit(init)"]),
    ("r2d2", ["jit(_fun)", "jit(init)", "jit(initial_state)"]),
])
def test_a_setup_compiles_only_its_setup_programs(tmp_path, algorithm, programs):
    """Setup runs no eager op (an optimiser's init that lays the params end to end included): each would compile a
    program of its own, ~0.01-0.2 s on 2 cores. What compiles is the networks' init, the initial state and, off
    policy, the replay warm-up."""
    from conftest import run_python

    completed = run_python(["-c", SETUP_COMPILES.format(algorithm=algorithm)], cwd=tmp_path, timeout=300)
    assert completed.returncode == 0, completed.stderr[-2000:]
    (line,) = [line for line in completed.stdout.splitlines() if line.startswith("compiled:")]
    assert line == f"compiled: {programs}", line
