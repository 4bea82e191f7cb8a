"""Craftax (1.6.1) environments behind the stoix_like Environment API.

Craftax's `is_terminal` folds its time limit (`params.max_timesteps`) into `done` with death (and, in full
Craftax, beating the final boss), which would zero the discount at a time limit. So the adapter sets Craftax's
limit one step past ours and truncates itself: every `done` Craftax then reports is a true end.
The no-auto-reset env classes are used; `step_env` is called with a key the adapter carries.

Achievements are episode metrics (`with_suite_metrics`): `achievements_unlocked`, how many of the game's
achievements (22 in Classic, 67 in full Craftax) the episode unlocked, `achievement_rate`, that count over the
total, and `achievement_<name>`, 1 if that one was unlocked. The evaluator logs them per episode.
"""

from __future__ import annotations

from typing import Dict, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp

from stoix_like.envs.environment import DiscreteActionSpace, SuiteAdapter, import_suite
from stoix_like.envs.wrappers import restart, transition, with_suite_metrics
from stoix_like.errors import ConfigError
from stoix_like.types import Array, EnvState, PRNGKey, TimeStep

SCENARIOS = ("Craftax-Classic-Symbolic-v1", "Craftax-Classic-Pixels-v1", "Craftax-Symbolic-v1", "Craftax-Pixels-v1")


class CraftaxState(NamedTuple):
    env_state: EnvState  # Craftax's EnvState; its `timestep` counts the episode's steps
    key: PRNGKey  # Craftax transitions take a key


class CraftaxAdapter(SuiteAdapter):
    """A Craftax env without auto-reset, its achievements logged per episode.

    Args:
        name: one of SCENARIOS.
        max_episode_steps: the time limit; reaching it truncates. None: Craftax's own `max_timesteps` (10,000 in
            Classic, 100,000 in full Craftax).
        observation_layout: "flat"; "image" only for the Pixels envs (the Symbolic ones are already vectors).
        **env_params: Craftax EnvParams fields (e.g. day_length).
    """

    def __init__(self, name: str, max_episode_steps: Optional[int] = None, observation_layout: str = "flat",
                 **env_params: object):
        craftax_env = import_suite("craftax.craftax_env", "craftax")
        if name not in SCENARIOS:
            raise ConfigError(f"Unknown Craftax environment {name!r}. Available: {', '.join(SCENARIOS)}")
        self._env = craftax_env.make_craftax_env_from_name(name, auto_reset=False)
        params = self._env.default_params.replace(**env_params)
        self._max_episode_steps = int(params.max_timesteps if max_episode_steps is None else max_episode_steps)
        self._params = params.replace(max_timesteps=self._max_episode_steps + 1)
        self.name = name
        constants = import_suite(f"craftax.{'craftax_classic' if 'Classic' in name else 'craftax'}.constants",
                                 "craftax")
        self._achievement_names = tuple(a.name.lower() for a in sorted(constants.Achievement, key=lambda a: a.value))
        self._action_space = DiscreteActionSpace(num_actions=int(self._env.action_space(self._params).n))
        self._set_observation_layout(observation_layout, tuple(self._env.observation_space(self._params).shape))

    def reset(self, key: PRNGKey) -> Tuple[CraftaxState, TimeStep]:
        key, reset_key = jax.random.split(key)
        obs, env_state = self._env.reset_env(reset_key, self._params)
        return CraftaxState(env_state, key), self._with_achievements(restart(self._observation(obs, env_state)),
                                                                     env_state)

    def step(self, state: CraftaxState, action: Array) -> Tuple[CraftaxState, TimeStep]:
        key, step_key = jax.random.split(state.key)
        obs, env_state, reward, terminated, _ = self._env.step_env(step_key, state.env_state, action, self._params)
        truncated = env_state.timestep >= self._max_episode_steps
        timestep = transition(reward, terminated, truncated, self._observation(obs, env_state))
        return CraftaxState(env_state, key), self._with_achievements(timestep, env_state)

    def _observation(self, obs: Array, env_state: EnvState):
        return self.flat_observation(obs, jnp.asarray(env_state.timestep, jnp.int32))

    def _with_achievements(self, timestep: TimeStep, env_state: EnvState) -> TimeStep:
        unlocked = jnp.asarray(env_state.achievements, jnp.float32)  # (num achievements,), 0/1, for this episode
        metrics: Dict[str, Array] = {"achievements_unlocked": unlocked.sum(), "achievement_rate": unlocked.mean()}
        metrics.update({f"achievement_{name}": unlocked[i] for i, name in enumerate(self._achievement_names)})
        return with_suite_metrics(timestep, metrics)
