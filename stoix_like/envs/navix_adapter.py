"""navix (0.7.4, MiniGrid in JAX) environments behind the stoix_like Environment API.

navix's `step` auto-resets, so the adapter calls its non-resetting `_step`. navix already tells a time limit
(`StepType.TRUNCATION`, 1) from a true end (`TERMINATION`, 2); its limit is the env's `max_steps`, which the
adapter sets to ours, so the two agree. The reward is 1 on reaching the goal and 0 otherwise (navix's
`penality_coeff` is 0 unless asked for), so on Empty and DoorKey an episode's return is its success.
Observations are navix's symbolic grid, (height, width, 3): flattened, or kept for a CNN.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

import jax.numpy as jnp

from stoix_like.envs.environment import DiscreteActionSpace, SuiteAdapter, import_suite
from stoix_like.envs.wrappers import restart, transition
from stoix_like.errors import ConfigError
from stoix_like.types import Array, EnvState, PRNGKey, TimeStep

DEFAULT_MAX_EPISODE_STEPS = 100  # navix.make's default
_TRUNCATION, _TERMINATION = 1, 2  # navix.environments.environment.StepType


class NavixState(NamedTuple):
    suite_timestep: EnvState  # navix's Timestep: it holds the env state and the step count `t`


class NavixAdapter(SuiteAdapter):
    """A navix env without auto-reset.

    Args:
        name: a navix id, e.g. "Navix-Empty-8x8-v0".
        max_episode_steps: the time limit (navix's `max_steps`); reaching it truncates. None: 100.
        observation_layout: "flat", or "image" for the (height, width, 3) grid.
        **env_kwargs: passed to `navix.make`.
    """

    def __init__(self, name: str, max_episode_steps: Optional[int] = None, observation_layout: str = "flat",
                 **env_kwargs: object):
        navix = import_suite("navix", "navix")
        available = navix.registry()
        if name not in available:
            raise ConfigError(f"Unknown navix environment {name!r}. Available: {', '.join(sorted(available))}")
        self._max_episode_steps = DEFAULT_MAX_EPISODE_STEPS if max_episode_steps is None else int(max_episode_steps)
        self._env = navix.make(name, max_steps=self._max_episode_steps, **env_kwargs)
        self.name = name
        self._action_space = DiscreteActionSpace(num_actions=int(self._env.action_space.maximum) + 1)
        self._set_observation_layout(observation_layout, tuple(self._env.observation_space.shape))

    def reset(self, key: PRNGKey) -> Tuple[NavixState, TimeStep]:
        suite_timestep = self._env.reset(key)
        return NavixState(suite_timestep), restart(self._observation(suite_timestep))

    def step(self, state: NavixState, action: Array) -> Tuple[NavixState, TimeStep]:
        suite_timestep = self._env._step(state.suite_timestep, action)
        terminated = suite_timestep.step_type == _TERMINATION
        truncated = suite_timestep.step_type == _TRUNCATION
        timestep = transition(suite_timestep.reward, terminated, truncated, self._observation(suite_timestep))
        return NavixState(suite_timestep), timestep

    def _observation(self, suite_timestep: EnvState):
        return self.flat_observation(suite_timestep.observation, jnp.asarray(suite_timestep.t, jnp.int32))
