"""Sebulba's actors: the params they act with (versioned, refreshed after every update) and one actor thread.

An actor thread steps its own batch of CPU envs for `rollouts` fixed-length rollouts, acting with the latest
params on its actor device, and hands each rollout to the learner through its bounded queue. Each rollout says
which params version it was collected with, so the learner can measure the policy lag (its update index minus
that version). The thread ends after its last rollout: the budget is a whole number of rollouts per thread.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Callable, Dict, List, NamedTuple, Tuple

import jax
import numpy as np

from stoix_like.learner import normalization
from stoix_like.envs.cpu_vector_env import CpuVectorEnv
from stoix_like.run.sebulba.threads import Supervisor
from stoix_like.types import Observation, PyTree, RolloutStep


class VersionedParams:
    """The latest actor params, one copy per actor device, and the number of updates that produced them."""

    def __init__(self, devices: List[jax.Device]):
        self._devices = devices
        self._lock = threading.Lock()
        self._version = -1
        self._by_device: Dict[jax.Device, PyTree] = {}

    def publish(self, actor_params: PyTree, version: int) -> None:
        """Copies `actor_params` to every actor device (asynchronously: the learner does not wait for the copy)."""
        copies = {device: jax.device_put(actor_params, device) for device in self._devices}
        with self._lock:
            self._by_device, self._version = copies, version

    def latest(self, device: jax.Device) -> Tuple[int, PyTree]:
        with self._lock:
            return self._version, self._by_device[device]


class Rollout(NamedTuple):
    """One actor thread's fixed-length rollout, host numpy, time-major `(T, envs, ...)`."""

    steps: RolloutStep
    params_version: int  # the updates done when its params were published
    seconds: float  # the thread's time for it, acting and stepping envs (the wait for a queue slot excluded)


# act_step(actor params, observation, key) -> (next key, action to store, env action, recorded extras)
ActStep = Callable[[PyTree, Observation, jax.Array], Tuple[jax.Array, jax.Array, jax.Array, PyTree]]


def make_act_step(act: Callable) -> ActStep:
    """One compiled call per env step: split the key, normalise the observation, act (Anakin's `act`)."""

    @jax.jit
    def act_step(actor_params: PyTree, observation: Observation, key: jax.Array):
        params, obs_norm = actor_params
        key, policy_key = jax.random.split(key)
        action, env_action, recorded = act(params, normalization.normalize(obs_norm, observation), policy_key)
        return key, action, env_action, recorded

    return act_step


def run_actor(supervisor: Supervisor, envs: CpuVectorEnv, act_step: ActStep, params: VersionedParams,
              rollouts_out: "queue.Queue[Rollout]", device: jax.Device, key: jax.Array, env_seed: int, rollouts: int,
              rollout_length: int) -> None:
    """An actor thread's whole life: `rollouts` rollouts of `rollout_length` steps of `envs`, each put on
    `rollouts_out`. Returns early, leaving the rest undone, once the run stops."""
    key = jax.device_put(key, device)
    timestep = envs.reset(env_seed)
    for _ in range(rollouts):
        start = time.perf_counter()
        version, actor_params = params.latest(device)
        steps = []
        for _ in range(rollout_length):
            if supervisor.stop.is_set():
                return
            key, action, env_action, recorded = act_step(actor_params, timestep.observation, key)
            action, env_action, recorded = jax.device_get((action, env_action, recorded))
            next_timestep = envs.step(np.asarray(env_action))
            steps.append(RolloutStep(
                observation=timestep.observation, action=action, reward=next_timestep.reward,
                discount=next_timestep.discount, done=next_timestep.last(),
                next_observation=next_timestep.extras["next_obs"],
                episode_metrics=next_timestep.extras["episode_metrics"], policy_extras=recorded))
            timestep = next_timestep
        trajectory = jax.tree_util.tree_map(lambda *leaves: np.stack(leaves), *steps)
        supervisor.put(rollouts_out, Rollout(trajectory, version, time.perf_counter() - start))
