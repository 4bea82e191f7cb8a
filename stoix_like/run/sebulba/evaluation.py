"""Sebulba's evaluation: exactly `num_episodes` episodes on CPU envs of their own, never the actors'.

One env per episode, all stepped as one batch: each env's first episode counts, whatever it does after it ends,
so the statistics cover exactly the requested episodes (as the JAX evaluator's masked padding does). An episode
here is what the episode metrics count: a whole game, even where training ends the learner's episode at a lost
life (cpu_vector_env's docstring).
"""

from __future__ import annotations

from typing import Callable, Dict

import jax
import numpy as np

from stoix_like.envs.cpu_vector_env import CpuVectorEnv
from stoix_like.errors import ConfigError
from stoix_like.learner.evaluator import EvalPolicy, PolicyWithMemory
from stoix_like.types import HostTree

# evaluate(eval params, key) -> per-episode numpy arrays ("episode_return", "episode_length")
Evaluate = Callable[[HostTree, jax.Array], Dict[str, np.ndarray]]


def make_cpu_evaluator(envs: CpuVectorEnv, eval_policy: EvalPolicy) -> Evaluate:
    """`envs`: one env per episode (their count is the episodes per evaluation); `eval_policy` is the system's."""
    if isinstance(eval_policy, PolicyWithMemory):
        raise ConfigError("arch=sebulba evaluates feed-forward policies only; recurrent systems run with arch=anakin.")
    policy = jax.jit(eval_policy)

    def evaluate(eval_params: HostTree, key: jax.Array) -> Dict[str, np.ndarray]:
        reset_key, policy_key = jax.random.split(key)
        timestep = envs.reset(int(jax.random.randint(reset_key, (), 0, 2 ** 31 - 1)))
        done = np.zeros(envs.num_envs, bool)
        returns = np.zeros(envs.num_envs, np.float32)
        lengths = np.zeros(envs.num_envs, np.int32)
        for t in range(envs.max_episode_steps):  # the time limit ends every episode by then
            action = np.asarray(policy(eval_params, timestep.observation, jax.random.fold_in(policy_key, t)))
            timestep = envs.step(action)
            metrics = timestep.extras["episode_metrics"]
            # the game's end, which the metrics follow (an Atari life lost is a learner's episode, not a game)
            ended_now = np.asarray(metrics["is_terminal_step"], bool) & ~done
            returns = np.where(ended_now, metrics["episode_return"], returns)
            lengths = np.where(ended_now, metrics["episode_length"], lengths)
            done |= ended_now
            if done.all():
                break
        return {"episode_return": returns, "episode_length": lengths}

    return evaluate
