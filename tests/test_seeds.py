"""`arch.num_seeds=N`: N independent seeds in one compiled program; seed k is the run `arch.seed + k`, whether the
program batches its seeds or runs them in sequence (`arch.seed_loop`).

Both runs are tiny PPO runs in their own interpreters (the learner of tests/test_checkpointing.py, shared
through the session's compilation cache), compared through the learner states they checkpoint.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest
from conftest import run_python

from stoix_like.runtime import parallel
from stoix_like.errors import ConfigError

SMALL_NETWORK = ["network.actor_network.pre_torso.layer_sizes=[16]",
                 "network.critic_network.pre_torso.layer_sizes=[16]"]
NUM_EVALUATION, TOTAL = 6, 192  # 6 evaluations × 1 update × 8 steps × 4 envs
RUN = ["arch.total_num_envs=4", "system.rollout_length=8", "system.num_minibatches=2",
       f"arch.num_evaluation={NUM_EVALUATION}", "arch.num_eval_episodes=2", f"arch.total_timesteps={TOTAL}"
       ] + SMALL_NETWORK


def test_seed_k_of_a_multi_seed_run_is_the_single_run_with_that_seed(tmp_path, compilation_cache_dir):
    def run(name, *overrides):
        return run_python(["-m", "experiments.ppo", *RUN, *overrides, "logger.checkpointing.save_model=True",
                           f"hydra.run.dir={tmp_path / name}"], cwd=tmp_path,
                          compilation_cache_dir=compilation_cache_dir)

    with ThreadPoolExecutor(2) as pool:  # two interpreters side by side
        multi, single = pool.map(lambda args: run(*args), [("multi", "arch.num_seeds=2"), ("single", "arch.seed=43")])
    for result in (multi, single):
        assert result.returncode == 0, result.stdout + result.stderr

    def final(name, item="learner_state"):
        return ocp.PyTreeCheckpointer().restore(str(tmp_path / name / "checkpoints" / str(TOTAL) / item))

    # learner-state leaves of the N-seed run lead with (devices, seeds, batch); seed index 1 is arch.seed + 1
    multi_leaves, single_leaves = jax.tree_util.tree_leaves(final("multi")), jax.tree_util.tree_leaves(final("single"))
    assert len(multi_leaves) == len(single_leaves) > 10
    for leaf, single_leaf in zip(multi_leaves, single_leaves):
        assert leaf.shape[1] == 2 and leaf[:, 1].shape == single_leaf.shape
        if np.issubdtype(leaf.dtype, np.floating):
            np.testing.assert_allclose(leaf[:, 1], single_leaf, rtol=1e-5, atol=1e-6)
        else:  # keys, counters, discrete env state: exactly the same
            np.testing.assert_array_equal(leaf[:, 1], single_leaf)
    for leaf, single_leaf in zip(jax.tree_util.tree_leaves(final("multi", "best_params")),
                                 jax.tree_util.tree_leaves(final("single", "best_params"))):
        assert leaf.shape[0] == 2
        np.testing.assert_allclose(leaf[1], single_leaf[0], rtol=1e-5, atol=1e-6)

    # every log carries each seed apart
    runs = json.loads((tmp_path / "multi" / "metrics.json").read_text())["gymnax"]["CartPole-v1"]["ppo"]
    assert sorted(runs) == ["seed_42", "seed_43"]
    for entries in runs.values():
        assert [entries[f"step_{i}"]["step_count"] for i in range(NUM_EVALUATION)] == list(range(32, TOTAL + 1, 32))
        assert len(entries["absolute_metrics"]["episode_return"]) == 20
    for seed in (42, 43):
        assert multi.stdout.count(f"[eval seed {seed}] step") == NUM_EVALUATION
        assert multi.stdout.count(f"[train seed {seed}] step") == NUM_EVALUATION
    assert "for each of 2 seeds 42..43 in one program" in multi.stdout


def _toy_learner(state):
    """A learner step per seed: its own update (a matrix product, so batching changes the kernels) and outputs."""
    weights, count = state
    weights = jnp.tanh(weights @ weights.T) + 0.1
    return (weights, count + 1), {"norm": jnp.linalg.norm(weights)}


def test_seeds_in_sequence_learn_what_batched_seeds_learn():
    seeds = 3
    state = (jax.random.normal(jax.random.PRNGKey(0), (1, seeds, 4, 4)), jnp.zeros((1, seeds), jnp.int32))
    results = {}
    for seed_loop in parallel.SEED_LOOPS:
        learn = parallel.distribute(_toy_learner, seeds, seed_loop)
        results[seed_loop] = learn(state)
        # the sequence is a loop over the seeds in the program; batching leaves none
        has_loop = "while" in learn.lower(state).as_text()
        assert has_loop == (seed_loop != "vmap"), seed_loop  # map_on_cpu: this is the CPU
    for seed_loop in ("map", "map_on_cpu"):
        for batched, in_sequence in zip(jax.tree_util.tree_leaves(results["vmap"]),
                                        jax.tree_util.tree_leaves(results[seed_loop])):
            # one float32 rounding apart at most: a batched matrix product may take another kernel, whose sums
            # round differently (1.3e-7 apart on an element of 0.0187 on CI's CPU, 7e-6 of it), so the bar is
            # absolute at the weights' scale (about 1) as well as relative
            np.testing.assert_allclose(in_sequence, batched, rtol=1e-6, atol=1e-6)


def test_an_unknown_seed_loop_is_refused():
    with pytest.raises(ConfigError, match=r"arch.seed_loop='pmap' must be one of vmap, map, map_on_cpu"):
        parallel.seeds_in_sequence("pmap")
