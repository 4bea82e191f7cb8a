"""XLand-MiniGrid (`xminigrid` 0.9.3) environments behind the stoix_like Environment API.

xminigrid's `Environment.step` does not auto-reset (its gym-style wrappers do), and it already separates the
two ends: discount 0 on reaching the goal, discount 1 at its `max_steps`, which the adapter sets to ours. Its
reward is `1 - 0.9 * steps / max_steps` on success, as in MiniGrid.

Single-task MiniGrid envs (`MiniGrid-Empty-8x8`, `MiniGrid-DoorKey-8x8`, ...) need nothing more. An XLand env
(`XLand-MiniGrid-R1-9x9`, ...) plays a ruleset: a goal, rules and the objects placed at reset. xminigrid's
`load_benchmark` downloads its rulesets at run time, which fails offline, so the adapter either builds a
ruleset here (`ruleset_goal`, `ruleset_objects`: a goal on one object, no rules) or reads a benchmark file
already on disk (`benchmark`, `ruleset_id`), and refuses a download in one line.
Observations: the agent's egocentric view, (view_size, view_size, 2) (tile, colour), flattened or kept.
"""

from __future__ import annotations

import os
from typing import NamedTuple, Optional, Sequence, Tuple

import jax.numpy as jnp

from stoix_like.envs.environment import DiscreteActionSpace, SuiteAdapter, import_suite
from stoix_like.envs.wrappers import restart, transition
from stoix_like.errors import ConfigError
from stoix_like.types import Array, EnvState, PRNGKey, StepType, TimeStep

# ruleset_goal's first word -> xminigrid's goal class: the agent picks the object up (checked on "pick up"), or
# ends a "forward" move beside it.
GOALS = {"agent_hold": "AgentHoldGoal", "agent_near": "AgentNearGoal"}


class XMiniGridState(NamedTuple):
    suite_timestep: EnvState  # xminigrid's TimeStep (it holds the env state and its step count)


class XMiniGridAdapter(SuiteAdapter):
    """An xminigrid env without auto-reset.

    Args:
        name: an xminigrid id, e.g. "MiniGrid-Empty-8x8" or "XLand-MiniGrid-R1-9x9".
        max_episode_steps: the time limit (xminigrid's `max_steps`). None: the env's own.
        observation_layout: "flat", or "image" for the (view, view, 2) egocentric grid.
        ruleset_goal: XLand only, a ruleset built here: "GOAL TILE COLOUR", GOAL one of agent_hold,
            agent_near (e.g. "agent_near ball red").
        ruleset_objects: XLand only, further objects placed at reset besides the goal's ("square green", ...).
        benchmark: XLand only, an xminigrid benchmark name whose file is already in $XLAND_MINIGRID_DATA.
        ruleset_id: with `benchmark`, which of its rulesets to play.
        **env_params: passed to `xminigrid.make` (EnvParams fields, e.g. view_size).
    """

    def __init__(self, name: str, max_episode_steps: Optional[int] = None, observation_layout: str = "flat",
                 ruleset_goal: Optional[str] = None, ruleset_objects: Sequence[str] = (),
                 benchmark: Optional[str] = None, ruleset_id: int = 0, **env_params: object):
        xminigrid = import_suite("xminigrid", "xminigrid")
        available = xminigrid.registered_environments()
        if name not in available:
            raise ConfigError(f"Unknown xminigrid environment {name!r}. Available: {', '.join(sorted(available))}")
        if max_episode_steps is not None:
            env_params["max_steps"] = int(max_episode_steps)
        self._env, params = xminigrid.make(name, **env_params)
        is_xland = name.startswith("XLand-MiniGrid")
        if not is_xland and (ruleset_goal or ruleset_objects or benchmark):
            raise ConfigError(f"{name} is a single-task MiniGrid env: env.kwargs.ruleset_goal, ruleset_objects and "
                              "benchmark are for XLand-MiniGrid-* envs.")
        if is_xland:
            params = params.replace(ruleset=_ruleset(name, ruleset_goal, ruleset_objects, benchmark, ruleset_id))
        self._params = params
        self.name = name
        self._max_episode_steps = int(params.max_steps)
        self._action_space = DiscreteActionSpace(num_actions=int(self._env.num_actions(params)))
        self._set_observation_layout(observation_layout, tuple(self._env.observation_shape(params)))

    def reset(self, key: PRNGKey) -> Tuple[XMiniGridState, TimeStep]:
        suite_timestep = self._env.reset(self._params, key)
        return XMiniGridState(suite_timestep), restart(self._observation(suite_timestep))

    def step(self, state: XMiniGridState, action: Array) -> Tuple[XMiniGridState, TimeStep]:
        suite_timestep = self._env.step(self._params, state.suite_timestep, action)
        last = suite_timestep.step_type == StepType.LAST  # xminigrid uses the same 0/1/2 codes
        terminated = last & (suite_timestep.discount == 0.0)
        timestep = transition(suite_timestep.reward, terminated, last & ~terminated, self._observation(suite_timestep))
        return XMiniGridState(suite_timestep), timestep

    def _observation(self, suite_timestep: EnvState):
        return self.flat_observation(suite_timestep.observation,
                                     jnp.asarray(suite_timestep.state.step_num, jnp.int32))


def _ruleset(name: str, goal: Optional[str], objects: Sequence[str], benchmark: Optional[str], ruleset_id: int):
    from xminigrid import benchmarks
    from xminigrid.core import goals
    from xminigrid.core.rules import EmptyRule
    from xminigrid.types import RuleSet

    if benchmark is not None:
        if goal or objects:
            raise ConfigError("env.kwargs.benchmark and env.kwargs.ruleset_goal/ruleset_objects both choose the "
                              "ruleset: set one of them.")
        file_name = benchmarks.NAME2HFFILENAME.get(benchmark)
        if file_name is None:
            raise ConfigError(f"Unknown XLand benchmark {benchmark!r}. Known: {', '.join(benchmarks.NAME2HFFILENAME)}")
        path = os.path.join(benchmarks.DATA_PATH, file_name)
        if not os.path.exists(path):
            raise ConfigError(f"XLand benchmark {benchmark!r} is not on disk ({path}); xminigrid would download it "
                              "at run time, which is refused here: put the file there, or build a ruleset with "
                              "env.kwargs.ruleset_goal.")
        return benchmarks.load_benchmark_from_path(path).get_ruleset(int(ruleset_id))
    if goal is None:
        raise ConfigError(f"{name} plays a ruleset: set env.kwargs.ruleset_goal (e.g. 'agent_near ball red') or "
                          "env.kwargs.benchmark (a benchmark file already on disk).")
    goal_kind, *goal_tile = goal.split()
    if goal_kind not in GOALS:
        raise ConfigError(f"env.kwargs.ruleset_goal={goal!r}: the goal must be one of {', '.join(GOALS)}.")
    goal_tile_code = _tile(goal_tile, "ruleset_goal")
    placed = [goal_tile_code] + [_tile(obj.split(), "ruleset_objects") for obj in objects]
    return RuleSet(
        goal=getattr(goals, GOALS[goal_kind])(tile=goal_tile_code).encode(),
        rules=EmptyRule().encode()[None, ...],
        init_tiles=jnp.stack(placed),
    )


def _tile(words: Sequence[str], key: str) -> Array:
    from xminigrid.core.constants import Colors, Tiles

    if len(words) != 2 or not hasattr(Tiles, words[0].upper()) or not hasattr(Colors, words[1].upper()):
        raise ConfigError(f"env.kwargs.{key}: {' '.join(words)!r} is not 'TILE COLOUR' (e.g. 'ball red'); tiles: "
                          f"ball, square, pyramid, key, hex, star, ...; colours: red, green, blue, purple, yellow, ...")
    return jnp.asarray((getattr(Tiles, words[0].upper()), getattr(Colors, words[1].upper())), jnp.uint8)
