"""Live progress within an evaluation interval (`logger.progress_per_evaluation`): the interval's updates run as
several learn calls with a progress line after each, and the run learns exactly what it learns in one call."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from stoix_like.run import experiment
from stoix_like.errors import ConfigError
from stoix_like.systems.on_policy import ppo

# 2 evaluations × 2 updates × 8 steps × 4 envs = 128 steps, 2 seeds
TINY = ["arch.total_num_envs=4", "system.rollout_length=8", "system.num_minibatches=2", "arch.num_evaluation=2",
        "arch.num_eval_episodes=2", "arch.total_timesteps=128", "arch.num_seeds=2", "arch.seed=3",
        "network.actor_network.pre_torso.layer_sizes=[16]", "network.critic_network.pre_torso.layer_sizes=[16]"]


def test_progress_lines_within_an_interval_change_nothing_learnt(compose, capsys):
    whole = experiment.train(compose("ppo", TINY), ppo.learner_setup, "ppo")
    whole_output = capsys.readouterr().out
    split = experiment.train(compose("ppo", [*TINY, "logger.progress_per_evaluation=2"]), ppo.learner_setup, "ppo")
    split_output = capsys.readouterr().out

    assert split.absolute_returns == whole.absolute_returns and split.best_returns == whole.best_returns
    for a, b in zip(jax.tree_util.tree_leaves(whole.learner_state), jax.tree_util.tree_leaves(split.learner_state)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    for seed in (3, 4):
        lines = [line for line in split_output.splitlines() if line.startswith(f"[train seed {seed}] step ")]
        assert [line.split(" | ")[0].split("step ")[1].split(" (")[0] for line in lines] == [
            "32/128", "64/128", "96/128", "128/128"]  # a line after every update, not only at evaluations
        assert len([line for line in whole_output.splitlines() if line.startswith(f"[train seed {seed}]")]) == 2
        assert split_output.count(f"[eval seed {seed}]") == 2


def test_a_split_that_does_not_divide_the_interval_is_refused_before_compiling(compose):
    with pytest.raises(ConfigError, match=r"logger.progress_per_evaluation=3 must divide the updates per "
                                          r"evaluation=2; try one of \[1, 2\]"):
        experiment.train(compose("ppo", [*TINY, "logger.progress_per_evaluation=3"]), ppo.learner_setup, "ppo")
