"""The one experiment loop every system shares, as named steps:

budget → envs → `set_up` (per seed) → `resume`? → `compile_programs` (the learner timed apart, the evaluator
beside it) → [`learn_once` → `evaluate_seeds` (log, evaluate) → `save_checkpoint`] × N → `end_of_run_returns`
(the best params' absolute metric and the final params' return).
A system supplies only `learner_setup(env, key, config, budget) -> SystemSetup`. Each step takes what it needs
and returns what it changed (the learner state, the loop's `Progress`); the benchmarks time the same steps.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import math
import time
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import jax
import numpy as np
from omegaconf import DictConfig

from stoix_like.learner import budget as budget_lib
from stoix_like.learner import hyperparams, pbt
from stoix_like.config import sweep, validation
from stoix_like.run import checkpointing, run_record
from stoix_like.runtime import compilation_cache, host_keys
from stoix_like.claims import population
from stoix_like import envs as envs_lib
from stoix_like.runtime import parallel
from stoix_like.runtime.cpu_threads import start_backend_for_run
from stoix_like.errors import ConfigError
from stoix_like.learner.evaluator import EvalPolicy, Evaluator, make_evaluator
from stoix_like.run.logging import Logger, format_duration
from stoix_like.run.member_logs import MemberLogs
from stoix_like.run.shared import Evaluate, RunResult, end_of_run_returns, eval_params_of, run_dir_of
from stoix_like.learner.system_contract import (LearnerOutput, LearnerSetup, SebulbaLearnerSetup,
                                        SystemSetup)
from stoix_like.types import HostTree, LearnerState

# a sweep's learner: (one member's state, its index on the members' axis) -> the learner's (state, outputs)
MemberLearner = Callable[[LearnerState, jax.Array], Tuple[LearnerState, LearnerOutput]]

def seeds_of(config: DictConfig) -> List[int]:
    """Seed k of an N-seed run is `arch.seed + k`: the same keys and initial state as the run `arch.seed=<that>`."""
    num_seeds = int(config.arch.num_seeds)
    if num_seeds < 1:
        raise ConfigError(f"arch.num_seeds={num_seeds} must be at least 1.")
    return [int(config.arch.seed) + k for k in range(num_seeds)]


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


def _describe(algorithm: str, config: DictConfig, budget: budget_lib.Budget, seeds: List[int],
              members: List[sweep.Member]) -> str:
    num_points = len(sweep.grid_points(config))
    return (
        f"{algorithm} on {config.env.suite}/{run_record.task_name(config.env)}: {budget.total_timesteps:,} steps = "
        f"{budget.num_evaluation} evaluations × {budget.updates_per_evaluation} updates × "
        f"{budget.rollout_length} steps × {budget.total_num_envs} envs "
        f"({budget.n_devices} devices × {budget.update_batch_size} batch × {budget.num_envs} envs)"
        + (f" + {budget.warmup_steps:,} warm-up steps" if budget.warmup_steps else "")
        + (f", for each of {len(members)} members ({num_points} grid points of "
           f"{' × '.join(sweep.swept_values(config))} × {len(members) // num_points} seeds) in one program"
           if members else
           f", for each of {len(seeds)} seeds {seeds[0]}..{seeds[-1]} in one program" if len(seeds) > 1 else "")
        + (f", on {parallel.process_count()} processes" if parallel.process_count() > 1 else "")
        + (f"; PBT every {config.arch.pbt.interval} updates over {', '.join(pbt.ranges_of(config))}"
           if pbt.enabled(config) else "")
    )


def run(config: DictConfig, learner_setup: LearnerSetup, algorithm: str,
        sebulba_setup: Optional[SebulbaLearnerSetup] = None) -> float:
    """Train, evaluate and log one run; returns the IQM over seeds of the best params' absolute-metric return (one
    seed's own with `arch.num_seeds=1`; the mean of two or three): what an Optuna sweep maximises.

    `arch=sebulba` runs the same system with actor threads over CPU envs (stoix_like/run/sebulba/), through the
    system's `sebulba_setup`; a system without one is refused there in one line.
    """
    from stoix_like.run.sebulba import is_sebulba

    if is_sebulba(config):
        from stoix_like.run.sebulba import loop  # imported here: it builds on this module's pieces

        return population.interquartile_mean(loop.run(config, sebulba_setup, algorithm).absolute_returns)
    return population.interquartile_mean(train(config, learner_setup, algorithm).absolute_returns)


def train(config: DictConfig, learner_setup: LearnerSetup, algorithm: str) -> RunResult:
    # Everything a user can get wrong is checked here, before processes connect, envs, setup or compilation.
    validation.validate(config)  # every key's type and range: stoix_like/config/validation.py
    parallel.maybe_initialize_distributed(config.arch)
    start_backend_for_run(config.arch)  # before anything asks jax for a device
    budget = budget_lib.make_budget(config)
    # Live progress in a long interval: the learner is built for a share of it and called that many times (a
    # progress line after each). The updates, steps and schedules are the same. Host callbacks stay out of the
    # compiled learner: on PPO CartPole one every 10 updates cost ~30% of throughput, an extra learn call ~16 ms
    # of CPU (benchmarks/progress_overhead.py).
    call_budget = learn_call_budget(budget, int(config.logger.progress_per_evaluation))
    if pbt.enabled(config):
        pbt.check_interval(config, call_budget.updates_per_evaluation)
    # a sweep's members (grid points × seeds) run as the seeds do, member k with member k's seed
    members = sweep.members(config)
    seeds = [member.seed for member in members] if members else seeds_of(config)
    run_dir = run_dir_of(config)
    checkpoints = checkpointing.Checkpoints(config, run_dir, algorithm, budget, seeds)
    logger = MemberLogs(config, run_dir, algorithm, members) if members else Logger(config, run_dir, algorithm, seeds)
    try:
        return _train(config, learner_setup, algorithm, budget, call_budget, seeds, checkpoints, logger, members)
    finally:
        logger.close()


def learn_call_budget(budget: budget_lib.Budget, calls_per_evaluation: int) -> budget_lib.Budget:
    """The budget one learn call covers when each evaluation interval runs as `calls_per_evaluation` calls
    (`logger.progress_per_evaluation`): the same updates, steps and schedules, in shorter scans."""
    if calls_per_evaluation == 1:
        return budget
    budget_lib.check_divides("the updates per evaluation", budget.updates_per_evaluation, "logger.progress_per_evaluation",
                             calls_per_evaluation)
    return dataclasses.replace(budget, num_evaluation=budget.num_evaluation * calls_per_evaluation,
                               updates_per_evaluation=budget.updates_per_evaluation // calls_per_evaluation)


def _train(config: DictConfig, learner_setup: LearnerSetup, algorithm: str, budget: budget_lib.Budget,
           call_budget: budget_lib.Budget, seeds: List[int], checkpoints: checkpointing.Checkpoints, logger: Logger,
           members: List[sweep.Member]) -> RunResult:
    """setup → resume? → compile → [learn → evaluate → checkpoint] × N → absolute metric, as named steps.
    `call_budget`: what one learn call covers (an evaluation interval, or its share: learn_call_budget). `members`:
    a sweep's, one per seed of `seeds` ([] for a run that sweeps nothing)."""
    wall_start = time.perf_counter()
    calls_per_evaluation = call_budget.num_evaluation // budget.num_evaluation
    train_env, eval_env = envs_lib.make(config.env)
    logger.message(_describe(algorithm, config, budget, seeds, members))
    # N seeds' identical setup programs compile once, unless the run turned the compilation cache off
    with compilation_cache.setup_programs_cached(bool(config.arch.get("compilation_cache", True))):
        prepared = set_up(learner_setup, train_env, config, call_budget, seeds, members)
    fresh_eval_params = eval_params_of(prepared.system, prepared.fresh_state, 0, len(seeds))
    # Resume (or load params) before compiling, so that a refused checkpoint costs no compilation.
    learner_state, progress = resume(checkpoints, prepared, budget, logger, fresh_eval_params)
    evaluator = make_evaluator(eval_env, prepared.system.eval_policy, int(config.arch.num_eval_episodes))
    learn, compile_seconds = compile_programs(prepared.system, prepared.fresh_state, len(seeds), evaluator,
                                              fresh_eval_params, parallel.seed_loop_of(config), prepared.member_learner,
                                              prepared.population_learner)
    loop = Loop(call_budget, seeds, prepared.system, logger, as_stage(evaluator))
    logger.message(f"compiled the learner in {compile_seconds:.1f}s")
    del prepared  # a resumed run need not keep the fresh state

    learn_seconds = 0.0
    run_start = time.perf_counter()
    first_evaluation = progress.evaluations_done
    first_call, num_calls = first_evaluation * calls_per_evaluation, call_budget.num_evaluation
    # Every process runs this loop's cross-process stages in one order: learn → evaluate each seed → save.
    for call in range(first_call, num_calls):
        learned = learn_once(learn, learner_state)
        learner_state, learn_seconds = learned.learner_state, learn_seconds + learned.seconds
        progress = dataclasses.replace(progress, steps_done=progress.steps_done + call_budget.steps_per_evaluation)
        elapsed = time.perf_counter() - run_start
        eta = elapsed / (call + 1 - first_call) * (num_calls - call - 1)
        train_means = log_training(loop, learned, progress, call, eta)
        for line in pbt.lineage_lines(seeds, train_means, progress.steps_done) if pbt.enabled(config) else ():
            logger.message(line)
        if (call + 1) % calls_per_evaluation:
            continue  # a progress line only: the interval goes on
        evaluation = call // calls_per_evaluation
        progress, evaluated = evaluate_seeds(loop, learned, progress, train_means)
        progress = dataclasses.replace(progress, evaluations_done=evaluation + 1, log_history=logger.json_state())
        save_checkpoint(loop, checkpoints, learner_state, progress, evaluated)
        if evaluation == first_evaluation:
            steps_per_second = learned_steps_per_second(call_budget, learn_seconds, calls_per_evaluation)
            logger.message(expected_wall_time(time.perf_counter() - run_start, steps_per_second, evaluation + 1,
                                              budget.num_evaluation, time.perf_counter() - wall_start))
            if jax.default_backend() == "cpu" and config.arch.get("reference_timesteps") is not None:
                logger.message(reference_budget_cost(int(config.arch.total_timesteps),
                                                     int(config.arch.reference_timesteps),
                                                     config.arch.get("reference_source"), steps_per_second,
                                                     len(seeds)))

    if progress.steps_done != budget.total_timesteps:  # the budget arithmetic is the contract; never drift from it
        raise AssertionError(f"ran {progress.steps_done} steps, budget was {budget.total_timesteps}")
    final_params = [eval_params_of(loop.system, learner_state, index, len(seeds)) for index in range(len(seeds))]
    absolute_returns, final_returns = end_of_run_returns(loop.evaluate, loop.logger, loop.seeds, progress,
                                                         final_params)
    learned_here = (budget.num_evaluation - first_evaluation) * budget.steps_per_evaluation * len(seeds)
    _report(loop, config, progress, absolute_returns, final_returns, compile_seconds, learn_seconds, learned_here,
            resumed=first_evaluation > 0, members=members)
    logger.finish(run_record.Timings(time.perf_counter() - wall_start, compile_seconds, learn_seconds, learned_here),
                  resumed=first_evaluation > 0)
    return RunResult(float(np.mean(absolute_returns)), absolute_returns, list(progress.best_returns), final_returns,
                     progress.steps_done, learner_state, compile_seconds, learn_seconds, learned_here)


def learned_steps_per_second(call_budget: budget_lib.Budget, learn_seconds: float, calls: int) -> float:
    """Env steps per second (per seed) of the learn calls timed so far."""
    return calls * call_budget.steps_per_evaluation / max(learn_seconds, 1e-9)


def expected_wall_time(interval_seconds: float, steps_per_second: float, intervals_done: int, intervals: int,
                       elapsed: float) -> str:
    """The run's expected wall time, from its first evaluation interval (learning, evaluating, saving): a user
    sees within one interval whether the budget fits the time they have. The end-of-run evaluations of the best
    and final params are not counted."""
    remaining = interval_seconds / max(intervals_done, 1) * (intervals - intervals_done)
    return (f"expected wall time: about {format_duration(elapsed + remaining)} in all, {format_duration(remaining)} "
            f"from now: learning ran at {steps_per_second:,.0f} steps/s per seed, and the first interval with its "
            f"evaluation took {interval_seconds:.1f}s")


def reference_budget_cost(total_timesteps: int, reference_timesteps: int, source: Optional[str],
                          steps_per_second: float, num_seeds: int = 1) -> str:
    """On a CPU, what the published recipe's budget (a tuned file's `arch.reference_timesteps`) would cost at the
    speed this run measured (`steps_per_second` per seed): a CPU budget is a fraction of what a GPU affords, and a
    user should see how far the published level is before reading this run's return against it."""
    where = f" ({source})" if source else ""
    seeds = f" for its {num_seeds} seeds" if num_seeds > 1 else ""
    percent = 100.0 * total_timesteps / reference_timesteps
    share = f"{percent:.0f}%" if percent >= 10 else f"{percent:.2g}%"  # a short probe is 0.32%, not 0%
    return (f"on this CPU the budget is {share} of the published recipe's "
            f"{reference_timesteps:,} steps per seed{where}, which would take this run about "
            f"{format_duration(reference_timesteps / max(steps_per_second, 1e-9))}{seeds} at the speed measured here")


# ----------------------------------------------------------------------------------------------------------------
# The loop's steps, each with its inputs and outputs explicit. The benchmarks time the same steps.


class Prepared(NamedTuple):
    """What setup gives the rest of the run."""

    system: SystemSetup  # the first seed's: its learner, eval policy and eval params reader serve every seed
    fresh_state: LearnerState  # every seed's fresh learner state, side by side (`parallel.stack_seeds`)
    eval_keys: np.ndarray  # (num_seeds, 2): each seed's first eval key
    # a sweep's: the system's learner as `(state, member index) -> ...`, each member reading its own swept values
    member_learner: Optional[MemberLearner] = None
    # a PBT population's: one device's learn call over every member's state at once (pbt.population_learner)
    population_learner: Optional[Callable] = None


def set_up(learner_setup: LearnerSetup, train_env: envs_lib.Environment, config: DictConfig, budget: budget_lib.Budget,
           seeds: List[int], members: Sequence[sweep.Member] = ()) -> Prepared:
    """Each seed is set up exactly as a single run with that seed would be; the states then sit side by side. A
    sweep's member is set up as the single run it stands for (its config), and the learner, built once, reads each
    member's swept values by the member's index (hyperparams.per_member). A PBT population's member is set up as
    the run with its seed and starting values, and its state carries its values (pbt.PBTState)."""
    starting_values = pbt.initial_values(config, seeds) if pbt.enabled(config) else []
    configs = ([member.config for member in members]
               or [sweep.single_run_config(config, values, seed) for values, seed in zip(starting_values, seeds)]
               or [config] * len(seeds))
    setups, eval_keys = [], []
    with hyperparams.sweeping(frozenset(sweep.swept_values(config)) | frozenset(pbt.ranges_of(config))):
        for seed, seed_config in zip(seeds, configs):
            setup_key, eval_key = host_keys.split(host_keys.seed_key(seed))
            setups.append(learner_setup(train_env, setup_key, seed_config, budget))
            eval_keys.append(np.asarray(eval_key))
    member_learner = hyperparams.per_member(setups[0].learner_fn, {
        name: [member.values[name] for member in members] for name in sweep.swept_values(config)}) if members else None
    if starting_values:
        states = [pbt.initial_state(each.learner_state, values, seeds[0])
                  for each, values in zip(setups, starting_values)]
        population_learner = pbt.population_learner(
            setups[0].learner_fn, config, budget.updates_per_evaluation, len(seeds),
            parallel.seeds_in_sequence(parallel.seed_loop_of(config)))
        system = setups[0]._replace(eval_params=pbt.eval_params_reader(setups[0].eval_params))
        return Prepared(system, parallel.stack_seeds(states), np.stack(eval_keys), population_learner=population_learner)
    return Prepared(setups[0], parallel.stack_seeds([each.learner_state for each in setups]), np.stack(eval_keys),
                    member_learner)


def resume(checkpoints: checkpointing.Checkpoints, prepared: Prepared, budget: budget_lib.Budget, logger: Logger,
           fresh_eval_params: HostTree) -> Tuple[LearnerState, checkpointing.Progress]:
    """The learner state and progress to start from: resumed, with loaded params, or fresh. `fresh_eval_params`:
    the first seed's, the template a saved run's params load into."""
    num_seeds = len(prepared.eval_keys)
    fresh_progress = checkpointing.Progress(
        evaluations_done=0, steps_done=budget.warmup_steps, eval_keys=prepared.eval_keys,
        best_returns=[-math.inf] * num_seeds, best_params=[None] * num_seeds)
    learner_state, progress, note = checkpoints.restore(prepared.fresh_state, fresh_progress, fresh_eval_params)
    if note:
        logger.message(note)
    logger.restore_json(progress.log_history)
    return learner_state, progress


def compile_programs(system: SystemSetup, example_state: LearnerState, num_seeds: int, evaluator: Evaluator,
                     example_eval_params: HostTree, seed_loop: str = "vmap",
                     member_learner: Optional[MemberLearner] = None,
                     population_learner: Optional[Callable] = None) -> Tuple[Callable, float]:
    """(the distributed learner, its compile seconds), with the evaluator compiled beside it on a second thread.
    XLA compiles without holding the GIL and a compilation runs on one core, so on a machine with two or more
    the evaluator's compilation (2-3 s for PPO on CartPole) mostly hides behind the learner's."""
    # lowered here, before the learner: programs are traced and lowered on this thread only (a lowering rule
    # switched on for one program never reaches another), and only XLA's compilations overlap
    evaluator_program = evaluator.lower(example_eval_params)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="compile-evaluator") as pool:
        evaluator_compiled = pool.submit(evaluator.compile_lowered, evaluator_program) if evaluator_program else None
        learner = compile_learner(system, example_state, num_seeds, seed_loop, member_learner, population_learner)
        if evaluator_compiled is not None:
            evaluator_compiled.result()  # re-raises what the evaluator's compilation raised
    return learner


def compile_learner(system: SystemSetup, example_state: LearnerState, num_seeds: int, seed_loop: str = "vmap",
                    member_learner: Optional[MemberLearner] = None,
                    population_learner: Optional[Callable] = None) -> Tuple[Callable, float]:
    """(the distributed learner, compile seconds). Compiled for the fresh state's types, so that a resumed run
    runs the very program an uninterrupted one does. `seed_loop`: arch.seed_loop (parallel.seeds_in_sequence).
    `member_learner`: a sweep's (`Prepared.member_learner`), compiled in place of the system's learner;
    `population_learner`: a PBT population's, likewise."""
    start = time.perf_counter()
    if population_learner is not None:
        learn = parallel.compile_distributed(parallel.distribute_population(population_learner), example_state)
    elif member_learner is not None:
        learn = parallel.compile_learner(member_learner, example_state, num_seeds, seed_loop, member_indexed=True)
    else:
        learn = parallel.compile_learner(system.learner_fn, example_state, num_seeds, seed_loop)
    return learn, time.perf_counter() - start


class Learned(NamedTuple):
    learner_state: LearnerState
    outputs: LearnerOutput  # the learner's outputs, this process's part as numpy
    seconds: float  # the learn call alone: what throughput is measured on


def learn_once(learn: Callable, learner_state: LearnerState) -> Learned:
    """One learn call: the updates between two evaluations, timed until the new state is ready."""
    start = time.perf_counter()
    learner_state, outputs = learn(learner_state)
    jax.block_until_ready(learner_state)
    seconds = time.perf_counter() - start
    return Learned(learner_state, parallel.local_host_copy(outputs), seconds)  # no cross-process fetch





def as_stage(evaluator: Evaluate) -> Evaluate:
    """The evaluator as a stage every process enters (the pmapped evaluator runs one program over every
    process's devices)."""

    def evaluate(eval_params: HostTree, key: jax.Array) -> Dict[str, np.ndarray]:
        with parallel.collective_stage("evaluation"):
            return evaluator(eval_params, key)

    return evaluate


def make_evaluate(eval_env: envs_lib.Environment, eval_policy: EvalPolicy, num_episodes: int) -> Evaluate:
    """The evaluator of `num_episodes` episodes, compiled at its first call, as a stage every process enters."""
    return as_stage(make_evaluator(eval_env, eval_policy, num_episodes))


class Loop(NamedTuple):
    """What the steps after compilation read and none of them changes."""

    # one learn call's: an evaluation interval's, or its share of it (progress_per_evaluation)
    budget: budget_lib.Budget
    seeds: List[int]
    system: SystemSetup
    logger: Logger
    evaluate: Evaluate


class Evaluated(NamedTuple):
    """One evaluation of every seed."""

    eval_returns: List[float]
    eval_params: List[HostTree]  # per seed: the params just evaluated


def log_training(loop: Loop, learned: Learned, progress: checkpointing.Progress, call: int, eta: float
                 ) -> List[Dict[str, float]]:
    """Each seed in turn: refuse NaN/inf, log a progress line and its training metrics; returns their means."""
    num_seeds = len(loop.seeds)
    steps_per_second = loop.budget.steps_per_evaluation / learned.seconds  # of each seed
    all_means = []
    for seed_index, seed in enumerate(loop.seeds):
        seed_outputs = parallel.seed_view(learned.outputs, seed_index, num_seeds)
        _refuse_non_finite(seed_outputs.train_metrics, call, loop.budget, seed if num_seeds > 1 else None)
        train_means = {name: float(np.mean(value)) for name, value in seed_outputs.train_metrics.items()}
        loop.logger.progress(seed, progress.steps_done, loop.budget.total_timesteps,
                             _mean_completed_episode_return(seed_outputs.episode_metrics), steps_per_second, eta,
                             train_means, member=seed_index)
        all_means.append({"steps_per_second": steps_per_second, **train_means})
    return all_means


def evaluate_seeds(loop: Loop, learned: Learned, progress: checkpointing.Progress,
                   train_means: List[Dict[str, float]]) -> Tuple[checkpointing.Progress, Evaluated]:
    """Each seed in turn: evaluate it (its last training metrics logged beside), keep its best params so far."""
    num_seeds = len(loop.seeds)
    # copies: the progress passed in stays as it was
    eval_keys = progress.eval_keys.copy()
    best_returns, best_params = list(progress.best_returns), list(progress.best_params)
    eval_returns, eval_params_now = [], []
    for seed_index, seed in enumerate(loop.seeds):
        eval_params = eval_params_of(loop.system, learned.learner_state, seed_index, num_seeds)
        next_eval_key, this_eval_key = host_keys.split(eval_keys[seed_index])
        eval_keys[seed_index] = np.asarray(next_eval_key)
        stats = loop.logger.evaluation("eval", seed, progress.steps_done, loop.evaluate(eval_params, this_eval_key),
                                       train_means[seed_index], member=seed_index)
        eval_return = stats["episode_return"]["mean"]
        if eval_return >= best_returns[seed_index]:
            best_returns[seed_index], best_params[seed_index] = eval_return, eval_params
        eval_returns.append(eval_return)
        eval_params_now.append(eval_params)
    progress = dataclasses.replace(progress, eval_keys=eval_keys, best_returns=best_returns, best_params=best_params)
    return progress, Evaluated(eval_returns, eval_params_now)


def save_checkpoint(loop: Loop, checkpoints: checkpointing.Checkpoints, learner_state: LearnerState,
                    progress: checkpointing.Progress, evaluated: Evaluated) -> None:
    """Save after an evaluation (every process: the gather is a collective); logs where it went."""
    saved = checkpoints.save(learner_state, progress, evaluated.eval_params, float(np.mean(evaluated.eval_returns)))
    if saved:
        loop.logger.message(f"checkpoint: {saved}")


def _report(loop: Loop, config: DictConfig, progress: checkpointing.Progress, absolute_returns: List[float],
            final_returns: List[float], compile_seconds: float, learn_seconds: float, learned_here: int, resumed: bool,
            members: Sequence[sweep.Member] = ()) -> None:
    num_seeds = len(loop.seeds)
    loop.logger.message(
        f"done: {progress.steps_done:,} steps{' per seed' if num_seeds > 1 else ''} | compile {compile_seconds:.1f}s"
        f" | learning {learn_seconds:.1f}s ({learned_here:,} learning steps"
        + (" since resuming" if resumed else "") + (", all seeds" if num_seeds > 1 else "")
        + f", at {learned_here / max(learn_seconds, 1e-9):,.0f} steps/s) | best eval return "
        + ", ".join(f"{r:.2f}" for r in progress.best_returns)
        + " | absolute return " + ", ".join(f"{r:.2f}" for r in absolute_returns)
        + " | final return " + ", ".join(f"{r:.2f}" for r in final_returns)
    )
    # a plain run's seeds are one population; a sweep's are one per grid point
    populations = [list(range(num_seeds))] if not members else [
        [member.number for member in members if member.point == point] for point in sorted({m.point for m in members})]
    for indices in populations if num_seeds > 1 else []:
        point = f" {members[indices[0]].label()}" if members else ""
        for name, returns in (("absolute", absolute_returns), ("final", final_returns)):
            if len(indices) > 1:
                summary = population.summarize([returns[i] for i in indices], [loop.seeds[i] for i in indices],
                                               config.env.solved_return)
                loop.logger.message(f"population{point}: {name} return {summary.describe()}")
    loop.logger.message(f"logs: {loop.logger.run_dir}")


def _refuse_non_finite(train_metrics: Dict[str, np.ndarray], call: int, budget: budget_lib.Budget,
                       seed: int | None) -> None:
    """`budget`: one learn call's (`call` counts them from 0), so the update named is the run's own."""
    bad = _first_non_finite_update(train_metrics)
    if bad is not None:
        update = call * budget.updates_per_evaluation + bad[1] + 1
        raise FloatingPointError(
            f"{bad[0]} became NaN/inf at update {update} of {budget.num_updates}"
            + (f" (seed {seed})" if seed is not None else "")
            + "; lower the learning rate or system.max_grad_norm, or turn on system.normalize_observations."
        )
