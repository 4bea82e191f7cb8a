"""arch.rollout_unroll is a speed choice: the compiled acting loop runs that many env steps per iteration, and the
learner ends in the same state, bit for bit on CPU, whatever it is, through the on-policy rollout (PPO) and the off-policy one (DQN).
An unroll that does not divide the rollout length (3 of 8) leaves a remainder the loop must still run."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from stoix_like import envs as envs_lib
from stoix_like.learner import budget as budget_lib
from stoix_like.runtime import parallel
from stoix_like.systems.on_policy import ppo
from stoix_like.systems.q_learning import dqn

TINY = {
    "ppo": (ppo, ["arch.total_num_envs=4", "system.rollout_length=8", "system.num_minibatches=2",
                  "arch.num_evaluation=1", "arch.total_timesteps=96",
                  "network.actor_network.pre_torso.layer_sizes=[16]",
                  "network.critic_network.pre_torso.layer_sizes=[16]"]),
    "dqn": (dqn, ["arch.total_num_envs=4", "system.rollout_length=8", "arch.num_evaluation=1",
                  "arch.total_timesteps=128", "system.warmup_rollout_length=8"]),
}


def learned_state(compose, algorithm: str, unroll: int):
    module, overrides = TINY[algorithm]
    config = compose(algorithm, overrides + [f"arch.rollout_unroll={unroll}"])
    budget = budget_lib.make_budget(config)
    train_env, _ = envs_lib.make(config.env)
    setup = module.learner_setup(train_env, jax.random.PRNGKey(0), config, budget)
    state, _ = parallel.distribute(setup.learner_fn)(setup.learner_state)
    return jax.device_get(state)


@pytest.mark.parametrize("algorithm", sorted(TINY))
def test_the_rollout_unroll_changes_no_result(compose, algorithm):
    rolled = jax.tree_util.tree_leaves(learned_state(compose, algorithm, 1))
    unrolled = jax.tree_util.tree_leaves(learned_state(compose, algorithm, 3))
    assert len(rolled) == len(unrolled)
    for got, want in zip(unrolled, rolled):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
