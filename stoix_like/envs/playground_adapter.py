"""MuJoCo Playground (`playground` 0.2.0) dm_control-suite tasks behind the stoix_like Environment API.

Playground's envs have no time limit of their own (its training wrapper adds `episode_length`), so the adapter
counts steps and truncates at `max_episode_steps` (default: the task config's `episode_length`, 1000); the env's
`done` (a NaN guard in the suite tasks) is termination. `impl` picks the MJX backend: "jax" by default here,
since the task configs' "warp" compiled about 3× slower on CPU and once hung at exit. Only the dm_control suite
is offered: the locomotion and manipulation tasks fetch model files at run time, which fails offline.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from stoix_like.envs.environment import ContinuousActionSpace, SuiteAdapter, import_suite
from stoix_like.envs.wrappers import restart, transition
from stoix_like.errors import ConfigError
from stoix_like.types import Array, EnvState, PRNGKey, TimeStep


class PlaygroundState(NamedTuple):
    env_state: EnvState  # playground's State (data, obs, reward, done, metrics, info)
    step_count: Array  # int32


class PlaygroundAdapter(SuiteAdapter):
    """A MuJoCo Playground dm_control-suite task with a truncating time limit.

    Args:
        name: a task of `mujoco_playground.dm_control_suite`, e.g. "CartpoleBalance".
        max_episode_steps: the time limit. None: the task config's `episode_length`.
        observation_layout: "flat" (the suite tasks observe vectors).
        impl: the MJX backend, "jax" or "warp".
        **config_overrides: fields of the task's config (e.g. ctrl_dt).
    """

    def __init__(self, name: str, max_episode_steps: Optional[int] = None, observation_layout: str = "flat",
                 impl: str = "jax", **config_overrides: object):
        suite = import_suite("mujoco_playground", "playground").dm_control_suite
        if name not in suite.ALL_ENVS:
            raise ConfigError(f"Unknown MuJoCo Playground dm_control-suite task {name!r}. "
                              f"Available: {', '.join(sorted(suite.ALL_ENVS))}")
        config = suite.get_default_config(name)
        self._env = suite.load(name, config_overrides={**config_overrides, "impl": impl})
        self.name = name
        self._max_episode_steps = int(config.episode_length if max_episode_steps is None else max_episode_steps)
        action_size = int(self._env.action_size)
        self._action_space = ContinuousActionSpace(
            low=-np.ones((action_size,), np.float32), high=np.ones((action_size,), np.float32))
        obs = jax.eval_shape(self._env.reset, jax.random.PRNGKey(0)).obs
        self._set_observation_layout(observation_layout, tuple(obs.shape))

    def reset(self, key: PRNGKey) -> Tuple[PlaygroundState, TimeStep]:
        env_state = self._env.reset(key)
        step_count = jnp.zeros((), jnp.int32)
        return PlaygroundState(env_state, step_count), restart(self.flat_observation(env_state.obs, step_count))

    def step(self, state: PlaygroundState, action: Array) -> Tuple[PlaygroundState, TimeStep]:
        env_state = self._env.step(state.env_state, jnp.clip(action, -1.0, 1.0))
        step_count = state.step_count + 1
        terminated = env_state.done > 0.5  # a float, as in brax
        truncated = step_count >= self._max_episode_steps
        timestep = transition(env_state.reward, terminated, truncated, self.flat_observation(env_state.obs, step_count))
        return PlaygroundState(env_state, step_count), timestep
