"""The one experiment loop every system shares.

budget → envs → system setup → compile (timed apart) → [learn → log → evaluate] × N → absolute metric.
A system supplies only `learner_setup(env, key, config, budget) -> SystemSetup`.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, NamedTuple

import jax
import numpy as np

from stoix_like import budget as budget_lib
from stoix_like import envs as envs_lib
from stoix_like import parallel
from stoix_like.errors import ConfigError
from stoix_like.evaluator import EvalPolicy, make_evaluator
from stoix_like.logging import Logger

# The multiple of evaluation episodes used for the final, absolute-metric evaluation of the best params.
ABSOLUTE_METRIC_EPISODE_FACTOR = 10


class SystemSetup(NamedTuple):
    # the per-device learner, not yet distributed: state -> (state, {"episode_metrics": ..., "train_metrics": ...});
    # the experiment distributes it (and could vmap seeds around it) through stoix_like.parallel
    learner_fn: Callable
    learner_state: Any  # leaves lead with (local devices, update batch)
    eval_policy: EvalPolicy
    eval_params: Callable[[Any], Any]  # one slot of the learner state -> what eval_policy needs


LearnerSetupFn = Callable[[envs_lib.Environment, jax.Array, Any, budget_lib.Budget], SystemSetup]


def make_budget(config: Any) -> budget_lib.Budget:
    return budget_lib.make_budget(
        total_timesteps=int(config.arch.total_timesteps),
        total_num_envs=int(config.arch.total_num_envs),
        n_devices=parallel.device_count(),
        update_batch_size=int(config.arch.update_batch_size),
        rollout_length=int(config.system.rollout_length),
        num_evaluation=int(config.arch.num_evaluation),
        warmup_rollout_length=int(config.system.get("warmup_rollout_length", 0) or 0),
    )


def run_dir_of(config: Any) -> str:
    """Hydra's per-run output directory when launched through Hydra, else logger.base_exp_path."""
    try:
        from hydra.core.hydra_config import HydraConfig

        return HydraConfig.get().runtime.output_dir
    except ValueError:  # not running under Hydra (tests, notebooks)
        return os.path.abspath(str(config.logger.base_exp_path))


def _first_non_finite_update(train_metrics: Dict[str, np.ndarray]) -> tuple[str, int] | None:
    """(metric, update index within this learn call) of the first NaN/inf, scanning updates in order."""
    first = None
    for name, value in train_metrics.items():
        # (devices, batch, updates, ...) -> is any slot non-finite at update u
        bad = ~np.isfinite(value.reshape(value.shape[0] * value.shape[1], value.shape[2], -1)).all(axis=(0, 2))
        if bad.any():
            index = int(np.argmax(bad))
            if first is None or index < first[1]:
                first = (name, index)
    return first


def _mean_completed_episode_return(episode_metrics: Dict[str, np.ndarray]) -> float:
    ended = episode_metrics["is_terminal_step"]
    if not ended.any():
        return float("nan")
    return float(episode_metrics["episode_return"][ended].mean())


def run(config: Any, learner_setup: LearnerSetupFn, algorithm: str) -> float:
    """Train, evaluate and log one run; returns the absolute-metric mean return of the best params."""
    parallel.maybe_initialize_distributed(bool(config.arch.multihost))
    budget = make_budget(config)  # refuses a bad budget before anything compiles
    train_env, eval_env = envs_lib.make(config.env)
    run_dir = run_dir_of(config)
    logger = Logger(config, run_dir, algorithm)
    logger.message(
        f"{algorithm} on {config.env.suite}/{config.env.scenario.name}: {budget.total_timesteps:,} steps = "
        f"{budget.num_evaluation} evaluations × {budget.updates_per_evaluation} updates × "
        f"{budget.rollout_length} steps × {budget.total_num_envs} envs "
        f"({budget.n_devices} devices × {budget.update_batch_size} batch × {budget.num_envs} envs)"
        + (f" + {budget.warmup_steps:,} warm-up steps" if budget.warmup_steps else "")
    )

    key = jax.random.PRNGKey(int(config.arch.seed))
    setup_key, eval_key = jax.random.split(key)
    setup = learner_setup(train_env, setup_key, config, budget)
    num_eval_episodes = int(config.arch.num_eval_episodes)
    evaluate = make_evaluator(eval_env, setup.eval_policy, num_eval_episodes)

    compile_start = time.perf_counter()
    learn = parallel.distribute(setup.learner_fn).lower(setup.learner_state).compile()
    compile_seconds = time.perf_counter() - compile_start
    logger.message(f"compiled the learner in {compile_seconds:.1f}s")

    learner_state = setup.learner_state
    steps_done = budget.warmup_steps
    best_return, best_params = -np.inf, None
    final_stats: Dict[str, Dict[str, float]] = {}
    learn_seconds = 0.0
    run_start = time.perf_counter()
    for evaluation in range(budget.num_evaluation):
        learn_start = time.perf_counter()
        learner_state, outputs = learn(learner_state)
        jax.block_until_ready(learner_state)
        learn_time = time.perf_counter() - learn_start
        learn_seconds += learn_time
        steps_done += budget.steps_per_evaluation
        outputs = jax.device_get(outputs)

        bad = _first_non_finite_update(outputs["train_metrics"])
        if bad is not None:
            update = evaluation * budget.updates_per_evaluation + bad[1] + 1
            raise FloatingPointError(
                f"{bad[0]} became NaN/inf at update {update} of {budget.num_updates}; lower the learning rate "
                f"or system.max_grad_norm, or turn on system.normalize_observations."
            )
        steps_per_second = budget.steps_per_evaluation / learn_time
        train_means = {name: float(np.mean(value)) for name, value in outputs["train_metrics"].items()}
        elapsed = time.perf_counter() - run_start
        eta = elapsed / (evaluation + 1) * (budget.num_evaluation - evaluation - 1)
        logger.progress(steps_done, budget.total_timesteps, _mean_completed_episode_return(outputs["episode_metrics"]),
                        steps_per_second, eta, train_means)

        eval_params = jax.device_get(setup.eval_params(parallel.first_slot(learner_state)))
        eval_key, this_eval_key = jax.random.split(eval_key)
        per_episode = evaluate(eval_params, this_eval_key)
        final_stats = logger.evaluation(
            "eval", steps_done, per_episode,
            {"steps_per_second": steps_per_second, **train_means},
        )
        if final_stats["episode_return"]["mean"] >= best_return:
            best_return, best_params = final_stats["episode_return"]["mean"], eval_params

    if steps_done != budget.total_timesteps:  # the budget arithmetic is the contract; never drift from it
        raise AssertionError(f"ran {steps_done} steps, budget was {budget.total_timesteps}")

    absolute_evaluate = make_evaluator(eval_env, setup.eval_policy, num_eval_episodes * ABSOLUTE_METRIC_EPISODE_FACTOR)
    eval_key, absolute_key = jax.random.split(eval_key)
    absolute_stats = logger.evaluation("absolute", steps_done, absolute_evaluate(best_params, absolute_key), {})
    logger.message(
        f"done: {steps_done:,} steps | compile {compile_seconds:.1f}s | learning {learn_seconds:.1f}s "
        f"({budget.total_timesteps - budget.warmup_steps:,} learning steps at "
        f"{(budget.total_timesteps - budget.warmup_steps) / max(learn_seconds, 1e-9):,.0f} steps/s) | "
        f"best eval return {best_return:.2f} | absolute return {absolute_stats['episode_return']['mean']:.2f}"
    )
    logger.message(f"logs: {run_dir}")
    return float(absolute_stats["episode_return"]["mean"])


def check_divides(name: str, value: int, divisor_name: str, divisor: int) -> None:
    """Shared check for batch splits (minibatches, sequence chunks): an exact division or a ConfigError."""
    if divisor <= 0 or value % divisor:
        divisors = [d for d in range(1, value + 1) if value % d == 0]
        nearby = sorted(divisors, key=lambda d: abs(d - divisor))[:3]
        raise ConfigError(f"{divisor_name}={divisor} must divide {name}={value}; try one of {sorted(nearby)}.")
