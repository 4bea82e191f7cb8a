"""`make(env_config) -> (train_env, eval_env)`: the one place that turns an env config into environments."""

from __future__ import annotations

import importlib
from typing import Dict, Mapping, Tuple, cast

from omegaconf import DictConfig, OmegaConf

from stoix_like.envs.environment import Environment
from stoix_like.envs.wrappers import AutoReset, EpisodeMetrics, NextObservation, ObservedIndices
from stoix_like.errors import ConfigError
from stoix_like.types import JSONValue

# suite -> (module, adapter class). Modules are imported on demand so that a gymnax run never imports brax. The
# suites after jumanji are optional extras of the same name (pyproject.toml); a missing one is named in one line.
_ADAPTERS = {
    "gymnax": ("stoix_like.envs.gymnax_adapter", "GymnaxAdapter"),
    "brax": ("stoix_like.envs.brax_adapter", "BraxAdapter"),
    "jumanji": ("stoix_like.envs.jumanji_adapter", "JumanjiAdapter"),
    "navix": ("stoix_like.envs.navix_adapter", "NavixAdapter"),
    "xminigrid": ("stoix_like.envs.xminigrid_adapter", "XMiniGridAdapter"),
    "craftax": ("stoix_like.envs.craftax_adapter", "CraftaxAdapter"),
    "pgx": ("stoix_like.envs.pgx_adapter", "PgxAdapter"),
    "playground": ("stoix_like.envs.playground_adapter", "PlaygroundAdapter"),
    "popjax": ("stoix_like.envs.popjax", "make_task"),  # our own POPGym-style tasks, pure JAX, no dependency
}
# Suites of CPU envs: stepped by Sebulba's actor threads (arch=sebulba, envs/cpu_vector_env.py), never by `make`.
CPU_SUITES = ("gymnasium", "envpool")
AVAILABLE_SUITES = tuple(_ADAPTERS) + CPU_SUITES


def make(env_config: Mapping[str, JSONValue]) -> Tuple[Environment, Environment]:
    """Builds the train and eval envs that `env_config` describes.

    Args:
        env_config: a DictConfig or dict with `suite`, `scenario.name`, `kwargs` (passed to the adapter) and
            optionally `max_episode_steps`, the one time-limit key of every suite (null or absent: the suite's own),
            and `observation_layout` ("flat", the default, or "image" for a CNN torso), `resets_per_step` (null or
            absent: every finished env resets on its own; see `AutoReset`) and `observed_indices`, the flat
            observation's entries the agent sees (null or absent: all).

    Returns:
        (train_env, eval_env), both unbatched (wrap them in `VmapWrapper`).
        train_env = AutoReset(EpisodeMetrics(adapter)); eval_env = NextObservation(EpisodeMetrics(adapter)):
        the same TimeStep structure (`extras` = {"episode_metrics", "next_obs"}), but eval never auto-resets.
    """
    suite = env_config["suite"]
    if suite not in _ADAPTERS:
        raise ConfigError(f"Unknown env suite {suite!r}. Available suites: {', '.join(AVAILABLE_SUITES)}")
    if suite in CPU_SUITES:
        raise ConfigError(f"env.suite={suite!r} steps CPU envs from actor threads: run it with arch=sebulba.")
    module_name, class_name = _ADAPTERS[suite]
    adapter_class = getattr(importlib.import_module(module_name), class_name)

    kwargs = _to_plain_dict(env_config["kwargs"] or {})  # `kwargs: {}` may be written `kwargs:` (null)
    adapter = adapter_class(env_config["scenario"]["name"], max_episode_steps=env_config.get("max_episode_steps"),
                            observation_layout=env_config.get("observation_layout") or "flat", **kwargs)
    observed_indices = env_config.get("observed_indices")
    if observed_indices is not None:
        adapter = ObservedIndices(adapter, tuple(int(index) for index in observed_indices))
    return (AutoReset(EpisodeMetrics(adapter), resets_per_step=env_config.get("resets_per_step")),
            NextObservation(EpisodeMetrics(adapter)))


def _to_plain_dict(kwargs: Mapping[str, JSONValue]) -> Dict[str, JSONValue]:
    # Suites check argument types (e.g. tuples vs OmegaConf ListConfig), so they get plain Python containers.
    if isinstance(kwargs, DictConfig):
        # a DictConfig becomes a dict; its keys are strings, since they are passed on as keyword arguments
        return cast(Dict[str, JSONValue], OmegaConf.to_container(kwargs, resolve=True))
    return dict(kwargs)
