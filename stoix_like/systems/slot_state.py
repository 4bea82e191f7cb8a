"""The learner state every (device, batch) slot starts from, for both families of systems.

On-policy (`rollout.initial_learner_state`) and off-policy (`off_policy.make_system_setup`) learners start the same way:
what was learnt or made once (params, optimiser states, a replay buffer, counters) is the same in every slot, while
each slot gets fresh observation statistics, its own envs and its own key. The slots' keys are split on the host
(`slot_keys`, jax's bits with no program); the rest runs inside each family's one jitted setup program
(`every_slot`), so that the resets and broadcasts compile as part of it rather than one by one. Split inside the
program, the keys' hashes were each a fusion for XLA to compile: ~0.05 s apiece on 2 cores.
"""

from __future__ import annotations

from typing import Callable, Dict, Tuple, TypeVar

import jax

from stoix_like.learner import normalization
from stoix_like.runtime import parallel
from stoix_like.envs.environment import Environment
from stoix_like.types import PyTree

StateT = TypeVar("StateT")


def slot_keys(env_key: jax.Array, step_key: jax.Array, update_batch_size: int, num_envs: int
              ) -> Tuple[jax.Array, jax.Array]:
    """Per slot: a key for each of its `num_envs` envs' reset, `(devices, batch, envs, 2)`, and its own key,
    `(devices, batch, 2)`. Host keys (`host_keys`) are split on the host."""
    return (parallel.split_key_per_slot(env_key, update_batch_size, num_envs),
            parallel.split_key_per_slot(step_key, update_batch_size))


def every_slot(state_type: Callable[..., StateT], env: Environment, normalize_observations: bool,
               env_keys: jax.Array, step_keys: jax.Array, shared: Dict[str, PyTree]) -> StateT:
    """`state_type(**shared, key=, env_state=, timestep=, obs_norm=)` laid out over (local device, batch slot):
    `shared` copied to every slot, each slot's envs reset with its `env_keys`, its key from `step_keys`
    (`slot_keys`)."""
    update_batch_size = step_keys.shape[1]
    obs_norm = normalization.init(env.observation_shape) if normalize_observations else ()
    env_state, timestep = parallel.reset_envs_per_slot(env, env_keys)
    shared, obs_norm = parallel.broadcast_to_devices_and_batch((shared, obs_norm), update_batch_size)
    return state_type(key=step_keys, env_state=env_state, timestep=timestep, obs_norm=obs_norm, **shared)
