"""Batches of CPU environments (gymnasium's vector envs, envpool) behind one adapter for Sebulba's actor threads.

`reset(seed) -> TimeStep` and `step(actions) -> TimeStep` give numpy TimeSteps in the repository's one convention
(types.TimeStep), so the learner cannot tell a CPU env's trajectory from a JAX suite's:

- `discount == 0` only where the episode truly terminated; a time-limit truncation is a LAST step with
  `discount == 1`, so returns bootstrap from the true final observation;
- an env that ended is reset within the same step (as the JAX suites' AutoReset wrapper does): `observation` is the
  new episode's first observation, `extras["next_obs"]` the observation the step really produced;
- `extras["episode_metrics"]` holds the keys envs/wrappers.EpisodeMetrics gives (episode_return, episode_length,
  is_terminal_step, ended_by_termination). They measure the *game*, which may differ from the learner's episode:
  an Atari game in envpool with `episodic_life` ends the learner's episode at every lost life (discount 0) and
  `reward_clip` clips the rewards it learns from, while the metrics add up the game's own score (envpool's
  `info["reward"]`) until the game is over, so a logged return is always a game score;
- `env.observation_layout=image` keeps a (height, width, channels) grid: envpool's Atari frames, stacked first
  (stack, height, width) uint8, are moved channels last and scaled to [0, 1] floats for the CNN torsos.

Evaluation plays the game as it is (`make_cpu_envs(..., evaluation=True)`): envpool's `episodic_life` and
`reward_clip` are switched off where the task has them, so an evaluation episode is one whole game scored in the
game's own points, whatever the training envs do.

Gymnasium runs in its SAME_STEP autoreset mode, on purpose. In gymnasium 1.x's default NEXT_STEP mode the step after
an episode's end is a reset step that ignores its action and yields no transition: it would spend budget steps on
nothing and put fake transitions in every trajectory, to be masked by everyone downstream. SAME_STEP resets in the
step that ended the episode and hands the true final observation over in `info["final_obs"]`, which is exactly
AutoReset's `extras["next_obs"]`.
"""

from __future__ import annotations

from typing import Dict, Mapping, NamedTuple, Optional, Tuple, cast

import numpy as np

from stoix_like.envs.environment import ActionSpace, ContinuousActionSpace, DiscreteActionSpace, import_suite
from stoix_like.envs.factory import CPU_SUITES
from stoix_like.errors import ConfigError
from stoix_like.types import Array, JSONValue, Observation, StepType, TimeStep


def _host(x: np.ndarray) -> Array:
    """TimeStep's fields are typed as jax arrays; here they stay numpy on the host until the learner's pmap takes
    a whole rollout at once."""
    return cast(Array, x)


class CpuStep(NamedTuple):
    """What a suite's step gave, rows per env. An ended env's row of `observations` is already its next episode's
    first observation; `final_observations` holds the pre-reset one (any value in rows that did not end)."""

    observations: np.ndarray
    rewards: np.ndarray  # what the learner learns from (clipped, where the suite clips)
    terminated: np.ndarray
    truncated: np.ndarray
    final_observations: np.ndarray
    # the game's own reward and game end, for the episode metrics; None: `rewards` and the learner's episode end
    score: Optional[np.ndarray] = None
    game_over: Optional[np.ndarray] = None


class CpuVectorEnv:
    """`num_envs` CPU envs stepped together; leaves of every TimeStep lead with `(num_envs, ...)`.

    Subclasses supply `_reset(seed) -> observations` and `_step(actions) -> CpuStep`. With `image=True` the
    observations are kept as grids (`channels_first` ones moved channels last, uint8 ones scaled to [0, 1]).
    """

    num_envs: int
    action_space: ActionSpace
    observation_shape: Tuple[int, ...]
    max_episode_steps: int

    def __init__(self, image: bool = False, channels_first: bool = False) -> None:
        self._image, self._channels_first = image, channels_first
        self._episode_return = np.zeros(0, np.float32)
        self._episode_length = np.zeros(0, np.int32)

    def _view_shape(self, suite_shape: Tuple[int, ...]) -> Tuple[int, ...]:
        """`observation_shape` (one env's agent_view) from the suite's observation shape."""
        if not self._image:
            return (int(np.prod(suite_shape)),)
        if len(suite_shape) != 3:
            raise ConfigError(f"env.observation_layout=image keeps (height, width, channels) grids, but this task "
                              f"observes shape {tuple(suite_shape)}: use env.observation_layout=flat.")
        shape = tuple(int(d) for d in suite_shape)
        return shape[1:] + shape[:1] if self._channels_first else shape

    def _reset(self, seed: int) -> np.ndarray:
        raise NotImplementedError

    def _step(self, actions: np.ndarray) -> CpuStep:
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
        observations, rewards, terminated, truncated, final_observations, score, game_over = self._step(actions)
        terminated, rewards = np.asarray(terminated, bool), np.asarray(rewards, np.float32)
        truncated = np.asarray(truncated, bool)
        ended = terminated | truncated
        # the metrics follow the game: its own score until it is over (the learner's episode where they coincide)
        game_ended = ended if game_over is None else np.asarray(game_over, bool) | truncated
        self._episode_return = self._episode_return + (rewards if score is None else np.asarray(score, np.float32))
        self._episode_length = self._episode_length + 1
        # the step produced `final_observations` where an episode ended, `observations` elsewhere
        produced = np.where(ended.reshape((-1,) + (1,) * (observations.ndim - 1)), final_observations, observations)
        next_obs = self._observation(produced, self._episode_length.copy())
        metrics = self._metrics(game_ended, game_ended & ~truncated)
        self._episode_return = np.where(game_ended, 0.0, self._episode_return).astype(np.float32)
        self._episode_length = np.where(game_ended, 0, self._episode_length).astype(np.int32)
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
        return Observation(agent_view=_host(self._agent_view(observations)),
                           action_mask=_host(np.ones((self.num_envs, num_actions), bool)),
                           step_count=_host(step_count))

    def _agent_view(self, observations: np.ndarray) -> np.ndarray:
        if not self._image:
            return np.asarray(observations, np.float32).reshape((self.num_envs, -1))
        view = np.moveaxis(observations, 1, -1) if self._channels_first else observations
        if view.dtype == np.uint8:  # pixels: [0, 255] -> [0, 1]
            return np.multiply(view, np.float32(1.0 / 255.0), dtype=np.float32)
        return np.asarray(view, np.float32)

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
                 vectorization_mode: str = "sync", image: bool = False, **kwargs: object):
        super().__init__(image=image)
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
        self.observation_shape = self._view_shape(self._envs.single_observation_space.shape)
        self.max_episode_steps = int(limit)

    def _reset(self, seed: int) -> np.ndarray:
        observations, _ = self._envs.reset(seed=seed)
        return observations

    def _step(self, actions: np.ndarray) -> CpuStep:
        observations, rewards, terminated, truncated, info = self._envs.step(np.asarray(actions))
        final = observations
        if "final_obs" in info:  # an object array: the final observation where `_final_obs`, None elsewhere
            final = observations.copy()
            for index in np.flatnonzero(info["_final_obs"]):
                final[index] = info["final_obs"][index]
        return CpuStep(observations, rewards, terminated, truncated, final)

    def close(self) -> None:
        self._envs.close()


class EnvpoolVectorEnv(CpuVectorEnv):
    """envpool's gymnasium API. envpool resets an ended env on the *next* step (its action ignored); this adapter
    turns that into the same-step convention: after an episode ends it resets that env's row at once (a
    `reset(env_id)` call), so every budget step is a real transition.

    Atari's `episodic_life` is done here, not by envpool: envpool would continue the game after a lost life only
    in its own next-step reset, while an explicit `reset(env_id)` starts a new game (lives back to full), so a
    game would never end. envpool runs whole games; a step where `info["lives"]` drops is the learner's episode
    end (terminated: discount 0), and the next life goes on from that step's observation. The episode metrics
    add up the game's unclipped `info["reward"]` until the game is over (the module's docstring).
    `evaluation=True` switches `episodic_life` and `reward_clip` off, where the task has them."""

    def __init__(self, name: str, num_envs: int, max_episode_steps: Optional[int] = None, seed: int = 0,
                 image: bool = False, evaluation: bool = False, **kwargs: object):
        super().__init__(image=image, channels_first=True)  # envpool's pixels stack frames first
        envpool = import_suite("envpool", "sebulba")
        options = dict(kwargs)
        if max_episode_steps is not None:
            options["max_episode_steps"] = int(max_episode_steps)
        try:
            known = envpool.make_spec(name).config._fields
        except (KeyError, ValueError, AssertionError) as error:
            raise ConfigError(f"env.scenario.name={name!r} is not an envpool task ({error}).") from None
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise ConfigError(f"env.kwargs.{unknown[0]} is not an option of envpool's {name}; its options: "
                              f"{', '.join(sorted(set(known) - _ENVPOOL_INTERNAL))}.")
        if evaluation:
            options.update({option: False for option in _TRAINING_ONLY if option in known})
        self._episodic_life = bool(options.pop("episodic_life", False))
        if "episodic_life" in known:
            options["episodic_life"] = False  # done here (the class docstring says why)
        self._envs = envpool.make_gymnasium(name, num_envs=num_envs, seed=seed, **options)
        self.num_envs = num_envs
        self.action_space = _action_space_of(self._envs.action_space)
        self.observation_shape = self._view_shape(self._envs.observation_space.shape)
        self.max_episode_steps = int(self._envs.spec.config.max_episode_steps)
        # the task's options as they act: envpool's, with the episodic_life this adapter applies
        self.options: Dict[str, object] = {field: getattr(self._envs.spec.config, field) for field in known}
        if "episodic_life" in known:
            self.options["episodic_life"] = self._episodic_life
        self._lives = np.zeros(num_envs, np.int64)

    def _reset(self, seed: int) -> np.ndarray:
        del seed  # envpool is seeded when built
        observations, info = self._envs.reset()
        self._lives = np.asarray(info.get("lives", np.zeros(self.num_envs)), np.int64).copy()
        return observations

    def _step(self, actions: np.ndarray) -> CpuStep:
        observations, rewards, game_over, truncated, info = self._envs.step(np.asarray(actions))
        game_over, truncated = np.asarray(game_over, bool), np.asarray(truncated, bool)
        terminated = game_over
        if self._episodic_life:  # a lost life ends the learner's episode; the game goes on
            lives = np.asarray(info["lives"], np.int64)
            terminated = game_over | (lives < self._lives)
            self._lives = lives.copy()
        ended = np.flatnonzero(game_over | truncated)  # whole games, reset now
        final = observations
        if len(ended):
            final = observations.copy()
            observations = observations.copy()
            fresh, fresh_info = self._envs.reset(np.asarray(ended, np.int32))
            observations[ended] = fresh
            if "lives" in fresh_info:
                self._lives[ended] = np.asarray(fresh_info["lives"], np.int64)
        # Atari reports the game's own, unclipped reward beside the (maybe clipped) one it returns
        score = np.asarray(info["reward"], np.float32) if "reward" in info else None
        return CpuStep(observations, rewards, terminated, truncated, final, score=score, game_over=game_over)

    def close(self) -> None:
        self._envs.close()


# envpool options that shape what the learner sees but not the game: evaluation turns them off
_TRAINING_ONLY = ("episodic_life", "reward_clip")
# envpool's config fields that are set by this adapter or are paths, not task options
_ENVPOOL_INTERNAL = {"num_envs", "batch_size", "num_threads", "max_num_players", "thread_affinity_offset",
                     "base_path", "seed", "env_seed", "gym_reset_return_info"}


def make_cpu_envs(env_config: Mapping[str, JSONValue], num_envs: int, seed: int,
                  evaluation: bool = False) -> CpuVectorEnv:
    """`num_envs` CPU envs of `env_config` (suite gymnasium or envpool), not yet reset. `evaluation=True`: the envs
    play the game as it is (envpool's `episodic_life` and `reward_clip` off), for the evaluator."""
    suite = str(env_config["suite"])
    kwargs = dict(env_config.get("kwargs") or {})
    limit = env_config.get("max_episode_steps")
    name = str(env_config["scenario"]["name"])
    image = env_config.get("observation_layout") == "image"
    if suite == "gymnasium":
        return GymnasiumVectorEnv(name, num_envs, limit, image=image, **kwargs)
    if suite == "envpool":
        return EnvpoolVectorEnv(name, num_envs, limit, seed=seed, image=image, evaluation=evaluation, **kwargs)
    raise ConfigError(f"env.suite={suite!r} is not a CPU suite; arch=sebulba steps one of: {', '.join(CPU_SUITES)}.")
