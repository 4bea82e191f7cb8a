"""jumanji (1.1) environments behind the stoix_like Environment API.

jumanji marks an episode that hits its own `time_limit` with `termination()`, i.e. discount 0 (Snake does:
`done = ~is_valid | snake_completed | (step_count >= time_limit)`), which would stop returns from
bootstrapping on what is really a truncation. So where the env takes a `time_limit` argument the adapter
rebuilds it with a limit one step past ours and truncates itself: every LAST that jumanji then emits is a true
end of episode, and ours keeps discount 1. Envs with no time limit (Game2048) get one from
`max_episode_steps`.

A multi-discrete action (Sudoku's (row, column, digit), BinPack's (space, item), Minesweeper's (row, column),
RubiksCube's (face, depth, direction)) becomes one discrete action over the joint choices, row-major, and the
suite's joint action mask (shaped like its `num_values`) is flattened the same way; a mask per component
(Connector's and Cleaner's, one row per agent) has no joint form and is refused.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from stoix_like.envs.environment import DiscreteActionSpace, SuiteAdapter
from stoix_like.envs.wrappers import restart, transition
from stoix_like.errors import ConfigError
from stoix_like.types import Array, EnvState, Observation, PRNGKey, StepType, TimeStep

DEFAULT_MAX_EPISODE_STEPS = 2000

# Fields of a jumanji observation that do not go into the flat agent_view: they have fields of their own.
_NOT_IN_AGENT_VIEW = ("action_mask", "step_count")


class JumanjiState(NamedTuple):
    env_state: EnvState
    step_count: Array  # int32; not every jumanji env counts steps


class JumanjiAdapter(SuiteAdapter):
    """A jumanji env with a flat float32 agent_view, jumanji's action mask and a truncating time limit.

    Args:
        name: a jumanji id, e.g. "Snake-v1".
        max_episode_steps: the time limit. Default: the env's own `time_limit` if it has one, else 2000.
        observation_layout: "flat" (the observation's fields are concatenated into one vector).
        **env_kwargs: passed to `jumanji.make`.
    """

    def __init__(self, name: str, max_episode_steps: Optional[int] = None, observation_layout: str = "flat",
                 **env_kwargs: object):
        import jumanji  # lazily: importing stoix_like must not import jumanji
        from jumanji import specs

        available = jumanji.registered_environments()
        if name not in available:
            raise ConfigError(f"Unknown jumanji environment {name!r}. Available: {', '.join(sorted(available))}")
        env = jumanji.make(name, **env_kwargs)

        suite_time_limit = getattr(env, "time_limit", None)
        if max_episode_steps is None:
            max_episode_steps = suite_time_limit if suite_time_limit is not None else DEFAULT_MAX_EPISODE_STEPS
        self._max_episode_steps = int(max_episode_steps)
        if "time_limit" in inspect.signature(type(env).__init__).parameters:
            env = jumanji.make(name, **{**env_kwargs, "time_limit": self._max_episode_steps + 1})
        self._env = env
        self.name = name

        action_spec = env.action_spec
        # (): one discrete choice; otherwise the components of a multi-discrete action, joined row-major
        self._action_components: Tuple[int, ...] = ()
        if isinstance(action_spec, specs.MultiDiscreteArray):
            self._action_components = tuple(int(n) for n in np.asarray(action_spec.num_values))
            num_actions = int(np.prod(self._action_components))
        elif isinstance(action_spec, specs.DiscreteArray):
            num_actions = int(action_spec.num_values)
        else:
            raise ConfigError(f"jumanji {name!r} has a {type(action_spec).__name__} action spec; only DiscreteArray "
                              "and MultiDiscreteArray are supported")
        self._action_space = DiscreteActionSpace(num_actions=num_actions)
        suite_view = jax.eval_shape(lambda key: self._suite_view(self._env.reset(key)[1].observation),
                                    jax.random.PRNGKey(0))
        self._set_observation_layout(observation_layout, tuple(suite_view.shape))
        mask = jax.eval_shape(lambda key: _fields(self._env.reset(key)[1].observation).get("action_mask"),
                              jax.random.PRNGKey(0))
        if mask is not None and int(np.prod(mask.shape)) != num_actions:
            raise ConfigError(f"jumanji {name!r} masks each action component apart (mask {tuple(mask.shape)}, "
                              f"components {self._action_components}); its joint actions have no mask here")

    def reset(self, key: PRNGKey) -> Tuple[JumanjiState, TimeStep]:
        env_state, suite_timestep = self._env.reset(key)
        step_count = jnp.zeros((), jnp.int32)
        return JumanjiState(env_state, step_count), restart(self._observation(suite_timestep.observation, step_count))

    def step(self, state: JumanjiState, action: Array) -> Tuple[JumanjiState, TimeStep]:
        if self._action_components:
            action = jnp.stack(jnp.unravel_index(action, self._action_components)).astype(jnp.int32)
        env_state, suite_timestep = self._env.step(state.env_state, action)
        step_count = state.step_count + 1
        suite_last = suite_timestep.step_type == StepType.LAST  # jumanji uses the same 0/1/2 codes
        # A LAST from jumanji is a true end (its own time limit sits past ours), unless it used truncation().
        terminated = suite_last & (suite_timestep.discount == 0.0)
        truncated = (suite_last & ~terminated) | (step_count >= self._max_episode_steps)
        observation = self._observation(suite_timestep.observation, step_count)
        return JumanjiState(env_state, step_count), transition(suite_timestep.reward, terminated, truncated, observation)

    def _observation(self, suite_observation: object, step_count: Array) -> Observation:
        fields = _fields(suite_observation)
        action_mask = None  # every action legal where the suite has no mask
        if "action_mask" in fields and isinstance(self._action_space, DiscreteActionSpace):
            action_mask = jnp.asarray(fields["action_mask"], bool).reshape(self._action_space.num_actions)
        return self.flat_observation(self._suite_view(suite_observation), step_count, action_mask)

    @staticmethod
    def _suite_view(suite_observation: object) -> Array:
        """Every field but the mask and the step count, flattened and concatenated."""
        return jnp.concatenate([
            jnp.ravel(leaf).astype(jnp.float32)
            for field_name, value in _fields(suite_observation).items()
            if field_name not in _NOT_IN_AGENT_VIEW
            for leaf in jax.tree_util.tree_leaves(value)
        ])


def _fields(observation: object) -> dict:
    """The named fields of a jumanji observation (a NamedTuple or a dataclass), in declaration order."""
    if hasattr(observation, "_asdict"):
        return dict(observation._asdict())
    if dataclasses.is_dataclass(observation):
        return {field.name: getattr(observation, field.name) for field in dataclasses.fields(observation)}
    return {"observation": observation}
