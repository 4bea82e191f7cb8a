"""popjax: our own small POPGym-style partially observable tasks, pure JAX, behind the Environment API.

POPGym (Morad et al., 2023) is a suite of tasks that only a policy with memory solves; its reference
implementation is numpy. These are written here, as pure functions of a state, so that they jit, vmap and run
inside the learner like any gymnax env, and so that their rules are ours to test (tests/test_popjax.py).

RepeatPrevious (`env=popjax/repeat_previous`): each step shows one of `num_symbols` symbols, one-hot, drawn
uniformly and independently; from step `lag` on, an action is rewarded for naming the symbol shown `lag` steps
earlier. Each correct answer pays 1 / (horizon - lag) and a wrong one 0, so an episode's return is the share of
its answers that were right: 1 for a perfect memory, 1 / num_symbols (`memoryless_return`) at best without one,
since the symbol shown now says nothing about an earlier one. The episode ends at its `horizon`: a termination
(discount 0), since the task is over and there is nothing to bootstrap; `env.max_episode_steps` below the
horizon cuts it short as a truncation, as in every suite.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp

from stoix_like.envs.environment import DiscreteActionSpace, SuiteAdapter
from stoix_like.envs.wrappers import restart, transition
from stoix_like.errors import ConfigError
from stoix_like.types import Array, JSONValue, Observation, PRNGKey, TimeStep


class RepeatPreviousState(NamedTuple):
    symbols: Array  # (horizon,) int32: the whole episode's symbols, drawn at reset, so a step needs no key
    time: Array  # () int32: the steps taken in this episode


class RepeatPrevious(SuiteAdapter):
    """Name the symbol shown `lag` steps ago (module docstring)."""

    def __init__(self, name: str = "RepeatPrevious", max_episode_steps: Optional[int] = None,
                 observation_layout: str = "flat", num_symbols: int = 4, lag: int = 2, horizon: int = 16):
        if num_symbols < 2:
            raise ConfigError(f"env.kwargs.num_symbols={num_symbols} must be at least 2: with one symbol nothing "
                              f"needs remembering.")
        if not 1 <= lag < horizon:
            raise ConfigError(f"env.kwargs.lag={lag} must be at least 1 and below env.kwargs.horizon={horizon}, so "
                              f"that some step is rewarded.")
        self.name = name
        self.num_symbols, self.lag, self.horizon = int(num_symbols), int(lag), int(horizon)
        self._action_space = DiscreteActionSpace(num_actions=self.num_symbols)
        self._set_observation_layout(observation_layout, (self.num_symbols,))
        self._max_episode_steps = self.horizon if max_episode_steps is None else min(int(max_episode_steps),
                                                                                     self.horizon)

    @property
    def memoryless_return(self) -> float:
        """The best expected return without memory: each answer is then a guess, right 1 in num_symbols."""
        return 1.0 / self.num_symbols

    def reset(self, key: PRNGKey) -> Tuple[RepeatPreviousState, TimeStep]:
        symbols = jax.random.randint(key, (self.horizon,), 0, self.num_symbols, jnp.int32)
        state = RepeatPreviousState(symbols, jnp.zeros((), jnp.int32))
        return state, restart(self._observation(state))

    def step(self, state: RepeatPreviousState, action: Array) -> Tuple[RepeatPreviousState, TimeStep]:
        asked = state.time >= self.lag
        # before step `lag` there is nothing to repeat; the index is clipped so that the (unused) read stays in range
        remembered = state.symbols[jnp.maximum(state.time - self.lag, 0)]
        reward = jnp.where(asked & (action == remembered), 1.0 / (self.horizon - self.lag), 0.0)
        state = state._replace(time=state.time + 1)
        timestep = transition(reward, state.time >= self.horizon, state.time >= self._max_episode_steps,
                              self._observation(state))
        return state, timestep

    def _observation(self, state: RepeatPreviousState) -> Observation:
        # after the last step the episode is over and its observation is never acted on; the clip keeps it defined
        shown = state.symbols[jnp.minimum(state.time, self.horizon - 1)]
        return self.flat_observation(jax.nn.one_hot(shown, self.num_symbols), state.time)


# scenario.name -> task; a new task is a class above and a row here
TASKS = {"RepeatPrevious": RepeatPrevious}


def make_task(name: str, **kwargs: JSONValue) -> SuiteAdapter:
    """The factory's entry point (envs/factory.py): the task `scenario.name` names, built with `env.kwargs`."""
    if name not in TASKS:
        raise ConfigError(f"Unknown popjax task {name!r}. Available: {', '.join(sorted(TASKS))}")
    return TASKS[name](name, **kwargs)
