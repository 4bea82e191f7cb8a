"""The one functional environment API every suite is adapted to."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Tuple, Union

import jax
import jax.numpy as jnp
import numpy as np

from stoix_like.runtime import host_keys
from stoix_like.errors import ConfigError
from stoix_like.types import Array, EnvState, Observation, PRNGKey, TimeStep

# env.observation_layout: "flat" ravels the suite's observation to a vector (an MLP torso's input); "image" keeps
# a grid observation (height, width, channels) as it is, for a CNN torso (networks/torsos.py CNNTorso).
OBSERVATION_LAYOUTS = ("flat", "image")


def import_suite(module: str, suite: str) -> ModuleType:
    """Imports an optional suite's package, or refuses in one line naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ConfigError(f"env suite {suite!r} needs its optional dependencies ({error.name or module} is not "
                          f"installed): pip install -e \".[{suite}]\" (or \".[suites]\" for every suite).") from None


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
    built (its `__init__` sets `_action_space` and `_max_episode_steps`, and calls `_set_observation_layout`), and
    the observation is the suite's as float32, flattened or kept as an image (`env.observation_layout`)."""

    _action_space: ActionSpace
    _observation_shape: Tuple[int, ...]
    _max_episode_steps: int
    _keep_image: bool = False

    @property
    def action_space(self) -> ActionSpace:
        return self._action_space

    @property
    def observation_shape(self) -> Tuple[int, ...]:
        return self._observation_shape

    @property
    def max_episode_steps(self) -> int:
        return self._max_episode_steps

    def _set_observation_layout(self, layout: str, suite_shape: Tuple[int, ...]) -> None:
        """Fixes `observation_shape` from the suite's own observation shape; "image" needs a grid
        (height, width, channels), since a CNN torso reads nothing else."""
        if layout not in OBSERVATION_LAYOUTS:
            raise ConfigError(f"env.observation_layout={layout!r} is not one of {', '.join(OBSERVATION_LAYOUTS)}.")
        name = getattr(self, "name", type(self).__name__)
        if layout == "image" and len(suite_shape) != 3:
            raise ConfigError(f"env.observation_layout=image needs a (height, width, channels) observation; "
                              f"{name} observes shape {tuple(suite_shape)}: use env.observation_layout=flat.")
        self._keep_image = layout == "image"
        self._observation_shape = tuple(int(d) for d in suite_shape) if self._keep_image else (
            int(np.prod(suite_shape)),)

    def flat_observation(self, view: Array, step_count: Array, action_mask: Array | None = None) -> Observation:
        """`view` as float32, flattened unless the layout is "image"; `action_mask` defaults to every action legal
        (one True for continuous actions, so that the field always exists)."""
        if action_mask is None:
            num_actions = self._action_space.num_actions if isinstance(self._action_space, DiscreteActionSpace) else 1
            action_mask = jnp.ones((num_actions,), bool)
        view = jnp.asarray(view, jnp.float32)
        return Observation(agent_view=view if self._keep_image else jnp.ravel(view), action_mask=action_mask,
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

    Shapes come from `jax.eval_shape`, so nothing runs: an eager reset would cost seconds on brax. The zeros are
    numpy's: an eager `jnp.zeros` compiles a program for each new shape and dtype (~0.15 s of a run's start).
    """
    _, timestep = jax.eval_shape(env.reset, host_keys.seed_key(0))
    return jax.tree_util.tree_map(lambda x: np.zeros(x.shape, x.dtype), timestep)


def example_observation(env: Environment) -> Observation:
    """A zero Observation with a batch axis of 1, for initialising networks (shapes only, nothing runs)."""
    return jax.tree_util.tree_map(lambda x: x[None], example_timestep(env).observation)
