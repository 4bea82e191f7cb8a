"""Where a run's checkpoints are kept: save a step, prune to the last K and the best, set a corrupt step aside.

Only process 0 writes. Saving starts with a gather of every process's devices (a collective, so every process
calls `save`); the other processes then return at once.
"""

from __future__ import annotations

import dataclasses
import os
import time
import warnings
from typing import Dict, List, Optional, Sequence

import numpy as np
from omegaconf import DictConfig

from stoix_like.runtime import parallel
from stoix_like.learner.budget import Budget
from stoix_like.run.checkpointing import format as checkpoint_format
from stoix_like.run.checkpointing.format import Progress
from stoix_like.errors import ConfigError
from stoix_like.types import HostTree, JSONValue, LearnerState

_UNREADABLE_SUFFIX = ".unreadable"


class Store:
    """One checkpoint directory: `keep_last` steps and the best by eval return stay, older ones go."""

    def __init__(self, directory: str, keep_last: int):
        if keep_last < 1:
            raise ConfigError(f"logger.checkpointing.keep_last={keep_last} must be at least 1.")
        self.directory, self.keep_last = directory, keep_last

    def refuse_to_overwrite(self, resume_root: Optional[str], resume_step: Optional[int]) -> None:
        """Saving here must not clobber another run's steps, nor later steps of the run being resumed."""
        existing = checkpoint_format.finalized_steps(self.directory)
        if not existing:
            return
        if resume_root == self.directory:  # continuing the run that saved here
            later = [step for step in existing if resume_step is not None and step > resume_step]
            if later:
                raise ConfigError(
                    f"resuming from step {resume_step} while saving into {self.directory} would overwrite its "
                    f"later steps ({short_list(later)}); set logger.checkpointing.directory to another directory.")
            return
        raise ConfigError(
            f"logger.checkpointing.directory={self.directory} already holds checkpoints (steps "
            f"{short_list(existing)}) of another run; pass logger.checkpointing.resume=True to continue it, "
            f"or choose another directory.")

    def save(self, learner_state: LearnerState, progress: Progress, eval_params_now: Sequence[HostTree],
             eval_return: float, run: Dict[str, JSONValue], budget: Budget, seeds: List[int],
             config: DictConfig) -> Optional[str]:
        """Save one step (every process calls this: the state gather is a collective); the path, on process 0.

        `run` is `format.describe_run` of this run; `config` its composed config.
        """
        global_state = parallel.gather_to_host(checkpoint_format.to_storable(learner_state))
        if not parallel.is_main_process():
            return None
        stack = checkpoint_format.stack
        items: Dict[str, HostTree] = {
            "learner_state": global_state,
            "eval_params": stack(eval_params_now),
            "best_params": stack(progress.best_params),
            "loop": {"eval_keys": np.asarray(progress.eval_keys, np.uint32)},
        }
        num_seeds = len(seeds)
        if hasattr(global_state, "params"):  # what load_params_from reads: one slot per seed
            items["params"] = stack([parallel.first_slot(global_state.params, k, num_seeds) for k in range(num_seeds)])
        fingerprint = checkpoint_format.state_fingerprint
        meta = {
            "format_version": checkpoint_format.FORMAT_VERSION,
            **run,
            "budget": dataclasses.asdict(budget),
            "seeds": seeds,
            "evaluations_done": progress.evaluations_done,
            "steps_done": progress.steps_done,
            "eval_return": checkpoint_format.json_float(eval_return),
            "best_returns": [checkpoint_format.json_float(r) for r in progress.best_returns],
            "fingerprint": fingerprint(global_state),
            "params_fingerprint": fingerprint(items["params"]) if "params" in items else None,
            "eval_params_fingerprint": fingerprint(items["best_params"]),
            "config": checkpoint_format.config_container(config),
            "log_history": progress.log_history,
        }
        manager = checkpoint_format.manager(self.directory)
        checkpoint_format.write_step(manager, progress.steps_done, items, meta)
        for step in self._steps_to_drop():
            manager.delete(step)
        manager.close()
        return os.path.join(self.directory, str(progress.steps_done))

    def _steps_to_drop(self) -> List[int]:
        """All but the last `keep_last` steps and the best by eval return (the latest of equals).

        Decided from the steps' own metadata rather than by orbax's preservation policies, whose memory of
        the metrics does not outlive the process: a resumed run keeps pruning what the killed one saved.
        """
        steps = sorted(checkpoint_format.finalized_steps(self.directory))
        keep = set(steps[-self.keep_last:])
        returns = {}
        for step in steps:
            try:
                value = checkpoint_format.read_meta(self.directory, step).get("eval_return")
            except Exception:  # noqa: BLE001 - unreadable: never the best, and gone once older than the last K
                continue
            if value is not None:
                returns[step] = float(value)
        if returns:
            keep.add(max(returns, key=lambda step: (returns[step], step)))
        return [step for step in steps if step not in keep]


def set_aside(root: str, step: int, error: Exception, rename: bool) -> None:
    """Warn that a step cannot be read; with `rename`, move it out of the way (never delete it)."""
    path = os.path.join(root, str(step))
    message = f"checkpoint {path} is unreadable ({type(error).__name__}: {str(error)[:200]})"
    # Saving into this root again would collide with the bad step's name, so it is renamed, never deleted.
    if rename:
        aside = f"{path}{_UNREADABLE_SUFFIX}-{int(time.time())}"
        os.replace(path, aside)
        message += f"; moved to {aside}"
    warnings.warn(message + "; trying the previous checkpoint.", stacklevel=3)


def short_list(steps: Sequence[int]) -> str:
    steps = sorted(steps)
    return ", ".join(map(str, steps)) if len(steps) <= 4 else f"{steps[0]}, ..., {steps[-1]}"
