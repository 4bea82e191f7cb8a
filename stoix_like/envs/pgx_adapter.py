"""pgx (2.6.0) games behind the stoix_like Environment API.

pgx has no auto-reset and no time limit of its own for most games: `terminated` is the game's end (discount 0);
the adapter counts steps and truncates at `max_episode_steps`, as does pgx's own `truncated` (discount 1).
Every game has a legal-action mask, which becomes `Observation.action_mask`; an illegal action anyway ends the
game with pgx's penalty.

Which reward the learner sees: single-agent games (`2048`, `minatar-*`) have one player. In a two-player game
(`tic_tac_toe`, `connect_four`, `othello`, ...) one policy plays both sides (self-play): each observation is
pgx's, from the view of the player to move, and each step's reward is the reward of the player who made that
move. The reply's reward to the other side is not subtracted from the mover's step, so a learner that treats
the game as one MDP learns to make winning moves, not to prevent the opponent's; a search agent's negamax value
(the other player's value, negated) is what a full two-player treatment needs.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp

from stoix_like.envs.environment import DiscreteActionSpace, SuiteAdapter, import_suite
from stoix_like.envs.wrappers import restart, transition
from stoix_like.errors import ConfigError
from stoix_like.types import Array, EnvState, PRNGKey, TimeStep

DEFAULT_MAX_EPISODE_STEPS = 1000


class PgxState(NamedTuple):
    game_state: EnvState  # pgx's State (observation, legal_action_mask, current_player, rewards, terminated, ...)
    step_count: Array  # int32
    key: PRNGKey  # stochastic games (2048, MinAtar) take a key per step


class PgxAdapter(SuiteAdapter):
    """A pgx game, one policy playing every side, with pgx's legal-action mask.

    Args:
        name: a pgx env id, e.g. "2048", "minatar-breakout", "tic_tac_toe".
        max_episode_steps: the time limit; reaching it truncates. None: 1000.
        observation_layout: "flat", or "image" for the games whose observation is a board (height, width, planes).
        **env_kwargs: passed to `pgx.make` (e.g. MinAtar's sticky_action_prob).
    """

    def __init__(self, name: str, max_episode_steps: Optional[int] = None, observation_layout: str = "flat",
                 **env_kwargs: object):
        pgx = import_suite("pgx", "pgx")
        available = pgx.available_envs()
        if name not in available:
            raise ConfigError(f"Unknown pgx environment {name!r}. Available: {', '.join(sorted(available))}")
        self._env = pgx.make(name, **env_kwargs)
        self.name = name
        self._max_episode_steps = DEFAULT_MAX_EPISODE_STEPS if max_episode_steps is None else int(max_episode_steps)
        self._action_space = DiscreteActionSpace(num_actions=int(self._env.num_actions))
        observation = jax.eval_shape(self._env.init, jax.random.PRNGKey(0)).observation
        self._set_observation_layout(observation_layout, tuple(observation.shape))

    def reset(self, key: PRNGKey) -> Tuple[PgxState, TimeStep]:
        key, init_key = jax.random.split(key)
        game_state = self._env.init(init_key)
        step_count = jnp.zeros((), jnp.int32)
        return PgxState(game_state, step_count, key), restart(self._observation(game_state, step_count))

    def step(self, state: PgxState, action: Array) -> Tuple[PgxState, TimeStep]:
        key, step_key = jax.random.split(state.key)
        mover = state.game_state.current_player
        game_state = self._env.step(state.game_state, action, step_key)
        step_count = state.step_count + 1
        truncated = game_state.truncated | (step_count >= self._max_episode_steps)
        timestep = transition(game_state.rewards[mover], game_state.terminated, truncated,
                              self._observation(game_state, step_count))
        return PgxState(game_state, step_count, key), timestep

    def _observation(self, game_state: EnvState, step_count: Array):
        return self.flat_observation(game_state.observation, step_count,
                                     jnp.asarray(game_state.legal_action_mask, bool))
