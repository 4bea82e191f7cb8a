"""Batches of CPU environments (gymnasium's vector envs, envpool) behind one adapter for Sebulba's actor threads.

`reset(seed) -> TimeStep` and `step(actions) -> TimeStep` give numpy TimeSteps in the repository's one convention
(types.TimeStep), so the learner cannot tell a CPU env's trajectory from a JAX suite's:

- `discount == 0` only where the episode truly terminated; a time-limit truncation is a LAST step with
  `discount == 1`, so returns bootstrap from the true final observation;
- an env that ended is reset within the same step (as the JAX suites' AutoReset wrapper does): `observation` is the
  new episode's first observation, `extras["next_obs"]` the observation the step really produced;
- `extras["episode_metrics"]` holds the keys envs/wrappers.EpisodeMetrics gives (episode_return, episode_length,
  is_terminal_step, ended_by_termination).

Gymnasium runs in its SAME_STEP autoreset mode, on purpose. In gymnasium 1.x's default NEXT_STEP mode the step after
an episode's end is a reset step that ignores its action and yields no transition: it would spend budget steps on
nothing and put fake transitions in every trajectory, to be masked by everyone downstream. SAME_STEP resets in the
step that ended the episode and hands the true final observation over in `info["final_obs"]`, which is exactly
AutoReset's `extras["next_obs"]`.
"""

from __future__ import annotations

from typing import Dict, Mapping, Optional, Tuple, cast

import numpy as np

from stoix_like.envs.environment import ActionSpace, ContinuousActionSpace, DiscreteActionSpace, import_suite
from stoix_like.envs.factory import CPU_SUITES
from stoix_like.errors import ConfigError
from stoix_like.types import Array, JSONValue, Observation, StepType, TimeStep


def _host(x: np.ndarray) -> Array:
    """TimeStep's fields are typed as jax arrays; here they stay numpy on the host until the learner's pmap takes
    a whole rollout at once."""
    return cast(Array, x)


class CpuVectorEnv:
    """`num_envs` CPU envs stepped together; leaves of every TimeStep lead with `(num_envs, ...)`.

    Subclasses supply `_reset(seed) -> observations` and `_step(actions) -> (observations, rewards, terminated,
    truncated, final observations)`, where an ended env's row of `observations` is already its next episode's first
    observation and `final observations` holds the pre-reset one (any value in rows that did not end).
    """

    num_envs: int
    action_space: ActionSpace
    observation_shape: Tuple[int, ...]
    max_episode_steps: int

    def __init__(self) -> None:
        self._episode_return = np.zeros(0, np.float32)
        self._episode_length = np.zeros(0, np.int32)

    def _reset(self, seed: int) -> np.ndarray:
        raise NotImplementedError

    def _step(self, actions: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def reset(self, seed: int) -> TimeStep:
        observations = self._reset(seed)
        self._episode_return = np.zeros(self.num_envs, np.float32)
        self._episode_length = np.zeros(self.num_envs, np.int32)
        step_count = np.zeros(self.num_envs, np.int32)
        observation = self._observation(observations, step_count)
        no = np.zeros(self.num_envs, bool)
        return TimeStep(step_type=_host(np.full(self.num_envs, StepType.FIRST, np.int8)),
                        reward=_host(np.zeros(self.num_envs, np.float32)),
                        discount=_host(np.ones(self.num_envs, np.float32)),
                        observation=observation,
                        extras={"next_obs": observation, "episode_metrics": self._metrics(no, no)})

    def step(self, actions: np.ndarray) -> TimeStep:
        observations, rewards, terminated, truncated, final_observations = self._step(actions)
        terminated, rewards = np.asarray(terminated, bool), np.asarray(rewards, np.float32)
        ended = terminated | np.asarray(truncated, bool)
        self._episode_return = self._episode_return + rewards
        self._episode_length = self._episode_length + 1
        # the step produced `final_observations` where an episode ended, `observations` elsewhere
        produced = np.where(ended.reshape((-1,) + (1,) * (observations.ndim - 1)), final_observations, observations)
        next_obs = self._observation(produced, self._episode_length.copy())
        metrics = self._metrics(ended, terminated)
        self._episode_return = np.where(ended, 0.0, self._episode_return).astype(np.float32)
        self._episode_length = np.where(ended, 0, self._episode_length).astype(np.int32)
        return TimeStep(
            step_type=_host(np.where(ended, StepType.LAST, StepType.MID).astype(np.int8)),
            reward=_host(rewards),
            # a truncated episode keeps discount 1: its last observation is bootstrapped from, not treated as terminal
            discount=_host(np.where(terminated, 0.0, 1.0).astype(np.float32)),
            observation=self._observation(observations, self._episode_length.copy()),
            extras={"next_obs": next_obs, "episode_metrics": metrics},
        )

    def _observation(self, observations: np.ndarray, step_count: np.ndarray) -> Observation:
        num_actions = self.action_space.num_actions if isinstance(self.action_space, DiscreteActionSpace) else 1
        return Observation(agent_view=_host(np.asarray(observations, np.float32).reshape((self.num_envs, -1))),
                           action_mask=_host(np.ones((self.num_envs, num_actions), bool)),
                           step_count=_host(step_count))

    def _metrics(self, ended: np.ndarray, terminated: np.ndarray) -> Dict[str, np.ndarray]:
        return {"episode_return": self._episode_return.copy(), "episode_length": self._episode_length.copy(),
                "is_terminal_step": ended.copy(), "ended_by_termination": ended & terminated}


def _action_space_of(space: object) -> ActionSpace:
    """A gymnasium space as the repository's action space (Discrete or Box only)."""
    import gymnasium

    if isinstance(space, gymnasium.spaces.Discrete):
        return DiscreteActionSpace(int(space.n))
    if isinstance(space, gymnasium.spaces.Box) and np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high)):
        return ContinuousActionSpace(np.asarray(space.low, np.float32), np.asarray(space.high, np.float32))
    raise ConfigError(f"action space {space} is not supported: Sebulba's CPU envs take Discrete or bounded Box actions.")


class GymnasiumVectorEnv(CpuVectorEnv):
    """gymnasium.make_vec in SAME_STEP autoreset mode (see the module's docstring for why)."""

    def __init__(self, name: str, num_envs: int, max_episode_steps: Optional[int] = None,
                 vectorization_mode: str = "sync", **kwargs: object):
        super().__init__()
        gymnasium = import_suite("gymnasium", "gymnasium")
        from gymnasium.vector import AutoresetMode

        try:
            spec = gymnasium.spec(name)
        except gymnasium.error.Error as error:
            raise ConfigError(f"env.scenario.name={name!r} is not a gymnasium environment ({error}).") from None
        limit = max_episode_steps if max_episode_steps is not None else spec.max_episode_steps
        if limit is None:
            raise ConfigError(f"gymnasium's {name} has no time limit: set env.max_episode_steps.")
        self._envs = gymnasium.make_vec(name, num_envs=num_envs, vectorization_mode=vectorization_mode,
                                        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
                                        max_episode_steps=int(limit), **kwargs)
        self.num_envs = num_envs
        self.action_space = _action_space_of(self._envs.single_action_space)
        self.observation_shape = (int(np.prod(self._envs.single_observation_space.shape)),)
        self.max_episode_steps = int(limit)

    def _reset(self, seed: int) -> np.ndarray:
        observations, _ = self._envs.reset(seed=seed)
        return observations

    def _step(self, actions: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        observations, rewards, terminated, truncated, info = self._envs.step(np.asarray(actions))
        final = observations
        if "final_obs" in info:  # an object array: the final observation where `_final_obs`, None elsewhere
            final = observations.copy()
            for index in np.flatnonzero(info["_final_obs"]):
                final[index] = info["final_obs"][index]
        return observations, rewards, terminated, truncated, final

    def close(self) -> None:
        self._envs.close()


class EnvpoolVectorEnv(CpuVectorEnv):
    """envpool's gymnasium API. envpool resets an ended env on the *next* step (its action ignored); this adapter
    turns that into the same-step convention: after an episode ends it resets that env's row at once (a
    `reset(env_id)` call), so every budget step is a real transition."""

    def __init__(self, name: str, num_envs: int, max_episode_steps: Optional[int] = None, seed: int = 0,
                 **kwargs: object):
        super().__init__()
        envpool = import_suite("envpool", "sebulba")
        options = dict(kwargs)
        if max_episode_steps is not None:
            options["max_episode_steps"] = int(max_episode_steps)
        self._envs = envpool.make_gymnasium(name, num_envs=num_envs, seed=seed, **options)
        self.num_envs = num_envs
        self.action_space = _action_space_of(self._envs.action_space)
        self.observation_shape = (int(np.prod(self._envs.observation_space.shape)),)
        self.max_episode_steps = int(self._envs.spec.config.max_episode_steps)

    def _reset(self, seed: int) -> np.ndarray:
        del seed  # envpool is seeded when built
        observations, _ = self._envs.reset()
        return observations

    def _step(self, actions: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        observations, rewards, terminated, truncated, _ = self._envs.step(np.asarray(actions))
        ended = np.flatnonzero(np.asarray(terminated) | np.asarray(truncated))
        final = observations
        if len(ended):
            final = observations.copy()
            observations = observations.copy()
            fresh, _ = self._envs.reset(np.asarray(ended, np.int32))
            observations[ended] = fresh
        return observations, rewards, terminated, truncated, final

    def close(self) -> None:
        self._envs.close()


def make_cpu_envs(env_config: Mapping[str, JSONValue], num_envs: int, seed: int) -> CpuVectorEnv:
    """`num_envs` CPU envs of `env_config` (suite gymnasium or envpool), not yet reset."""
    suite = str(env_config["suite"])
    kwargs = dict(env_config.get("kwargs") or {})
    limit = env_config.get("max_episode_steps")
    name = str(env_config["scenario"]["name"])
    if suite == "gymnasium":
        return GymnasiumVectorEnv(name, num_envs, limit, **kwargs)
    if suite == "envpool":
        return EnvpoolVectorEnv(name, num_envs, limit, seed=seed, **kwargs)
    raise ConfigError(f"env.suite={suite!r} is not a CPU suite; arch=sebulba steps one of: {', '.join(CPU_SUITES)}.")
