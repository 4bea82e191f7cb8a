"""Our systems timed through the experiment loop's own steps: setup, compile and learning, each apart.

The benchmarks call `experiment.set_up`, `compile_learner`, `learn_once` and `make_evaluate` rather than a loop of
their own, so what they time is what `python -m experiments.<algo>` runs, minus the in-loop evaluations.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
# jax's first QR lowering in a process (orthogonal weight init, ours and rejax's alike) imports scipy.linalg for its
# LAPACK (~0.15 s): imported here, before anything is timed, so that it counts in neither contender's setup or compile
import scipy.linalg  # noqa: F401

from stoix_like import envs as envs_lib
from stoix_like.run import experiment, shared
from stoix_like.learner import budget as budget_lib
from stoix_like.runtime import parallel
from stoix_like.runtime.cpu_threads import is_small_cpu_run, start_backend_for_run, start_backend_with_cpu_threads


def start_backend_as_run_would(arch: Any, cpu_threads: Optional[int]) -> str:
    """Start jax's backends with a pool of `cpu_threads` threads if given, else as `arch.cpu_threads: null` would
    for a run of `arch` (what `python -m experiments.<algo>` gets); the pool, in words. Every contender in the
    process shares it."""
    if cpu_threads is not None:
        start_backend_with_cpu_threads(cpu_threads)
        return f"{cpu_threads} thread(s), as asked"
    if arch.get("cpu_threads") is not None:
        raise ValueError("arch.cpu_threads is set in the config: pass it as --cpu-threads instead")
    start_backend_for_run(arch)
    chosen = "1 thread" if is_small_cpu_run(arch) else "every core"
    return f"{chosen}, arch.cpu_threads=null's choice for this run"


class OurLearning:
    """One of our systems, set up and compiled once for seeds `seed` .. `seed + num_seeds - 1` (in one program, as
    `arch.num_seeds` runs them, under the config's `arch.seed_loop`). `learn_budget()` runs its whole budget from
    the fresh state (so it can run again, interleaved with a peer's run) and returns the seconds of learning it
    timed; `learn_call()` runs one learn call (one evaluation's worth of updates) on from where the last left off.

    `learning_steps` are the env steps a timed `learn_budget()` covers, over all seeds; `steps_per_call` those of
    one learn call. The replay warm-up of an off-policy system is in setup, untimed. The first `untimed_calls`
    learn calls of a budget run but count in neither the time nor the steps: a GPU's first run of a program also
    builds its command buffers (CUDA graphs), which is no part of steady learning."""

    def __init__(self, learner_setup: Callable, config: Any, seed: int, untimed_calls: int = 0, num_seeds: int = 1):
        self.budget = budget_lib.make_budget(config)
        train_env, self._eval_env = envs_lib.make(config.env)
        start = time.perf_counter()
        seeds = list(range(seed, seed + num_seeds))
        self._prepared = experiment.set_up(learner_setup, train_env, config, self.budget, seeds)  # warm-up in
        jax.block_until_ready(self._prepared.fresh_state)
        self.setup_seconds = time.perf_counter() - start
        self._learn, self.compile_seconds = experiment.compile_learner(
            self._prepared.system, self._prepared.fresh_state, num_seeds, parallel.seed_loop_of(config))
        self._num_seeds, self._untimed_calls = num_seeds, untimed_calls
        self.steps_per_call = self.budget.steps_per_evaluation * num_seeds
        self.learning_steps = self.steps_per_call * (self.budget.num_evaluation - untimed_calls)
        self._learner_state, self._calls_done = self._prepared.fresh_state, 0

    def learn_call(self) -> float:
        """One learn call on from the last (from the fresh state once the budget is spent): its seconds."""
        if self._calls_done == self.budget.num_evaluation:
            self._learner_state, self._calls_done = self._prepared.fresh_state, 0
        learned = experiment.learn_once(self._learn, self._learner_state)
        self._learner_state, self._calls_done = learned.learner_state, self._calls_done + 1
        return learned.seconds

    def learn_budget(self) -> float:
        self._learner_state, self._calls_done = self._prepared.fresh_state, 0
        seconds = [self.learn_call() for _ in range(self.budget.num_evaluation)]
        return sum(seconds[self._untimed_calls:])

    def final_return(self, eval_episodes: int) -> float:
        """The last learn call's params of the first seed: their mean return over `eval_episodes` episodes."""
        evaluate = experiment.make_evaluate(self._eval_env, self._prepared.system.eval_policy, eval_episodes)
        eval_params = shared.eval_params_of(self._prepared.system, self._learner_state, 0,
                                                num_seeds=self._num_seeds)
        return float(np.mean(evaluate(eval_params, self._prepared.eval_keys[0])["episode_return"]))


def interleaved_median_seconds(contenders: Mapping[str, Any], rounds: int,
                               run: Callable[[Any], float] = lambda contender: contender.learn_budget()
                               ) -> Dict[str, float]:
    """`run(contender)` (by default its whole budget) for each contender, `rounds` times, in turn: the median seconds
    of each. The machine is shared and its speed drifts; taking turns spreads the drift over everyone, and the
    median drops the outliers."""
    seconds: Dict[str, list] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, contender in contenders.items():
            seconds[name].append(run(contender))
    return {name: statistics.median(times) for name, times in seconds.items()}


def compare_learning(contenders: Mapping[str, Any], rounds: int, eval_episodes: int) -> Dict[str, Dict[str, float]]:
    """Contenders (each with `learn_budget()`, `final_return(episodes)`, `compile_seconds`, `learning_steps` and,
    for ours, `setup_seconds`) run interleaved `rounds` times: per contender its setup and compile seconds, its
    median throughput, its last run's final return over `eval_episodes` episodes (NaN for 0) and the steps one
    timed run covers."""
    median_seconds = interleaved_median_seconds(contenders, rounds)
    return {name: {"setup_s": getattr(contender, "setup_seconds", float("nan")),
                   "compile_s": contender.compile_seconds,
                   "steps_per_s": contender.learning_steps / median_seconds[name],
                   "final_return": contender.final_return(eval_episodes) if eval_episodes else float("nan"),
                   "steps": contender.learning_steps}
            for name, contender in contenders.items()}


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
