"""The one functional environment API every suite is adapted to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple, Union

import jax
import jax.numpy as jnp
import numpy as np

from stoix_like.types import Array, EnvState, Observation, PRNGKey, TimeStep


@dataclass(frozen=True)
class DiscreteActionSpace:
    num_actions: int

    @property
    def shape(self) -> Tuple[int, ...]:
        return ()


@dataclass(frozen=True)
class ContinuousActionSpace:
    """A box of actions; `low`/`high` are per-dimension bounds (finite)."""

    low: np.ndarray
    high: np.ndarray

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(np.shape(self.low))

    @property
    def action_dim(self) -> int:
        return int(np.prod(self.shape))

    def __hash__(self) -> int:  # numpy fields are unhashable; jit static args need a hash
        return hash((self.low.tobytes(), self.high.tobytes()))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ContinuousActionSpace)
            and np.array_equal(self.low, other.low)
            and np.array_equal(self.high, other.high)
        )


ActionSpace = Union[DiscreteActionSpace, ContinuousActionSpace]


class Environment:
    """A single (unbatched) functional environment.

    `reset(key) -> (state, TimeStep)` and `step(state, action) -> (state, TimeStep)` are pure and jittable.
    Adapters do not auto-reset: after a LAST step the caller (the AutoReset wrapper, or the evaluator)
    decides what happens. Termination gives `discount == 0`; truncation by the time limit gives a LAST step
    with `discount == 1`.
    """

    def reset(self, key: PRNGKey) -> Tuple[EnvState, TimeStep]:
        raise NotImplementedError

    def step(self, state: EnvState, action: Array) -> Tuple[EnvState, TimeStep]:
        raise NotImplementedError

    @property
    def action_space(self) -> ActionSpace:
        raise NotImplementedError

    @property
    def observation_shape(self) -> Tuple[int, ...]:
        """Shape of `Observation.agent_view` for one env."""
        raise NotImplementedError

    @property
    def max_episode_steps(self) -> int:
        """The time limit; evaluation stops any episode at this length."""
        raise NotImplementedError


class SuiteAdapter(Environment):
    """What every suite's adapter shares: action space, observation shape and time limit are fixed when it is
    built (its `__init__` sets `_action_space`, `_observation_shape` and `_max_episode_steps`), and the
    observation is the suite's, flattened to float32."""

    _action_space: ActionSpace
    _observation_shape: Tuple[int, ...]
    _max_episode_steps: int

    @property
    def action_space(self) -> ActionSpace:
        return self._action_space

    @property
    def observation_shape(self) -> Tuple[int, ...]:
        return self._observation_shape

    @property
    def max_episode_steps(self) -> int:
        return self._max_episode_steps

    def flat_observation(self, view: Array, step_count: Array, action_mask: Array | None = None) -> Observation:
        """`view` flattened to float32; `action_mask` defaults to every action legal (one True for continuous
        actions, so that the field always exists)."""
        if action_mask is None:
            num_actions = self._action_space.num_actions if isinstance(self._action_space, DiscreteActionSpace) else 1
            action_mask = jnp.ones((num_actions,), bool)
        return Observation(agent_view=jnp.ravel(view).astype(jnp.float32), action_mask=action_mask,
                           step_count=step_count)


class Wrapper(Environment):
    """Delegates everything to the wrapped env; subclasses override what they change."""

    def __init__(self, env: Environment):
        self._env = env

    def reset(self, key: PRNGKey) -> Tuple[EnvState, TimeStep]:
        return self._env.reset(key)

    def step(self, state: EnvState, action: Array) -> Tuple[EnvState, TimeStep]:
        return self._env.step(state, action)

    @property
    def action_space(self) -> ActionSpace:
        return self._env.action_space

    @property
    def observation_shape(self) -> Tuple[int, ...]:
        return self._env.observation_shape

    @property
    def max_episode_steps(self) -> int:
        return self._env.max_episode_steps

    @property
    def unwrapped(self) -> Environment:
        return getattr(self._env, "unwrapped", self._env)


def example_timestep(env: Environment) -> TimeStep:
    """A zero TimeStep of one env (no batch axis), with the shapes and dtypes the env's reset gives.

    Shapes come from `jax.eval_shape`, so nothing runs: an eager reset would cost seconds on brax.
    """
    _, timestep = jax.eval_shape(env.reset, jax.random.PRNGKey(0))
    return jax.tree_util.tree_map(lambda x: jnp.zeros(x.shape, x.dtype), timestep)


def example_observation(env: Environment) -> Observation:
    """A zero Observation with a batch axis of 1, for initialising networks (shapes only, nothing runs)."""
    return jax.tree_util.tree_map(lambda x: x[None], example_timestep(env).observation)
