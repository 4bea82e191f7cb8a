"""Evaluation: exactly `num_episodes` episodes, whatever the device count, each capped at the env's limit.

Episodes are spread over the local devices with padding; padded slots are masked out on the host, so the
statistics cover exactly the requested episodes.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, NamedTuple, Optional, Union

import jax
import jax.numpy as jnp
import numpy as np

from stoix_like.runtime import host_keys, parallel
from stoix_like.envs.environment import Environment
from stoix_like.envs.wrappers import STANDARD_EPISODE_METRICS, VmapWrapper
from stoix_like.runtime.threefry_lowering import unrolled_threefry
from stoix_like.types import Observation, PyTree

# Whatever a system's eval policy acts from, e.g. (actor params, observation statistics); it is the system's choice.
EvalParams = PyTree
# policy(eval_params, observation, key) -> env action, for a batch of observations
FeedForwardPolicy = Callable[[EvalParams, Observation, jax.Array], jax.Array]


class PolicyWithMemory(NamedTuple):
    """An eval policy that remembers (a recurrent one): each eval env carries its own memory through its episode.

    Every eval env plays exactly one episode from `initial_memory`, so the memory starts afresh with each
    episode; `act` also sees `timestep.first()` as each step's `reset`, as the learner's sequences do."""

    initial_memory: Callable[[int], PyTree]  # number of eval envs -> their memory, one row each
    # act(eval_params, observation, reset, memory, key) -> (env action, memory)
    act: Callable[[EvalParams, Observation, jax.Array, PyTree, jax.Array], tuple]


EvalPolicy = Union[FeedForwardPolicy, PolicyWithMemory]


def _with_memory(policy: EvalPolicy) -> PolicyWithMemory:
    """A feed-forward policy as one with an empty memory, so the evaluator runs both the same way."""
    if isinstance(policy, PolicyWithMemory):
        return policy
    return PolicyWithMemory(initial_memory=lambda num_envs: (),
                            act=lambda params, observation, reset, memory, key: (policy(params, observation, key),
                                                                                  memory))
# evaluate(eval_params, key) -> per-episode numpy arrays by statistic name ("episode_return", "episode_length",
# and a suite's own episode measures, e.g. Craftax's achievements)
Evaluate = Callable[[EvalParams, jax.Array], Dict[str, np.ndarray]]


class EpisodeStatistics(NamedTuple):
    episode_return: jax.Array
    episode_length: jax.Array
    suite_metrics: Dict[str, jax.Array]  # each as the episode's LAST step left it (envs/wrappers.with_suite_metrics)


def _suite_metrics(timestep) -> Dict[str, jax.Array]:
    metrics = timestep.extras.get("episode_metrics", {})
    return {name: value for name, value in metrics.items() if name not in STANDARD_EPISODE_METRICS}


def make_evaluator(eval_env: Environment, policy: EvalPolicy, num_episodes: int) -> "Evaluator":
    """Returns `evaluate(eval_params, key) -> dict of per-episode numpy arrays` (length `num_episodes`)."""
    n_local = parallel.local_device_count()
    per_device = -(-num_episodes // n_local)  # ceil: pad, then mask on the host
    batched_env = VmapWrapper(eval_env)
    max_steps = eval_env.max_episode_steps
    policy_with_memory = _with_memory(policy)

    def run_episodes(eval_params: EvalParams, key: jax.Array) -> EpisodeStatistics:
        reset_key, policy_key = jax.random.split(key)
        env_state, timestep = batched_env.reset(jax.random.split(reset_key, per_device))

        def not_finished(carry):
            done, t = carry[3], carry[-1]
            return jnp.logical_and(~jnp.all(done), t < max_steps)

        def one_step(carry):
            env_state, timestep, memory, done, returns, lengths, suite_metrics, t = carry
            action, memory = policy_with_memory.act(eval_params, timestep.observation, timestep.first(), memory,
                                                    jax.random.fold_in(policy_key, t))
            env_state, timestep = batched_env.step(env_state, action)
            # an episode's totals freeze at its first LAST step; later steps of that env are discarded
            returns = returns + jnp.where(done, 0.0, timestep.reward)
            lengths = lengths + jnp.where(done, 0, 1)
            suite_metrics = jax.tree_util.tree_map(lambda kept, now: jnp.where(done, kept, now), suite_metrics,
                                                   _suite_metrics(timestep))
            done = done | timestep.last()
            return env_state, timestep, memory, done, returns, lengths, suite_metrics, t + 1

        init = (env_state, timestep, policy_with_memory.initial_memory(per_device), jnp.zeros(per_device, bool), jnp.zeros(per_device, jnp.float32),
                jnp.zeros(per_device, jnp.int32), _suite_metrics(timestep), jnp.zeros((), jnp.int32))
        _, _, _, _, returns, lengths, suite_metrics, _ = jax.lax.while_loop(not_finished, one_step, init)
        return EpisodeStatistics(returns, lengths, suite_metrics)

    # the params go to every device as they are (in_axes None): no broadcast on the host before each evaluation
    return Evaluator(jax.pmap(run_episodes, axis_name=parallel.DEVICE_AXIS, in_axes=(None, 0)), n_local, num_episodes)


class Evaluator:
    """`evaluator(eval_params, key) -> dict of per-episode numpy arrays`, compiled at its first call, or ahead of
    it by `lower` and `compile_lowered` (which a run does beside the learner's compilation:
    experiment.compile_programs)."""

    def __init__(self, run_on_devices: Any, n_local: int, num_episodes: int):  # pmapped, then its Compiled
        self._run_on_devices = run_on_devices
        self._n_local = n_local
        self._num_episodes = num_episodes

    def lower(self, example_params: EvalParams) -> Optional[jax.stages.Lowered]:
        """The evaluator's program for params shaped like `example_params`, lowered as the learner is (its key
        splits hashed by straight-line Threefry code, threefry_lowering.py), to compile with `compile_lowered`,
        on any thread. None with several processes: an ahead-of-time program spanning processes would take
        global arrays (see parallel.compile_learner), so there the first call compiles."""
        if jax.process_count() > 1:
            return None
        with unrolled_threefry():
            return self._run_on_devices.lower(example_params, self._keys(host_keys.seed_key(0)))

    def compile_lowered(self, lowered: jax.stages.Lowered) -> None:
        """Compile what `lower` gave, so that the first evaluation only runs."""
        self._run_on_devices = lowered.compile()

    def _keys(self, key: jax.Array) -> jax.Array:
        return host_keys.split(key, self._n_local)

    def __call__(self, eval_params: EvalParams, key: jax.Array) -> Dict[str, np.ndarray]:
        stats = jax.device_get(self._run_on_devices(eval_params, self._keys(key)))
        per_episode = {"episode_return": stats.episode_return, "episode_length": stats.episode_length,
                       **stats.suite_metrics}
        return {name: np.asarray(value).reshape(-1)[:self._num_episodes] for name, value in per_episode.items()}


def actor_policy(actor_apply: Callable, greedy: bool) -> FeedForwardPolicy:
    """The eval policy of any system with a stochastic actor: eval params are `(actor_params, obs_norm)`."""
    from stoix_like.learner import normalization

    def policy(eval_params: EvalParams, observation: Observation, key: jax.Array) -> jax.Array:
        actor_params, obs_norm = eval_params
        dist = actor_apply(actor_params, normalization.normalize(obs_norm, observation))
        action = dist.mode() if greedy else dist.sample(key)
        return dist.to_env_action(action)

    return policy
