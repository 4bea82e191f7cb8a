"""What the Anakin loop (experiment.py) and the Sebulba loop (sebulba/loop.py) share, below both of them: a run's
result, its directory, a seed's eval params read off a learner state, and the end-of-run evaluations (the best
params' absolute metric beside the final params' return)."""

from __future__ import annotations

import os
from typing import Callable, Dict, List, NamedTuple, Sequence, Tuple, Union

import jax
import numpy as np
from omegaconf import DictConfig

from stoix_like.learner.system_contract import SebulbaSetup, SystemSetup
from stoix_like.run.checkpointing import Progress
from stoix_like.run.logging import Logger
from stoix_like.runtime import host_keys, parallel
from stoix_like.types import HostTree, LearnerState

Evaluate = Callable[[HostTree, jax.Array], Dict[str, np.ndarray]]  # (eval params, key) -> per-episode statistics


# The multiple of evaluation episodes used for the end-of-run evaluations: the best params (the absolute metric) and
# the final params, each over the same number of episodes so that the two returns compare.
ABSOLUTE_METRIC_EPISODE_FACTOR = 10


class RunResult(NamedTuple):
    absolute_return: float  # mean over seeds (`run` returns their IQM, which a sweep maximises)
    absolute_returns: List[float]  # per seed
    best_returns: List[float]  # per seed: the best eval return, whose params the absolute metric evaluated
    final_returns: List[float]  # per seed: the final params (what a user keeps) over the absolute metric's episodes
    steps_done: int  # env steps of each seed, warm-up included: always the budget
    learner_state: LearnerState  # the final learner state on this process's devices
    compile_seconds: float
    learn_seconds: float  # in learn calls only: no evaluation, logging or checkpointing
    learned_steps: int  # env steps those learn calls took, all seeds together (since resuming, if resumed)


def run_dir_of(config: DictConfig) -> str:
    """Hydra's per-run output directory when launched through Hydra, else logger.base_exp_path."""
    try:
        from hydra.core.hydra_config import HydraConfig

        return HydraConfig.get().runtime.output_dir
    except ValueError:  # not running under Hydra (tests, notebooks)
        return os.path.abspath(str(config.logger.base_exp_path))


def eval_params_of(system: Union[SystemSetup, SebulbaSetup], learner_state: LearnerState, seed_index: int = 0,
                   num_seeds: int = 1) -> HostTree:
    """What one seed's eval policy needs, as numpy: this process's own first slot, never a program across
    processes (see parallel.py, "one order"). `eval_params` only selects (system_contract), so it is applied to
    the whole state first, and what it selects (small: a policy's params) is copied to the host and sliced there:
    an eager slice on the device compiles a program per leaf shape."""
    return parallel.first_slot(parallel.local_host_copy(system.eval_params(learner_state)), seed_index, num_seeds)


def end_of_run_returns(evaluate: Evaluate, logger: Logger, seeds: Sequence[int], progress: Progress,
                       final_params: Sequence[HostTree]) -> Tuple[List[float], List[float]]:
    """Per seed, (absolute, final) mean returns over 10× the evaluation episodes, run as repeated calls of the
    compiled evaluator (no second compilation). The absolute metric judges each seed's best params; the final
    return judges the params training ended with, which are what a user keeps: a best-of-N alone flatters a
    learner that forgets. Both play the same episodes' keys, so the two differ by the params alone, and where the
    best params are the final ones (the last evaluation was the best) the episodes are played once."""
    absolute_returns: List[float] = []
    final_returns: List[float] = []
    for seed_index, seed in enumerate(seeds):
        _, absolute_key = host_keys.split(progress.eval_keys[seed_index])
        keys = host_keys.split(absolute_key, ABSOLUTE_METRIC_EPISODE_FACTOR)
        best, final = progress.best_params[seed_index], final_params[seed_index]
        best_episodes = _episodes(evaluate, best, keys)
        final_episodes = best_episodes if _same_params(best, final) else _episodes(evaluate, final, keys)
        for label, per_episode, returns in (("absolute", best_episodes, absolute_returns),
                                            ("final", final_episodes, final_returns)):
            stats = logger.evaluation(label, seed, progress.steps_done, per_episode, {}, member=seed_index)
            returns.append(stats["episode_return"]["mean"])
    return absolute_returns, final_returns


def _episodes(evaluate: Evaluate, params: HostTree, keys: np.ndarray) -> Dict[str, np.ndarray]:
    """Every key's evaluation episodes, one after another."""
    rounds = [evaluate(params, key) for key in keys]
    return {name: np.concatenate([r[name] for r in rounds]) for name in rounds[0]}


def _same_params(first: HostTree, second: HostTree) -> bool:
    """Whether two host copies of eval params hold the same numbers (the same tree, leaf for leaf)."""
    try:
        equal = jax.tree_util.tree_map(lambda a, b: np.array_equal(np.asarray(a), np.asarray(b)), first, second)
    except (ValueError, TypeError):  # another tree structure
        return False
    return all(jax.tree_util.tree_leaves(equal))
