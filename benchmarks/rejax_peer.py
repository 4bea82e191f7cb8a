"""rejax, the peer our CartPole benchmarks compare with: its algorithms built on gymnax 1.0, learning timed alone.

rejax installs with `pip install --no-deps rejax` beside our pins. Where it is not installed, `rejax_learning`
returns None and the benchmarks run ours alone.
"""

from __future__ import annotations

import time
from typing import Any, Dict, Optional

import jax
import jax.numpy as jnp
import numpy as np


class GymnaxFiveTupleStep:
    """gymnax 1.0's `step` returns (obs, state, reward, terminated, truncated, info); rejax 0.1.3 unpacks the
    5-tuple of gymnax 0.0.x, whose `done` already folded truncation in. Everything else is the wrapped env."""

    def __init__(self, env):
        self._env = env

    def __getattr__(self, name):
        if name == "_env":  # not yet set (copy.deepcopy builds the object without __init__)
            raise AttributeError(name)
        return getattr(self._env, name)

    def step(self, key, state, action, params=None):
        obs, state, reward, terminated, truncated, info = self._env.step(key, state, action, params)
        return obs, state, reward, terminated | truncated, info


def rejax_algorithm(algo_cls_name: str, config: Dict[str, Any], env_name: str = "CartPole-v1",
                    evaluations: bool = False):
    """rejax's `algo_cls_name` (e.g. "PPO", "DQN", "PQN") on the gymnax env `env_name` with `config`. Without
    `evaluations` its evaluations during training are switched off: learning is timed alone, as ours is, and the
    final policy evaluated afterwards. With them, rejax's own evaluator (128 episodes every `eval_freq` steps) runs
    inside its program, as in a user's run of it."""
    import gymnax
    import rejax

    env, env_params = gymnax.make(env_name)
    algo = getattr(rejax, algo_cls_name).create(env=GymnaxFiveTupleStep(env), env_params=env_params,
                                                skip_initial_evaluation=not evaluations, **config)
    return algo if evaluations else algo.replace(eval_callback=lambda algo, train_state, key: jnp.zeros(()))


class RejaxLearning:
    """A rejax algorithm compiled once; `learn_budget()` trains it from `seed` (rejax's `train` is one program for
    the whole budget) and returns the seconds, as `loop_timing.OurLearning` does. `learning_steps` are the env steps
    that run covers: for an off-policy algorithm its buffer fill is among them (ours fills in setup, untimed)."""

    def __init__(self, algo, seed: int):
        self._algo, self._seed, self.learning_steps = algo, seed, int(algo.total_timesteps)
        self._key = jax.random.PRNGKey(seed)
        start = time.perf_counter()
        self._train = jax.jit(algo.train).lower(self._key).compile()
        self.compile_seconds = time.perf_counter() - start
        self._train_state = None

    def learn_budget(self) -> float:
        start = time.perf_counter()
        self._train_state, _ = jax.block_until_ready(self._train(self._key))
        return time.perf_counter() - start

    def final_return(self, eval_episodes: int) -> float:
        from rejax.evaluate import evaluate

        _, returns = evaluate(self._algo.make_act(self._train_state), jax.random.PRNGKey(self._seed + 1),
                              self._algo.env, self._algo.env_params, eval_episodes,
                              self._algo.env_params.max_steps_in_episode)
        return float(np.mean(returns))


def rejax_learning(algo_cls_name: str, config: Dict[str, Any], seed: int) -> Optional[RejaxLearning]:
    """`rejax_algorithm(algo_cls_name, config)` compiled for `seed`, or None where rejax is not installed."""
    try:
        import rejax  # noqa: F401
    except ImportError:
        return None
    return RejaxLearning(rejax_algorithm(algo_cls_name, config), seed)
