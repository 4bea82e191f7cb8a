"""brax (0.14) environments behind the stoix_like Environment API.

Only `brax.envs` is used. brax's `EpisodeWrapper` would fold the time limit into `done` (keeping the
distinction only in `info["truncation"]`), so the adapter wraps the raw env and counts steps itself:
brax's `done` is then natural termination only.
"""

from __future__ import annotations

from types import ModuleType
from typing import NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from stoix_like.envs.environment import ContinuousActionSpace, SuiteAdapter
from stoix_like.envs.wrappers import restart, transition
from stoix_like.errors import ConfigError
from stoix_like.types import Array, EnvState, PRNGKey, TimeStep

DEFAULT_MAX_EPISODE_STEPS = 1000


class BraxState(NamedTuple):
    env_state: EnvState  # brax.envs.State
    step_count: Array  # int32


class BraxAdapter(SuiteAdapter):
    """A brax env with a time limit and no auto-reset.

    Args:
        name: a brax env name, e.g. "ant".
        max_episode_steps: the time limit; reaching it is a truncation (discount 1). None: 1000 (brax envs
            have no limit of their own; 1000 is what brax's training uses).
        observation_layout: "flat" (brax observations are vectors).
        backend: the physics pipeline ("spring", "positional", "generalized", "mjx"); "spring" is the
            fastest on CPU.
        **env_kwargs: passed to `brax.envs.get_environment`.
    """

    def __init__(self, name: str, max_episode_steps: Optional[int] = None, observation_layout: str = "flat",
                 backend: str = "spring", **env_kwargs: object):
        from brax import envs as brax_envs  # lazily: importing stoix_like must not import brax

        available = _registered_brax_envs(brax_envs)
        if name not in available:
            raise ConfigError(f"Unknown brax environment {name!r}. Available: {', '.join(sorted(available))}")
        self._env = brax_envs.get_environment(name, backend=backend, **env_kwargs)
        self._max_episode_steps = DEFAULT_MAX_EPISODE_STEPS if max_episode_steps is None else int(max_episode_steps)
        self.name = name
        action_size = int(self._env.action_size)
        self._action_space = ContinuousActionSpace(
            low=-np.ones((action_size,), np.float32), high=np.ones((action_size,), np.float32)
        )
        # brax's observation_size runs an eager (unjitted) reset, ~8 s on CPU; tracing one is instant.
        obs = jax.eval_shape(self._env.reset, jax.random.PRNGKey(0)).obs
        self._set_observation_layout(observation_layout, tuple(obs.shape))

    def reset(self, key: PRNGKey) -> Tuple[BraxState, TimeStep]:
        env_state = self._env.reset(key)
        step_count = jnp.zeros((), jnp.int32)
        return BraxState(env_state, step_count), restart(self.flat_observation(env_state.obs, step_count))

    def step(self, state: BraxState, action: Array) -> Tuple[BraxState, TimeStep]:
        # brax does not bound actions itself; a Gaussian policy's samples can leave the box.
        action = jnp.clip(action, -1.0, 1.0)
        env_state = self._env.step(state.env_state, action)
        step_count = state.step_count + 1
        terminated = env_state.done > 0.5  # brax's done is a float
        truncated = step_count >= self._max_episode_steps
        timestep = transition(env_state.reward, terminated, truncated, self.flat_observation(env_state.obs, step_count))
        return BraxState(env_state, step_count), timestep


def _registered_brax_envs(brax_envs: ModuleType) -> list:
    # brax keeps its registry in a private dict; there is no public listing function.
    return list(getattr(brax_envs, "_envs", {}).keys())
