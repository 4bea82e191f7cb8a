"""PQN as a whole: its shipped defaults learn CartPole on a population of seeds, its Hydra entry runs, and it never
takes an illegal action on a masked suite (jumanji Snake)."""

from __future__ import annotations

import re

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_population_learns

from stoix_like.run import experiment
from stoix_like.envs import Wrapper
from stoix_like.systems.on_policy import pqn

# 2 evaluations × 1 update × 8 steps × 4 envs = 64 steps; 2 minibatches of 16 transitions
TINY = ["arch.total_num_envs=4", "system.rollout_length=8", "system.num_minibatches=2", "arch.num_evaluation=2",
        "arch.num_eval_episodes=2", "arch.total_timesteps=64", "network.q_network.pre_torso.layer_sizes=[16]"]


@pytest.mark.learning
def test_pqn_learns_cartpole(compose):
    # config/pqn.yaml as shipped (its 150,000-step budget included), seeds 0..3 in one program, must meet its
    # target in stoix_like/claims/learning_targets.py: a population claim, never a bar on one seed
    assert_population_learns(compose, "pqn")


def test_pqn_hydra_entry_runs(python_subprocess, tmp_path):
    completed = python_subprocess(["-m", "experiments.pqn", *TINY], cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert re.search(r"^pqn on gymnax/CartPole-v1: 64 steps", completed.stdout, flags=re.MULTILINE), completed.stdout
    assert re.search(r"^done: 64 steps \|", completed.stdout, flags=re.MULTILINE), completed.stdout


class IllegalActionPoisonsReward(Wrapper):
    """An action outside the mask the agent was shown makes the reward NaN; the run then stops loudly
    (experiment.run raises on a non-finite loss), so a run that finishes never took an illegal action."""

    def reset(self, key):
        state, timestep = self._env.reset(key)
        return (state, timestep.observation.action_mask), timestep

    def step(self, state, action):
        inner_state, action_mask = state
        inner_state, timestep = self._env.step(inner_state, action)
        reward = jnp.where(action_mask[action], timestep.reward, jnp.nan)
        return (inner_state, timestep.observation.action_mask), timestep._replace(reward=reward)


def test_pqn_honours_action_masks_on_snake(compose):
    # Snake forbids turning back on itself. The first update acts with ε = 1: were the mask ignored, its 32
    # uniform actions would include a forbidden one with probability 1 − (3/4)^32 > 0.9999.
    # 10-step episodes: training crosses time-limit truncations, and evaluation stays short
    config = compose("pqn", ["env=jumanji/snake", "env.max_episode_steps=10", "logger.use_json=False", *TINY])

    def poisoned_learner_setup(env, key, config, budget):
        return pqn.learner_setup(IllegalActionPoisonsReward(env), key, config, budget)

    absolute_return = experiment.run(config, poisoned_learner_setup, algorithm="pqn")
    assert np.isfinite(absolute_return)

