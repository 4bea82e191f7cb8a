"""gymnax (1.0) environments behind the stoix_like Environment API.

gymnax's own `step` auto-resets and substitutes the reset observation, so the adapter calls the non-resetting
`step_env` and asks `is_truncated` about the time limit itself, exactly as `gymnax.Environment.step` does
internally. In gymnax 1.0 `step_env`'s `done` is natural termination only (the time limit is no longer part of
it), which is what makes termination and truncation separable here.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from stoix_like.runtime import deferred_imports
from stoix_like.envs.environment import ActionSpace, ContinuousActionSpace, DiscreteActionSpace, SuiteAdapter
from stoix_like.envs.wrappers import restart, transition
from stoix_like.errors import ConfigError
from stoix_like.types import Array, EnvState, Observation, PRNGKey, TimeStep


class GymnaxState(NamedTuple):
    env_state: EnvState  # the gymnax EnvState; its `time` field is the step within the episode
    key: PRNGKey  # gymnax transitions take a key (some are stochastic)


class GymnaxAdapter(SuiteAdapter):
    """A gymnax env without auto-reset.

    Args:
        name: a gymnax id, e.g. "CartPole-v1".
        max_episode_steps: the time limit (it sets the env params' `max_steps_in_episode`); reaching it is a
            truncation (discount 1). None: the env's own limit.
        observation_layout: "flat", or "image" to keep a grid observation (MinAtar's 10×10×channels) for a CNN.
        env_params: overrides of the env's default EnvParams, e.g. {"gravity": 9.8}.
        **env_kwargs: passed to `gymnax.make`.
    """

    def __init__(self, name: str, max_episode_steps: Optional[int] = None, observation_layout: str = "flat",
                 env_params: Optional[Mapping[str, object]] = None, **env_kwargs: object):
        deferred_imports.defer_rendering_modules()  # before gymnax, whose every env module is imported with it
        import gymnax  # lazily: importing stoix_like must not import every suite
        from gymnax.environments import spaces

        if name not in gymnax.registered_envs:
            raise ConfigError(
                f"Unknown gymnax environment {name!r}. Available: {', '.join(sorted(gymnax.registered_envs))}"
            )
        self._env, params = gymnax.make(name, **env_kwargs)
        params = params.replace(**dict(env_params or {}))
        if max_episode_steps is not None:
            params = params.replace(max_steps_in_episode=int(max_episode_steps))
        self._params = params
        self.name = name

        space = self._env.action_space(self._params)
        self._action_space: ActionSpace
        if isinstance(space, spaces.Discrete):
            self._action_space = DiscreteActionSpace(num_actions=int(space.n))
        elif isinstance(space, spaces.Box):
            shape = tuple(space.shape)
            self._action_space = ContinuousActionSpace(
                low=np.broadcast_to(np.asarray(space.low, np.float32), shape).copy(),
                high=np.broadcast_to(np.asarray(space.high, np.float32), shape).copy(),
            )
        else:
            raise ConfigError(f"gymnax {name!r} has a {type(space).__name__} action space; only Discrete and Box work")

        self._set_observation_layout(observation_layout, tuple(self._env.observation_space(self._params).shape))
        self._max_episode_steps = int(self._params.max_steps_in_episode)
        self._step_reads_key: Optional[bool] = None  # known at the first trace of `step`

    def reset(self, key: PRNGKey) -> Tuple[GymnaxState, TimeStep]:
        key, reset_key = jax.random.split(key)
        obs, env_state = self._env.reset_env(reset_key, self._params)
        return GymnaxState(env_state, key), restart(self._observation(obs, env_state))

    def step(self, state: GymnaxState, action: Array) -> Tuple[GymnaxState, TimeStep]:
        if self._reads_key(state, action):
            key, step_key = jax.random.split(state.key)
        else:  # the key is carried unchanged: splitting it every step would cost a threefry hash for nothing
            key = step_key = state.key
        obs, env_state, reward, terminated, _ = self._env.step_env(step_key, state.env_state, action, self._params)
        truncated = self._env.is_truncated(env_state, self._params)
        timestep = transition(reward, terminated, truncated, self._observation(obs, env_state))
        return GymnaxState(env_state, key), timestep

    def _reads_key(self, state: GymnaxState, action: Array) -> bool:
        """Whether this env's `step_env` reads its key at all: CartPole's, Pendulum's and MinAtar Breakout's are
        deterministic and do not, Asterix's and the bsuite/misc envs with noise do. Traced once from shapes; a key
        that reaches any operation counts as read (nested programs included), so a doubt keeps the split."""
        if self._step_reads_key is None:
            def shape_of(x: ArrayLike) -> jax.ShapeDtypeStruct:
                return jax.ShapeDtypeStruct(jnp.shape(x), jnp.result_type(x))

            key, env_state, action = jax.tree_util.tree_map(shape_of, (state.key, state.env_state, action))
            program = jax.make_jaxpr(self._env.step_env)(key, env_state, action, self._params).jaxpr
            key_var = program.invars[0]
            # by identity: a program's operands include literals, which are no variable
            self._step_reads_key = any(var is key_var for var in program.outvars) or any(
                var is key_var for equation in program.eqns for var in equation.invars)
        return self._step_reads_key

    def _observation(self, obs: Array, env_state: EnvState) -> Observation:
        return self.flat_observation(obs, jnp.asarray(env_state.time, jnp.int32))
