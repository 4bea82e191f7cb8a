"""The one experiment loop every system shares.

budget → envs → system setup (per seed) → resume? → compile (timed apart) →
[learn → log → evaluate → checkpoint] × N → absolute metric.
A system supplies only `learner_setup(env, key, config, budget) -> SystemSetup` (stoix_like/system_contract.py).
"""

from __future__ import annotations

import math
import os
import time
from typing import Any, Dict, List, NamedTuple

import jax
import numpy as np

from stoix_like import budget as budget_lib
from stoix_like import config_schema
from stoix_like import checkpointing, compilation_cache, population
from stoix_like import envs as envs_lib
from stoix_like import parallel
from stoix_like.errors import ConfigError
from stoix_like.evaluator import make_evaluator
from stoix_like.logging import Logger, summarize
from stoix_like.system_contract import LearnerOutput, LearnerSetup

# The multiple of evaluation episodes used for the final, absolute-metric evaluation of the best params.
ABSOLUTE_METRIC_EPISODE_FACTOR = 10


class RunResult(NamedTuple):
    absolute_return: float  # mean over seeds: what `run` returns (and a sweep maximises)
    absolute_returns: List[float]  # per seed
    best_returns: List[float]  # per seed: the best eval return, whose params the absolute metric evaluated
    steps_done: int  # env steps of each seed, warm-up included: always the budget
    learner_state: Any  # the final learner state on this process's devices
    compile_seconds: float
    learn_seconds: float  # in learn calls only: no evaluation, logging or checkpointing
    learned_steps: int  # env steps those learn calls took, all seeds together (since resuming, if resumed)


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


def seeds_of(config: Any) -> List[int]:
    """Seed k of an N-seed run is `arch.seed + k`: exactly the run `arch.seed=<that>` would be."""
    num_seeds = int(config.arch.num_seeds)
    if num_seeds < 1:
        raise ConfigError(f"arch.num_seeds={num_seeds} must be at least 1.")
    return [int(config.arch.seed) + k for k in range(num_seeds)]


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


def _describe(algorithm: str, config: Any, budget: budget_lib.Budget, seeds: List[int]) -> str:
    return (
        f"{algorithm} on {config.env.suite}/{config.env.scenario.name}: {budget.total_timesteps:,} steps = "
        f"{budget.num_evaluation} evaluations × {budget.updates_per_evaluation} updates × "
        f"{budget.rollout_length} steps × {budget.total_num_envs} envs "
        f"({budget.n_devices} devices × {budget.update_batch_size} batch × {budget.num_envs} envs)"
        + (f" + {budget.warmup_steps:,} warm-up steps" if budget.warmup_steps else "")
        + (f", for each of {len(seeds)} seeds {seeds[0]}..{seeds[-1]} in one program" if len(seeds) > 1 else "")
        + (f", on {parallel.process_count()} processes" if parallel.process_count() > 1 else "")
    )


def run(config: Any, learner_setup: LearnerSetup, algorithm: str) -> float:
    """Train, evaluate and log one run; returns the absolute-metric mean return of the best params (seed mean)."""
    return train(config, learner_setup, algorithm).absolute_return


def train(config: Any, learner_setup: LearnerSetup, algorithm: str) -> RunResult:
    parallel.maybe_initialize_distributed(config.arch)
    compilation_cache.use_process_compilation_cache()  # N seeds' identical setup programs compile once
    # Everything a user can get wrong is checked here, before envs, setup or compilation.
    config_schema.validate(config)  # every key's type and range: stoix_like/config_schema.py
    budget = make_budget(config)
    seeds = seeds_of(config)
    run_dir = run_dir_of(config)
    checkpoints = checkpointing.Checkpoints(config, run_dir, algorithm, budget, seeds)
    logger = Logger(config, run_dir, algorithm, seeds)
    try:
        return _train(config, learner_setup, algorithm, budget, seeds, checkpoints, logger)
    finally:
        logger.close()


def _train(config: Any, learner_setup: LearnerSetup, algorithm: str, budget: budget_lib.Budget,
           seeds: List[int], checkpoints: checkpointing.Checkpoints, logger: Logger) -> RunResult:
    num_seeds = len(seeds)
    train_env, eval_env = envs_lib.make(config.env)
    logger.message(_describe(algorithm, config, budget, seeds))

    # Each seed is set up exactly as a single run with that seed would be; the states then sit side by side.
    setups, eval_keys = [], []
    for seed in seeds:
        setup_key, eval_key = jax.random.split(jax.random.PRNGKey(seed))
        setups.append(learner_setup(train_env, setup_key, config, budget))
        eval_keys.append(np.asarray(eval_key))
    setup = setups[0]
    fresh_state = parallel.stack_seeds([each.learner_state for each in setups])
    del setups

    def eval_params_of(state: Any, seed_index: int) -> Any:
        # this process's own first slot: never a program across processes (see parallel.py, "one order")
        return parallel.local_host_copy(setup.eval_params(parallel.first_slot(state, seed_index, num_seeds)))

    # Resume (or load params) before compiling, so that a refused checkpoint costs no compilation.
    progress = checkpointing.Progress(
        evaluations_done=0, steps_done=budget.warmup_steps, eval_keys=np.stack(eval_keys),
        best_returns=[-math.inf] * num_seeds, best_params=[None] * num_seeds)
    learner_state, progress, note = checkpoints.restore(fresh_state, progress, eval_params_of(fresh_state, 0))
    if note:
        logger.message(note)
    logger.restore_json(progress.log_history)

    num_eval_episodes = int(config.arch.num_eval_episodes)
    evaluate_here = make_evaluator(eval_env, setup.eval_policy, num_eval_episodes)

    def evaluate(eval_params: Any, key: jax.Array) -> Dict[str, np.ndarray]:
        # the pmapped evaluator runs one program over every process's devices: a stage every process enters
        with parallel.collective_stage("evaluation"):
            return evaluate_here(eval_params, key)

    # Compiled for the fresh state's types, so a resumed run runs the very program an uninterrupted one does.
    compile_start = time.perf_counter()
    learn = parallel.compile_learner(setup.learner_fn, fresh_state, num_seeds)
    compile_seconds = time.perf_counter() - compile_start
    logger.message(f"compiled the learner in {compile_seconds:.1f}s")
    del fresh_state

    def log_and_evaluate(seed_index: int, learner_state: Any, outputs: LearnerOutput, evaluation: int,
                         steps_per_second: float, eta: float) -> tuple:
        """One seed's training metrics, then its evaluation: (eval return, eval params)."""
        seed = seeds[seed_index]
        seed_outputs: LearnerOutput = parallel.seed_view(outputs, seed_index, num_seeds)
        _refuse_non_finite(seed_outputs.train_metrics, evaluation, budget, seed if num_seeds > 1 else None)
        train_means = {name: float(np.mean(value)) for name, value in seed_outputs.train_metrics.items()}
        logger.progress(seed, progress.steps_done, budget.total_timesteps,
                        _mean_completed_episode_return(seed_outputs.episode_metrics), steps_per_second, eta,
                        train_means)
        eval_params = eval_params_of(learner_state, seed_index)
        next_eval_key, this_eval_key = jax.random.split(progress.eval_keys[seed_index])
        progress.eval_keys[seed_index] = np.asarray(next_eval_key)
        stats = logger.evaluation("eval", seed, progress.steps_done, evaluate(eval_params, this_eval_key),
                                  {"steps_per_second": steps_per_second, **train_means})
        eval_return = stats["episode_return"]["mean"]
        if eval_return >= progress.best_returns[seed_index]:
            progress.best_returns[seed_index], progress.best_params[seed_index] = eval_return, eval_params
        return eval_return, eval_params

    learn_seconds = 0.0
    run_start = time.perf_counter()
    first_evaluation = progress.evaluations_done
    # Every process runs this loop's cross-process stages in one order: learn → evaluate each seed → save.
    for evaluation in range(first_evaluation, budget.num_evaluation):
        learn_start = time.perf_counter()
        learner_state, outputs = learn(learner_state)
        jax.block_until_ready(learner_state)
        learn_time = time.perf_counter() - learn_start
        learn_seconds += learn_time
        progress.steps_done += budget.steps_per_evaluation
        elapsed = time.perf_counter() - run_start
        eta = elapsed / (evaluation + 1 - first_evaluation) * (budget.num_evaluation - evaluation - 1)

        outputs = parallel.local_host_copy(outputs)  # this process's metrics only: no cross-process fetch
        steps_per_second = budget.steps_per_evaluation / learn_time  # of each seed
        eval_returns, eval_params_now = zip(*(
            log_and_evaluate(k, learner_state, outputs, evaluation, steps_per_second, eta) for k in range(num_seeds)))

        progress.evaluations_done = evaluation + 1
        progress.log_history = logger.json_state()
        saved = checkpoints.save(learner_state, progress, eval_params_now, float(np.mean(eval_returns)))
        if saved:
            logger.message(f"checkpoint: {saved}")

    if progress.steps_done != budget.total_timesteps:  # the budget arithmetic is the contract; never drift from it
        raise AssertionError(f"ran {progress.steps_done} steps, budget was {budget.total_timesteps}")

    def absolute_evaluate(eval_params: Any, key: jax.Array) -> Dict[str, np.ndarray]:
        """10× the episodes as repeated calls of the compiled evaluator: no second compilation."""
        rounds = [evaluate(eval_params, k) for k in jax.random.split(key, ABSOLUTE_METRIC_EPISODE_FACTOR)]
        return {name: np.concatenate([r[name] for r in rounds]) for name in rounds[0]}

    absolute_returns = []
    for k, seed in enumerate(seeds):
        _, absolute_key = jax.random.split(progress.eval_keys[k])
        stats = logger.evaluation("absolute", seed, progress.steps_done,
                                  absolute_evaluate(progress.best_params[k], absolute_key), {})
        absolute_returns.append(stats["episode_return"]["mean"])
    learned_here = (budget.num_evaluation - first_evaluation) * budget.steps_per_evaluation * num_seeds
    logger.message(
        f"done: {progress.steps_done:,} steps{' per seed' if num_seeds > 1 else ''} | compile {compile_seconds:.1f}s"
        f" | learning {learn_seconds:.1f}s ({learned_here:,} learning steps"
        + (f" since resuming" if first_evaluation else "") + (f", all seeds" if num_seeds > 1 else "")
        + f", at {learned_here / max(learn_seconds, 1e-9):,.0f} steps/s) | best eval return "
        + ", ".join(f"{r:.2f}" for r in progress.best_returns)
        + " | absolute return " + ", ".join(f"{r:.2f}" for r in absolute_returns)
    )
    if num_seeds > 1:
        summary = population.summarize(absolute_returns, seeds, config.env.solved_return)
        logger.message(f"population: absolute return {summary.describe()}")
    logger.message(f"logs: {logger.run_dir}")
    return RunResult(float(np.mean(absolute_returns)), absolute_returns, list(progress.best_returns),
                     progress.steps_done, learner_state, compile_seconds, learn_seconds, learned_here)


def _refuse_non_finite(train_metrics: Dict[str, np.ndarray], evaluation: int, budget: budget_lib.Budget,
                       seed: int | None) -> None:
    bad = _first_non_finite_update(train_metrics)
    if bad is not None:
        update = evaluation * budget.updates_per_evaluation + bad[1] + 1
        raise FloatingPointError(
            f"{bad[0]} became NaN/inf at update {update} of {budget.num_updates}"
            + (f" (seed {seed})" if seed is not None else "")
            + "; lower the learning rate or system.max_grad_norm, or turn on system.normalize_observations."
        )


def evaluate_checkpoint(config: Any) -> float:
    """`python -m experiments.evaluate checkpoint=PATH`: return statistics of a saved policy; returns the mean."""
    config_schema.validate(config)
    saved = checkpointing.read_saved_run(str(config.checkpoint))
    run_config = saved.config
    if config.greedy is not None:
        run_config.arch.evaluation_greedy = bool(config.greedy)
    train_env, eval_env = envs_lib.make(run_config.env)
    # The system rebuilds its networks and eval policy from the saved config; its fresh state is only a template.
    setup = saved.learner_setup(train_env, jax.random.PRNGKey(0), run_config, saved.budget)
    template = parallel.local_host_copy(setup.eval_params(parallel.first_slot(setup.learner_state)))
    per_seed_params = checkpointing.load_eval_params(saved, template, str(config.params))
    evaluate = make_evaluator(eval_env, setup.eval_policy, int(config.num_episodes))
    meta = saved.meta
    print(f"{meta['algorithm']} on {meta['env']['suite']}/{meta['env']['scenario']}: checkpoint "
          f"{os.path.join(saved.root, str(saved.step))} ({meta['steps_done']:,} steps), {config.params} params, "
          f"{int(config.num_episodes)} episodes, "
          f"{'greedy' if run_config.arch.evaluation_greedy else 'sampled'} actions", flush=True)
    means = []
    for k, (seed, eval_params) in enumerate(zip(meta["seeds"], per_seed_params)):
        per_episode = evaluate(eval_params, jax.random.fold_in(jax.random.PRNGKey(int(config.seed)), k))
        ret, length = summarize(per_episode["episode_return"]), summarize(per_episode["episode_length"])
        median = float(np.median(per_episode["episode_return"]))
        print(f"[evaluate seed {seed}] return {ret['mean']:.2f} ± {ret['std']:.2f} (median {median:.2f}, "
              f"min {ret['min']:.1f}, max {ret['max']:.1f}) | length {length['mean']:.1f}", flush=True)
        means.append(ret["mean"])
    return float(np.mean(means))


def check_divides(name: str, value: int, divisor_name: str, divisor: int) -> None:
    """Shared check for batch splits (minibatches, sequence chunks): an exact division or a ConfigError."""
    if divisor <= 0 or value % divisor:
        divisors = [d for d in range(1, value + 1) if value % d == 0]
        nearby = sorted(divisors, key=lambda d: abs(d - divisor))[:3]
        raise ConfigError(f"{divisor_name}={divisor} must divide {name}={value}; try one of {sorted(nearby)}.")
