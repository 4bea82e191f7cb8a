"""A Sebulba run: the experiment loop of stoix_like/run/experiment.py, with acting moved to actor threads.

budget → CPU envs (actors', eval's) → the system's `sebulba_setup` → resume? → start actors →
[an update per rollout of every actor thread → params to the actors → log, evaluate, checkpoint every interval]
→ stop every thread, close every env → absolute metric (best params) and final return (final params).

The learner runs in the main thread. Each update takes one rollout from every actor thread's bounded queue (so
every update learns from the same envs, and the budget is a whole number of rollouts per thread: the actors stop
exactly at it), learns on the learner devices, and publishes the new params with their version (the updates done).
Policy lag, the learner's update index minus the version a rollout was collected with, is logged with the actors'
and the learner's steps/s, apart.
"""

from __future__ import annotations

import dataclasses
import math
import queue
import time
from typing import Dict, List, NamedTuple, Optional

import jax
import numpy as np
from omegaconf import DictConfig

from stoix_like.learner import budget as budget_lib
from stoix_like.run import checkpointing, run_record
from stoix_like.config import validation
from stoix_like.runtime import host_keys, parallel
from stoix_like.runtime.cpu_threads import start_backend_with_cpu_threads
from stoix_like.envs.cpu_vector_env import CpuVectorEnv, make_cpu_envs
from stoix_like.errors import ConfigError
from stoix_like.run.shared import RunResult, end_of_run_returns, eval_params_of, run_dir_of
from stoix_like.run.logging import Logger
from stoix_like.run.sebulba.actors import Rollout, VersionedParams, make_act_step, run_actor
from stoix_like.run.sebulba.evaluation import Evaluate, make_cpu_evaluator
from stoix_like.run.sebulba.threads import Supervisor, stop_on_ctrl_c
from stoix_like.learner.system_contract import SebulbaLearnerSetup, SebulbaSetup
from stoix_like.types import LearnerState


class Layout(NamedTuple):
    """Which devices act and learn, and how many actor threads there are."""

    actor_devices: List[jax.Device]  # one entry per actor thread (a device hosts arch.num_actor_threads of them)
    learner_devices: List[jax.Device]


def layout_of(config: DictConfig) -> Layout:
    arch = config.arch
    actor_devices = parallel.devices_by_index(list(arch.actor_device_ids), "arch.actor_device_ids")
    learner_devices = parallel.devices_by_index(list(arch.learner_device_ids), "arch.learner_device_ids")
    return Layout([device for device in actor_devices for _ in range(int(arch.num_actor_threads))], learner_devices)


def envs_per_thread(config: DictConfig, layout: Layout) -> int:
    """Each actor thread's share of arch.total_num_envs (config validation refuses an uneven split)."""
    return int(config.arch.total_num_envs) // len(layout.actor_devices)


def run(config: DictConfig, sebulba_setup: Optional[SebulbaLearnerSetup], algorithm: str) -> RunResult:
    # Everything a user can get wrong is checked before an env is built or a thread started.
    validation.validate(config)
    if sebulba_setup is None:
        raise ConfigError(f"{algorithm} has no Sebulba learner yet: run it with arch=anakin (arch=sebulba runs "
                          f"{' and '.join(validation.SEBULBA_SYSTEMS)}).")
    start_backend_with_cpu_threads(config.arch.get("cpu_threads"))  # before anything asks jax for a device
    layout = layout_of(config)
    # Anakin's exact budget, with every actor thread's envs as the update's envs and the learner devices as its
    # devices (one learner copy each)
    budget = budget_lib.make_budget(config, n_devices=len(layout.learner_devices), update_batch_size=1)
    seeds = [int(config.arch.seed)]
    run_dir = run_dir_of(config)
    checkpoints = checkpointing.Checkpoints(config, run_dir, algorithm, budget, seeds)
    logger = Logger(config, run_dir, algorithm, seeds)
    try:
        return _run(config, sebulba_setup, algorithm, layout, budget, checkpoints, logger)
    finally:
        logger.close()


class Interval:
    """What the updates of one evaluation interval measured."""

    def __init__(self) -> None:
        self.lags: List[int] = []
        self.actor_steps_per_second: List[float] = []  # per rollout, of its thread
        self.learner_seconds = 0.0
        self.learned_steps = 0
        self.train_metrics: List[Dict[str, np.ndarray]] = []
        self.episode_returns: List[np.ndarray] = []
        self.start = time.perf_counter()

    def means(self, num_actor_threads: int) -> Dict[str, float]:
        trained = {name: float(np.mean([m[name] for m in self.train_metrics])) for name in self.train_metrics[0]}
        return {**trained, "policy_lag_mean": float(np.mean(self.lags)), "policy_lag_max": float(np.max(self.lags)),
                # threads act at once: their rates add up
                "actor_steps_per_second": float(np.mean(self.actor_steps_per_second)) * num_actor_threads,
                "learner_steps_per_second": self.learned_steps / max(self.learner_seconds, 1e-9)}


def _run(config: DictConfig, sebulba_setup: SebulbaLearnerSetup, algorithm: str, layout: Layout,
         budget: budget_lib.Budget, checkpoints: checkpointing.Checkpoints, logger: Logger) -> RunResult:
    wall_start = time.perf_counter()
    arch = config.arch
    seed = int(arch.seed)
    # the keys Anakin's experiment.set_up gives a seed
    setup_key, eval_key = host_keys.split(host_keys.seed_key(seed))
    actor_key = jax.random.fold_in(setup_key, 1)
    actor_envs: List[CpuVectorEnv] = []
    supervisor = Supervisor(float(arch.shutdown_timeout_seconds))
    try:
        for _ in layout.actor_devices:
            actor_envs.append(make_cpu_envs(config.env, envs_per_thread(config, layout), seed))
        # the game as it is (no life-loss episodes, no reward clipping): evaluations report game scores
        eval_envs = make_cpu_envs(config.env, int(arch.num_eval_episodes), seed, evaluation=True)
        actor_envs.append(eval_envs)  # closed with the others
        setup = sebulba_setup(actor_envs[0], setup_key, config, budget, len(layout.learner_devices))
        logger.message(_describe(algorithm, config, budget, layout))
        learner_state, progress = _resume(checkpoints, setup, budget, eval_key, logger)
        evaluate = make_cpu_evaluator(eval_envs, setup.eval_policy)
        with stop_on_ctrl_c(supervisor):  # from here threads run: Ctrl-C must reach all of them
            return _learn(config, setup, layout, budget, checkpoints, logger, supervisor, actor_envs[:-1], evaluate,
                          learner_state, progress, actor_key, wall_start)
    finally:
        stuck = supervisor.shutdown()  # after an error, Ctrl-C or the budget's end alike
        for envs in actor_envs:
            envs.close()
        if stuck:
            logger.message(f"threads still running {arch.shutdown_timeout_seconds}s after the stop: {', '.join(stuck)}")


def _resume(checkpoints: checkpointing.Checkpoints, setup: SebulbaSetup, budget: budget_lib.Budget,
            eval_key: jax.Array, logger: Logger) -> tuple:
    """(learner state, progress): resumed or with loaded params (the actors then start from those params), or fresh."""
    fresh = checkpointing.Progress(evaluations_done=0, steps_done=0, eval_keys=np.asarray(eval_key)[None],
                                   best_returns=[-math.inf], best_params=[None])
    template = eval_params_of(setup, setup.learner_state)
    learner_state, progress, note = checkpoints.restore(setup.learner_state, fresh, template)
    if note:
        logger.message(note)
    logger.restore_json(progress.log_history)
    return learner_state, progress


def _learn(config: DictConfig, setup: SebulbaSetup, layout: Layout, budget: budget_lib.Budget,
           checkpoints: checkpointing.Checkpoints, logger: Logger, supervisor: Supervisor,
           actor_envs: List[CpuVectorEnv], evaluate: Evaluate, learner_state: LearnerState,
           progress: checkpointing.Progress, actor_key: jax.Array, wall_start: float) -> RunResult:
    arch, seed = config.arch, int(config.arch.seed)
    n_learners, rollout_length = len(layout.learner_devices), budget.rollout_length
    first_update = progress.evaluations_done * budget.updates_per_evaluation
    learn = parallel.distribute_learn_step(setup.learn_step, layout.learner_devices)
    learner_state = parallel.place_as_learn_step_outputs(learner_state, layout.learner_devices)
    params = VersionedParams(sorted(set(layout.actor_devices), key=lambda device: device.id))
    params.publish(parallel.first_slot(setup.actor_params(learner_state)), first_update)

    act_step = make_act_step(setup.act)
    queues: List["queue.Queue[Rollout]"] = [queue.Queue(maxsize=int(arch.queue_size)) for _ in actor_envs]
    for index, (device, envs) in enumerate(zip(layout.actor_devices, actor_envs)):
        # a resumed run's envs start afresh (CPU env state is not checkpointed), on seeds of their own
        thread_key = jax.random.fold_in(jax.random.fold_in(actor_key, index), first_update)
        env_seed = int(jax.random.randint(thread_key, (), 0, 2 ** 31 - 1))
        supervisor.start(f"actor-{device.id}-{index}", run_actor, supervisor, envs, act_step, params, queues[index],
                         device, thread_key, env_seed, budget.num_updates - first_update, rollout_length)

    learn_seconds, compile_seconds, env_steps = 0.0, 0.0, 0
    interval, run_start = Interval(), time.perf_counter()
    for update in range(first_update, budget.num_updates):
        rollouts = [supervisor.get(channel) for channel in queues]  # one per thread, in thread order
        learner_start = time.perf_counter()
        batch = jax.tree_util.tree_map(lambda *leaves: np.concatenate(leaves, axis=1), *[r.steps for r in rollouts])
        env_steps += batch.reward.size
        learner_state, train_metrics = learn(learner_state, parallel.split_env_axis_over_slots(batch, n_learners))
        params.publish(parallel.first_slot(setup.actor_params(learner_state)), update + 1)
        train_metrics = parallel.first_slot(parallel.local_host_copy(train_metrics))  # waits for the update
        seconds = time.perf_counter() - learner_start
        if update == first_update:
            compile_seconds = seconds  # the first update compiles the learner: timed apart, as Anakin's compile is
            logger.message(f"compiled the learner in its first update: {seconds:.1f}s")
        else:
            learn_seconds += seconds
            interval.learner_seconds += seconds
            interval.learned_steps += batch.reward.size
        _refuse_non_finite(train_metrics, update, budget)
        interval.train_metrics.append(train_metrics)
        interval.lags += [update - rollout.params_version for rollout in rollouts]
        interval.actor_steps_per_second += [rollout.steps.reward.size / rollout.seconds for rollout in rollouts]
        ended = batch.episode_metrics["is_terminal_step"]
        interval.episode_returns.append(batch.episode_metrics["episode_return"][ended])
        if (update + 1) % budget.updates_per_evaluation:
            continue
        progress = dataclasses.replace(progress, steps_done=(update + 1) * budget.steps_per_update)
        progress = _evaluate_and_save(config, setup, budget, checkpoints, logger, evaluate, learner_state, progress,
                                      interval, update, run_start, first_update, len(actor_envs))
        interval = Interval()

    if progress.steps_done != budget.total_timesteps or env_steps != budget.total_timesteps - first_update * budget.steps_per_update:
        raise AssertionError(f"ran {progress.steps_done} steps ({env_steps} here), budget was {budget.total_timesteps}")
    supervisor.raise_if_failed()
    absolute_returns, final_returns = end_of_run_returns(evaluate, logger, [seed], progress,
                                                         [eval_params_of(setup, learner_state)])
    learned_here = env_steps
    resumed = first_update > 0
    logger.message(
        f"done: {progress.steps_done:,} steps | first update (compiling) {compile_seconds:.1f}s | learning "
        f"{learn_seconds:.1f}s | best eval return {progress.best_returns[0]:.2f} | absolute return "
        f"{absolute_returns[0]:.2f} | final return {final_returns[0]:.2f}")
    logger.message(f"logs: {logger.run_dir}")
    logger.finish(run_record.Timings(time.perf_counter() - wall_start, compile_seconds, learn_seconds, learned_here),
                  resumed=resumed)
    return RunResult(float(np.mean(absolute_returns)), absolute_returns, list(progress.best_returns), final_returns,
                     progress.steps_done, learner_state, compile_seconds, learn_seconds, learned_here)


def _evaluate_and_save(config: DictConfig, setup: SebulbaSetup, budget: budget_lib.Budget,
                       checkpoints: checkpointing.Checkpoints, logger: Logger, evaluate: Evaluate,
                       learner_state: LearnerState, progress: checkpointing.Progress, interval: Interval, update: int,
                       run_start: float, first_update: int, num_actor_threads: int) -> checkpointing.Progress:
    """Log the interval's training, evaluate, keep the best params, save a checkpoint; returns the new progress."""
    seed = int(config.arch.seed)
    train_means = interval.means(num_actor_threads)
    done_here = update + 1 - first_update
    elapsed = time.perf_counter() - run_start
    eta = elapsed / done_here * (budget.num_updates - update - 1)
    returns = np.concatenate(interval.episode_returns)
    steps_per_second = budget.steps_per_evaluation / max(time.perf_counter() - interval.start, 1e-9)
    logger.progress(seed, progress.steps_done, budget.total_timesteps,
                    float(returns.mean()) if returns.size else float("nan"), steps_per_second, eta, train_means)
    eval_params = eval_params_of(setup, learner_state)
    eval_keys = progress.eval_keys.copy()
    next_key, this_key = host_keys.split(eval_keys[0])
    eval_keys[0] = np.asarray(next_key)
    stats = logger.evaluation("eval", seed, progress.steps_done, evaluate(eval_params, this_key),
                              {"steps_per_second": steps_per_second, **train_means})
    eval_return = stats["episode_return"]["mean"]
    best_returns, best_params = list(progress.best_returns), list(progress.best_params)
    if eval_return >= best_returns[0]:
        best_returns, best_params = [eval_return], [eval_params]
    progress = dataclasses.replace(progress, eval_keys=eval_keys, best_returns=best_returns, best_params=best_params,
                                   evaluations_done=(update + 1) // budget.updates_per_evaluation)
    progress = dataclasses.replace(progress, log_history=logger.json_state())
    saved = checkpoints.save(learner_state, progress, [eval_params], eval_return)
    if saved:
        logger.message(f"checkpoint: {saved}")
    return progress


def _refuse_non_finite(train_metrics: Dict[str, np.ndarray], update: int, budget: budget_lib.Budget) -> None:
    for name, value in train_metrics.items():
        if not np.all(np.isfinite(value)):
            raise FloatingPointError(f"{name} became NaN/inf at update {update + 1} of {budget.num_updates}; lower "
                                     f"the learning rate or system.max_grad_norm, or turn on "
                                     f"system.normalize_observations.")


def _describe(algorithm: str, config: DictConfig, budget: budget_lib.Budget, layout: Layout) -> str:
    threads = len(layout.actor_devices)
    return (f"{algorithm} on {config.env.suite}/{run_record.task_name(config.env)} (sebulba): "
            f"{budget.total_timesteps:,} steps = {budget.num_evaluation} evaluations × {budget.updates_per_evaluation} "
            f"updates × {budget.rollout_length} steps × {budget.total_num_envs} envs ({threads} actor threads × "
            f"{envs_per_thread(config, layout)} envs on devices {list(config.arch.actor_device_ids)}; learner on devices "
            f"{list(config.arch.learner_device_ids)}), queue size {config.arch.queue_size}")
