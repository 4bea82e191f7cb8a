"""The learner state every (device, batch) slot starts from, for both families of systems.

On-policy (`rollout.initial_learner_state`) and off-policy (`off_policy.learner_setup`) learners start the same way:
what was learnt or made once (params, optimiser states, a replay buffer, counters) is the same in every slot, while
each slot gets fresh observation statistics, its own envs and its own key. Called inside each family's one jitted
setup program, so that the resets, broadcasts and key splits compile as part of it rather than one by one.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, TypeVar

import jax

from stoix_like import normalization, parallel
from stoix_like.envs.environment import Environment

StateT = TypeVar("StateT")


def every_slot(state_type: Callable[..., StateT], env: Environment, normalize_observations: bool,
               update_batch_size: int, num_envs: int, env_key: jax.Array, step_key: jax.Array,
               shared: Dict[str, Any]) -> StateT:
    """`state_type(**shared, key=, env_state=, timestep=, obs_norm=)` laid out over (local device, batch slot):
    `shared` copied to every slot, `num_envs` envs reset per slot from `env_key`, a key per slot from `step_key`."""
    obs_norm = normalization.init(env.observation_shape) if normalize_observations else ()
    env_state, timestep = parallel.reset_envs_per_slot(env, env_key, update_batch_size, num_envs)
    shared, obs_norm = parallel.broadcast_to_devices_and_batch((shared, obs_norm), update_batch_size)
    return state_type(key=parallel.split_key_per_slot(step_key, update_batch_size), env_state=env_state,
                      timestep=timestep, obs_norm=obs_norm, **shared)
