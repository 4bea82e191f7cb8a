"""A run's checkpoints as the experiment loop sees them: settings checked up front, then restore and save.

Only process 0 reads and writes checkpoints. In a multi-host run what it decides (a refusal) and what it reads
(the state and progress to resume) reach the other processes as one pytree in one `parallel.broadcast_from_main`
call; that broadcast, like the save's gather, is a stage every process enters in the same order
(`parallel.collective_stage`), and a refusal found by process 0 is raised on every process.
"""

from __future__ import annotations

import os
from typing import NamedTuple, Optional, Sequence, Tuple

import jax
import numpy as np
from omegaconf import DictConfig

from stoix_like.runtime import parallel
from stoix_like.learner.budget import Budget
from stoix_like.run.checkpointing import format as checkpoint_format
from stoix_like.run.checkpointing import resume
from stoix_like.run.checkpointing.format import Progress
from stoix_like.run.checkpointing.resume import ResumeSource, ThisRun, absolute, locate
from stoix_like.run.checkpointing.store import Store
from stoix_like.errors import ConfigError
from stoix_like.types import HostTree, LearnerState


class Checkpoints:
    """Where a run saves, and what it resumes from; checks the request before any long work.

    `logger.checkpointing`: `save_model` saves at each evaluation into `directory` (default
    `<run dir>/checkpoints`), keeping the last `keep_last` and the best by eval return. `resume` continues the
    run that saved into `directory` (starting fresh when it holds no checkpoint yet, so a requeued job can
    always pass it); `resume_from=PATH` continues from PATH (a root: its latest good step, or one step).
    `load_params_from=PATH` starts a new run from saved params only.
    """

    def __init__(self, config: DictConfig, run_dir: str, algorithm: str, budget: Budget, seeds: Sequence[int]):
        settings = config.logger.checkpointing
        self.run = ThisRun(config, algorithm, budget, list(seeds))
        self.save_model = bool(settings.save_model)
        explicit_directory = settings.directory
        directory = absolute(explicit_directory) if explicit_directory else os.path.join(run_dir, "checkpoints")
        self.store = Store(directory, int(settings.keep_last))
        self.load_params_from = absolute(settings.load_params_from) if settings.load_params_from else None
        self.source: Optional[ResumeSource] = None

        if settings.resume and settings.resume_from:
            raise ConfigError("logger.checkpointing.resume=True continues the run in logger.checkpointing.directory; "
                              "resume_from=PATH continues from PATH. Pass one of them.")
        if (settings.resume or settings.resume_from) and self.load_params_from:
            raise ConfigError("logger.checkpointing.load_params_from starts a new run from saved params; it cannot "
                              "be combined with resume or resume_from.")
        if settings.resume:
            if not explicit_directory:
                raise ConfigError(
                    "logger.checkpointing.resume=True needs logger.checkpointing.directory=DIR, the directory the "
                    "run to continue saved into (every Hydra run gets a new run dir, so there is nothing to resume "
                    "in it); or pass logger.checkpointing.resume_from=PATH.")
            self.source = ResumeSource(directory, None, must_exist=False)
        elif settings.resume_from:
            self.source = ResumeSource(*locate(absolute(settings.resume_from)), must_exist=True)

        if self.save_model or self.source is not None:  # the same on every process: they all agree or none
            self._check_before_any_work()
        if self.load_params_from is not None:  # every process reads the params it starts from
            self._load_source = locate(self.load_params_from)

    @property
    def directory(self) -> str:
        return self.store.directory

    def _check_before_any_work(self) -> None:
        """Process 0 checks the directories and the checkpoint to resume; a refusal stops every process."""
        refusal = None
        if parallel.is_main_process():  # the one process that reads and writes checkpoints
            try:
                if self.save_model:
                    self.store.refuse_to_overwrite(self.source.root if self.source else None,
                                                   self.source.step if self.source else None)
                if self.source is not None:
                    self.source.check_latest(self.run)
            except ConfigError as error:
                refusal = error
        refused = parallel.broadcast_from_main(np.asarray(refusal is not None), stage="checkpoint checks")
        if refusal is not None:
            raise refusal
        if bool(refused):
            raise ConfigError("process 0 refused the checkpoint settings; see its log.")

    # -- resume / load -------------------------------------------------------------------------------------------

    def restore(self, learner_state: LearnerState, progress: Progress, eval_params_template: HostTree
                ) -> Tuple[LearnerState, Progress, Optional[str]]:
        """The state to start from: resumed, or with loaded params, or as given. Returns (state, progress, note)."""
        if self.load_params_from is not None:
            root, step = self._load_source
            return resume.load_params(root, step, learner_state, len(self.run.seeds)), progress, (
                f"started from the params saved at {os.path.join(root, str(step or 'latest'))}")
        if self.source is None:
            return learner_state, progress, None
        restored = self._read_on_main_then_broadcast(self.source, learner_state, eval_params_template)
        if restored is None:
            if self.source.must_exist:
                raise ConfigError(f"no readable checkpoint under {self.source.root}.")
            return learner_state, progress, f"no checkpoint under {self.source.root} yet: starting afresh"
        global_state, restored_progress, step = restored
        state = checkpoint_format.from_storable(parallel.local_share(global_state), learner_state)
        return state, restored_progress, f"resumed from {os.path.join(self.source.root, str(step))}"

    def _read_on_main_then_broadcast(self, source: ResumeSource, learner_state: LearnerState,
                                     eval_params_template: HostTree) -> Optional[Tuple[HostTree, Progress, int]]:
        """Process 0 reads the newest good step; every process gets (global state, progress, step) or None."""
        read = lambda: source.read_latest_good(  # noqa: E731
            self.run, learner_state, eval_params_template,
            set_aside_unreadable=self.save_model and source.root == self.directory)
        if parallel.process_count() == 1:
            return read()
        result, refusal = None, None
        if parallel.is_main_process():
            try:
                result = read()
            except ConfigError as error:
                refusal = error
        num_seeds = len(self.run.seeds)
        if parallel.is_main_process() and result is not None:
            global_state, progress, _ = result
            sent = _Restored(found=np.asarray(True), refused=np.asarray(False),
                             evaluations_done=np.asarray(progress.evaluations_done, np.int32),
                             learner_state=global_state, eval_keys=np.asarray(progress.eval_keys, np.uint32),
                             best_returns=np.asarray(progress.best_returns, np.float32),
                             best_params=checkpoint_format.stack(progress.best_params))
        else:  # what the others receive into; process 0 sends it too when it found nothing or refused
            zeros = lambda template: jax.tree_util.tree_map(  # noqa: E731
                lambda leaf: np.zeros(leaf.shape, leaf.dtype), template)
            sent = _Restored(found=np.asarray(False), refused=np.asarray(refusal is not None),
                             evaluations_done=np.asarray(0, np.int32),
                             learner_state=zeros(checkpoint_format.global_template(learner_state)),
                             eval_keys=np.zeros((num_seeds, 2), np.uint32),
                             best_returns=np.zeros(num_seeds, np.float32),
                             best_params=zeros(checkpoint_format.stacked_template(eval_params_template, num_seeds)))
        received = parallel.broadcast_from_main(sent, stage="checkpoint restore")
        if refusal is not None:
            raise refusal
        if bool(received.refused):
            raise ConfigError("process 0 refused the checkpoint; see its log.")
        if not bool(received.found):
            return None
        if parallel.is_main_process():  # exact values where they are logged
            return result
        # The step and the env steps done follow from the evaluations done and the budget (checked equal), so
        # no count beyond 32 bits has to travel.
        budget, evaluations_done = self.run.budget, int(received.evaluations_done)
        steps_done = budget.warmup_steps + evaluations_done * budget.steps_per_evaluation
        progress = Progress(evaluations_done, steps_done, np.array(received.eval_keys),
                            [float(r) for r in received.best_returns],
                            checkpoint_format.unstack(received.best_params, num_seeds))
        return received.learner_state, progress, steps_done

    # -- save ----------------------------------------------------------------------------------------------------

    def save(self, learner_state: LearnerState, progress: Progress, eval_params_now: Sequence[HostTree],
             eval_return: float) -> Optional[str]:
        """Save after an evaluation; every process calls it (the state gather is a collective)."""
        if not self.save_model:
            return None
        run = self.run
        return self.store.save(learner_state, progress, eval_params_now, eval_return,
                               checkpoint_format.describe_run(run.config, run.algorithm), run.budget, run.seeds,
                               run.config)


class _Restored(NamedTuple):
    """What process 0 read, as the arrays every process receives in one broadcast."""

    found: np.ndarray  # bool: a readable, compatible step
    refused: np.ndarray  # bool: process 0 refused the checkpoint (its ConfigError is raised there)
    evaluations_done: np.ndarray  # int32; the step and the env steps done follow from it and the budget
    learner_state: HostTree  # gathered and storable: every process's devices on axis 0
    eval_keys: np.ndarray  # (num_seeds, 2) uint32
    best_returns: np.ndarray  # (num_seeds,) float32: only process 0 logs, and it keeps its exact values
    best_params: HostTree  # stacked per seed
