"""Sebulba's CPU env adapter: gymnasium and envpool give the repository's TimeStep convention.

A terminated episode has discount 0; a truncated one (time limit) a LAST step with discount 1, whose
`extras["next_obs"]` is the true final observation while `observation` is already the next episode's first.
"""

from __future__ import annotations

import numpy as np
import pytest

from stoix_like.envs.cpu_vector_env import make_cpu_envs
from stoix_like.types import StepType

SUITES = ["gymnasium", pytest.param("envpool", marks=pytest.mark.skipif(
    __import__("importlib").util.find_spec("envpool") is None, reason="envpool (the sebulba extra) not installed"))]


def cartpole(suite: str, num_envs: int, limit):
    return make_cpu_envs({"suite": suite, "scenario": {"name": "CartPole-v1"}, "kwargs": {},
                          "max_episode_steps": limit}, num_envs, seed=0)


@pytest.mark.parametrize("suite", SUITES)
def test_truncation_bootstraps_from_the_true_final_observation(suite):
    envs = cartpole(suite, 2, limit=5)
    try:
        timestep = envs.reset(seed=0)
        assert (timestep.step_type == StepType.FIRST).all()
        previous = timestep.observation.agent_view
        for t in range(5):
            # alternate the pole left and right: it stays up, so only the time limit ends the episode
            timestep = envs.step(np.array([t % 2, 1 - t % 2]))
            if t < 4:
                assert (timestep.step_type == StepType.MID).all() and (timestep.discount == 1).all()
                np.testing.assert_array_equal(timestep.extras["next_obs"].agent_view, timestep.observation.agent_view)
                previous = timestep.observation.agent_view
        assert (timestep.step_type == StepType.LAST).all()
        assert (timestep.discount == 1).all(), "truncation must bootstrap (discount 1)"
        final, fresh = timestep.extras["next_obs"].agent_view, timestep.observation.agent_view
        assert not np.allclose(final, fresh), "observation is the reset one, next_obs the pre-reset one"
        # CartPole moves x by tau * x_dot per step: the final observation continues the episode, the reset one does not
        assert np.all(np.abs(final[:, 0] - previous[:, 0]) < 0.05)
        assert np.all(np.abs(fresh[:, :]) <= 0.05), "gymnasium CartPole resets into [-0.05, 0.05]"
        metrics = timestep.extras["episode_metrics"]
        np.testing.assert_array_equal(metrics["episode_length"], [5, 5])
        np.testing.assert_array_equal(metrics["episode_return"], [5.0, 5.0])
        assert metrics["is_terminal_step"].all() and not metrics["ended_by_termination"].any()
        np.testing.assert_array_equal(timestep.observation.step_count, [0, 0])
        np.testing.assert_array_equal(timestep.extras["next_obs"].step_count, [5, 5])
        # the next step is a real transition of the new episode (SAME_STEP: no reset step in between)
        timestep = envs.step(np.array([0, 1]))
        assert (timestep.step_type == StepType.MID).all()
        np.testing.assert_array_equal(timestep.extras["episode_metrics"]["episode_length"], [1, 1])
    finally:
        envs.close()


@pytest.mark.parametrize("suite", SUITES)
def test_termination_has_discount_zero(suite):
    envs = cartpole(suite, 3, limit=None)
    try:
        envs.reset(seed=1)
        assert envs.max_episode_steps == 500
        for t in range(40):  # always pushing right: the pole falls within ~10 steps in every env
            timestep = envs.step(np.ones(3, np.int64))
            ended = timestep.last()
            if ended.any():
                assert (timestep.discount[ended] == 0).all()
                assert timestep.extras["episode_metrics"]["ended_by_termination"][ended].all()
                assert (timestep.discount[~ended] == 1).all()
                # the terminal observation is past CartPole's angle limit (12 degrees) or its position limit
                final = timestep.extras["next_obs"].agent_view[ended]
                assert np.all((np.abs(final[:, 2]) > 0.2094) | (np.abs(final[:, 0]) > 2.4))
                return
        pytest.fail("no episode terminated")
    finally:
        envs.close()
