"""Our systems timed through the experiment loop's own steps: setup, compile and learning, each apart.

The benchmarks call `experiment.set_up`, `compile_learner`, `learn_once` and `make_evaluate` rather than a loop of
their own, so what they time is what `python -m experiments.<algo>` runs, minus the in-loop evaluations.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, Mapping, Tuple

import jax
import jax.numpy as jnp
import numpy as np
# jax's first QR lowering in a process (orthogonal weight init, ours and rejax's alike) imports scipy.linalg for its
# LAPACK (~0.15 s): imported here, before anything is timed, so that it counts in neither contender's setup or compile
import scipy.linalg  # noqa: F401

from stoix_like import envs as envs_lib
from stoix_like import experiment


def time_learning(learner_setup: Callable, config: Any, seed: int, eval_episodes: int,
                  untimed_calls: int = 0) -> Dict[str, float]:
    """One seed's whole budget: setup and compile seconds, learning throughput (learn calls only, warm-up
    excluded), the final params' mean return over `eval_episodes` episodes (NaN for 0: not evaluated) and the
    budget's steps. The first `untimed_calls` learn calls run but count in neither the time nor the steps: a GPU's
    first run of a program also builds its command buffers (CUDA graphs), which is no part of steady learning."""
    budget = experiment.make_budget(config)
    train_env, eval_env = envs_lib.make(config.env)
    start = time.perf_counter()
    prepared = experiment.set_up(learner_setup, train_env, config, budget, [seed])  # replay warm-up included
    jax.block_until_ready(prepared.fresh_state)
    setup_seconds = time.perf_counter() - start
    learn, compile_seconds = experiment.compile_learner(prepared.system, prepared.fresh_state, num_seeds=1)

    learner_state, learn_seconds = prepared.fresh_state, 0.0
    for call in range(budget.num_evaluation):
        learned = experiment.learn_once(learn, learner_state)
        learner_state = learned.learner_state
        learn_seconds += learned.seconds if call >= untimed_calls else 0.0

    final_return = float("nan")
    if eval_episodes:
        evaluate = experiment.make_evaluate(eval_env, prepared.system.eval_policy, eval_episodes)
        eval_params = experiment.eval_params_of(prepared.system, learner_state, 0, num_seeds=1)
        final_return = float(np.mean(evaluate(eval_params, prepared.eval_keys[0])["episode_return"]))
    learning_steps = (budget.total_timesteps - budget.warmup_steps) * (budget.num_evaluation - untimed_calls) \
        // budget.num_evaluation
    return {"setup_s": setup_seconds, "compile_s": compile_seconds, "steps_per_s": learning_steps / learn_seconds,
            "final_return": final_return, "steps": budget.total_timesteps}


def random_acting_rate(env_config: Mapping[str, Any], num_envs: int, num_steps: int, seed: int, runs: int = 1
                       ) -> Dict[str, float]:
    """The acting-only ceiling: `num_envs` envs of `env_config` through our env layer (adapter, episode metrics,
    auto-reset, vmap) for `num_steps` steps each, uniformly random actions, no network. A learner that acts and
    learns on the same envs cannot step them faster. Returns compile seconds, env steps per second and the
    number of episodes that ended."""
    train_env, _ = envs_lib.make(env_config)
    env = envs_lib.VmapWrapper(train_env)
    space = train_env.action_space

    def random_actions(key: jax.Array) -> jax.Array:
        if isinstance(space, envs_lib.DiscreteActionSpace):
            return jax.random.randint(key, (num_envs,), 0, space.num_actions)
        return jax.random.uniform(key, (num_envs, *space.shape), minval=jnp.asarray(space.low),
                                  maxval=jnp.asarray(space.high))

    def rollout(key: jax.Array) -> jax.Array:
        reset_key, key = jax.random.split(key)
        env_state, _ = env.reset(jax.random.split(reset_key, num_envs))

        def random_step(carry, _):
            env_state, key = carry
            key, action_key = jax.random.split(key)
            env_state, timestep = env.step(env_state, random_actions(action_key))
            return (env_state, key), timestep.last().sum()

        _, episodes_ended = jax.lax.scan(random_step, (env_state, key), None, length=num_steps)
        return episodes_ended.sum()

    compile_seconds, seconds, episodes = time_rollout(rollout, seed, runs)
    return {"compile_s": compile_seconds, "steps_per_s": num_envs * num_steps / seconds, "episodes": episodes}


def time_rollout(rollout: Callable[[jax.Array], jax.Array], seed: int, runs: int = 1) -> Tuple[float, float, int]:
    """`rollout(key)` -> episodes ended, compiled ahead of time: (compile s, run s, episodes). With `runs` > 1 the
    first run is a warm-up (a GPU builds its command buffers then) and the fastest of the others is returned."""
    key = jax.random.PRNGKey(seed)
    start = time.perf_counter()
    compiled = jax.jit(rollout).lower(key).compile()
    compile_seconds = time.perf_counter() - start
    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        episodes = int(jax.block_until_ready(compiled(key)))
        seconds.append(time.perf_counter() - start)
    return compile_seconds, min(seconds[1:] or seconds), episodes
