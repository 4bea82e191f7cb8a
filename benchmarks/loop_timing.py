"""Our systems timed through the experiment loop's own steps: setup, compile and learning, each apart.

The benchmarks call `experiment.set_up`, `compile_learner`, `learn_once` and `make_evaluate` rather than a loop of
their own, so what they time is what `python -m experiments.<algo>` runs, minus the in-loop evaluations.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict

import jax
import numpy as np

from stoix_like import envs as envs_lib
from stoix_like import experiment


def time_learning(learner_setup: Callable, config: Any, seed: int, eval_episodes: int) -> Dict[str, float]:
    """One seed's whole budget: setup and compile seconds, learning throughput (learn calls only, warm-up
    excluded), the final params' mean return over `eval_episodes` episodes and the budget's steps."""
    budget = experiment.make_budget(config)
    train_env, eval_env = envs_lib.make(config.env)
    start = time.perf_counter()
    prepared = experiment.set_up(learner_setup, train_env, config, budget, [seed])  # replay warm-up included
    jax.block_until_ready(prepared.fresh_state)
    setup_seconds = time.perf_counter() - start
    learn, compile_seconds = experiment.compile_learner(prepared.system, prepared.fresh_state, num_seeds=1)

    learner_state, learn_seconds = prepared.fresh_state, 0.0
    for _ in range(budget.num_evaluation):
        learned = experiment.learn_once(learn, learner_state)
        learner_state, learn_seconds = learned.learner_state, learn_seconds + learned.seconds

    evaluate = experiment.make_evaluate(eval_env, prepared.system.eval_policy, eval_episodes)
    eval_params = experiment.eval_params_of(prepared.system, learner_state, 0, num_seeds=1)
    final_return = float(np.mean(evaluate(eval_params, prepared.eval_keys[0])["episode_return"]))
    learning_steps = budget.total_timesteps - budget.warmup_steps
    return {"setup_s": setup_seconds, "compile_s": compile_seconds, "steps_per_s": learning_steps / learn_seconds,
            "final_return": final_return, "steps": budget.total_timesteps}
