"""What a run starts from: which saved step to resume, whether it fits this run, and saved params to start from.

A resumed run must be the run that saved: the same algorithm, env, network, budget and seeds (refused
otherwise, before any long work). Changed hyperparameters only warn. The newest readable step wins: one that
exists but cannot be read is set aside (`store.set_aside`) and the one before it is tried.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from typing import Dict, List, Optional, Tuple

import jax
import numpy as np
from omegaconf import DictConfig, OmegaConf

from stoix_like.runtime import parallel
from stoix_like.learner.budget import Budget
from stoix_like.run.checkpointing import format as checkpoint_format
from stoix_like.run.checkpointing import store
from stoix_like.run.checkpointing.format import Progress
from stoix_like.errors import ConfigError
from stoix_like.types import HostTree, JSONValue, LearnerState


def locate(path: str) -> Tuple[str, Optional[int]]:
    """(root, step) of a checkpoint path: a root (step None: its latest good one) or one step inside a root."""
    if not os.path.isdir(path):
        raise ConfigError(f"no checkpoint at {path}: no such directory.")
    name = os.path.basename(os.path.normpath(path))
    if name.isdigit() and os.path.isdir(os.path.join(path, "meta")):
        return os.path.dirname(os.path.normpath(path)), int(name)
    if not checkpoint_format.finalized_steps(path):
        raise ConfigError(f"no checkpoint at {path}: it holds no saved step.")
    return path, None


def absolute(path: str) -> str:
    return os.path.abspath(os.path.expanduser(str(path)))


@dataclasses.dataclass
class ThisRun:
    """What a checkpoint is compared with: the run about to start."""

    config: DictConfig
    algorithm: str
    budget: Budget
    seeds: List[int]


class ResumeSource:
    """The checkpoint root a run continues from: one step of it (`step`), or its newest readable step."""

    def __init__(self, root: str, step: Optional[int], must_exist: bool):
        self.root, self.step = root, step
        self.must_exist = must_exist  # resume_from names a checkpoint: not finding one is an error

    def candidate_steps(self) -> List[int]:
        if self.step is not None:
            return [self.step]
        return sorted(checkpoint_format.finalized_steps(self.root), reverse=True)

    def check_latest(self, run: ThisRun) -> None:
        """Refuse an incompatible checkpoint now, before envs, setup and compilation."""
        if not os.path.isdir(self.root):
            if self.must_exist:
                raise ConfigError(f"logger.checkpointing.resume_from={self.root}: no such directory.")
            return
        for step in self.candidate_steps():
            try:
                meta = checkpoint_format.read_meta(self.root, step)
            except Exception:  # noqa: BLE001 - an unreadable step is skipped here and set aside at restore
                continue
            check_compatible(meta, os.path.join(self.root, str(step)), run)
            return

    def read_latest_good(self, run: ThisRun, learner_state: LearnerState, eval_params_template: HostTree,
                         set_aside_unreadable: bool) -> Optional[Tuple[HostTree, Progress, int]]:
        """(gathered storable learner state, progress, step) of the newest readable step, or None if there is none.

        An unreadable step is warned about and, with `set_aside_unreadable`, renamed out of the way.
        """
        num_seeds = len(run.seeds)
        for step in self.candidate_steps():
            where = os.path.join(self.root, str(step))
            try:
                meta = checkpoint_format.read_meta(self.root, step)
            except Exception as error:  # noqa: BLE001
                store.set_aside(self.root, step, error, rename=set_aside_unreadable)
                continue
            check_compatible(meta, where, run)
            templates = {
                "learner_state": checkpoint_format.global_template(learner_state),
                "best_params": checkpoint_format.stacked_template(eval_params_template, num_seeds),
                "loop": {"eval_keys": jax.ShapeDtypeStruct((num_seeds, 2), np.uint32)},
            }
            # A state of another structure is refused here, so that a failed read below can only mean damage.
            for item, saved_fingerprint in (("learner_state", meta["fingerprint"]),
                                            ("best_params", meta.get("eval_params_fingerprint"))):
                difference = saved_fingerprint and checkpoint_format.first_difference(
                    saved_fingerprint, checkpoint_format.state_fingerprint(templates[item]), item)
                if difference:
                    raise ConfigError(f"checkpoint {where} holds a {item} of another shape: {difference}; "
                                      f"refusing to resume it.")
            try:
                items = checkpoint_format.read_items(self.root, step, templates)
            except Exception as error:  # noqa: BLE001 - a corrupt step: use the one before
                store.set_aside(self.root, step, error, rename=set_aside_unreadable)
                continue
            progress = Progress(
                evaluations_done=int(meta["evaluations_done"]),
                steps_done=int(meta["steps_done"]),
                eval_keys=np.array(items["loop"]["eval_keys"]),  # a writable copy
                best_returns=[checkpoint_format.float_of_json(r) for r in meta["best_returns"]],
                best_params=checkpoint_format.unstack(items["best_params"], num_seeds),
                log_history=meta.get("log_history"),
            )
            return items["learner_state"], progress, step
        return None


def check_compatible(meta: Dict[str, JSONValue], where: str, run: ThisRun) -> None:
    """Refuse a checkpoint another run wrote (or one this code cannot read); warn about changed hyperparameters."""
    where = f"checkpoint {where}"
    readable = checkpoint_format.READABLE_FORMAT_VERSIONS
    if meta.get("format_version") not in readable:
        raise ConfigError(f"{where} has format version {meta.get('format_version')}; this code reads "
                          f"{', '.join(map(str, readable))}.")
    saved, described = checkpoint_format.saved_description(meta), checkpoint_format.describe_run(run.config, run.algorithm)
    first_difference = checkpoint_format.first_difference
    for field in ("algorithm", "env", "network"):
        if saved[field] != described[field]:
            raise ConfigError(f"{where} was written by a different {field}: "
                              f"{first_difference(saved[field], described[field], field)}; refusing to resume it.")
    budget = dataclasses.asdict(run.budget)
    if meta["budget"] != budget:
        raise ConfigError(f"{where} was written with a different budget or layout: "
                          f"{first_difference(meta['budget'], budget, 'budget')}; resume with the same "
                          f"arch.total_timesteps, arch.total_num_envs, arch.num_evaluation and device count.")
    if meta["seeds"] != run.seeds:
        raise ConfigError(f"{where} holds seeds {meta['seeds']}; this run asks for {run.seeds} "
                          f"(arch.seed, arch.num_seeds).")
    saved_system = checkpoint_format.read_config(meta).get("system")
    changed = checkpoint_format.differences(
        OmegaConf.to_container(saved_system) if saved_system is not None else {},
        OmegaConf.to_container(run.config.system), "system")
    if changed and parallel.is_main_process():
        warnings.warn(f"resuming {where} with changed hyperparameters: {'; '.join(changed[:5])}", stacklevel=2)


# ----------------------------------------------------------------------------------------------------------------
# Reading a saved run outside the loop: fine-tuning and evaluation.


@dataclasses.dataclass
class SavedRun:
    root: str
    step: int
    meta: Dict[str, JSONValue]

    @property
    def config(self) -> DictConfig:
        return checkpoint_format.read_config(self.meta)

    @property
    def budget(self) -> Budget:
        return Budget(**self.meta["budget"])


def read_saved_run(path: str) -> SavedRun:
    """The newest readable step at `path` (or that step itself), with its metadata."""
    root, step = locate(absolute(path))
    for candidate in ([step] if step is not None else sorted(checkpoint_format.finalized_steps(root), reverse=True)):
        try:
            return SavedRun(root, candidate, checkpoint_format.read_meta(root, candidate))
        except Exception as error:  # noqa: BLE001
            warnings.warn(f"checkpoint {os.path.join(root, str(candidate))} is unreadable ({error}); "
                          f"trying the previous one.", stacklevel=2)
    raise ConfigError(f"no readable checkpoint at {path}.")


def load_eval_params(saved: SavedRun, eval_params_template: HostTree, which: str) -> List[HostTree]:
    """Per seed, the eval params of a saved run: `which` is "best" or "latest"."""
    items = {"best": "best_params", "latest": "eval_params"}
    if which not in items:
        raise ConfigError(f"params={which!r} must be one of {sorted(items)}.")
    num_seeds = len(saved.meta["seeds"])
    template = checkpoint_format.stacked_template(eval_params_template, num_seeds)
    stored = checkpoint_format.read_items(saved.root, saved.step, {items[which]: template})[items[which]]
    return checkpoint_format.unstack(stored, num_seeds)


def load_params(root: str, step: Optional[int], learner_state: LearnerState, num_seeds: int) -> LearnerState:
    """`learner_state` with its params replaced by saved ones, in every slot; everything else fresh.

    Seed k takes saved seed k when the counts match, else every seed takes saved seed 0.
    """
    if not hasattr(learner_state, "params"):
        raise ConfigError("logger.checkpointing.load_params_from needs a learner state with a `params` field.")
    saved = read_saved_run(os.path.join(root, str(step)) if step is not None else root)
    saved_seeds = len(saved.meta["seeds"])
    live_slots = [parallel.first_slot(learner_state.params, k, num_seeds) for k in range(num_seeds)]
    template = checkpoint_format.stacked_template(checkpoint_format.to_storable(live_slots[0]), saved_seeds)
    difference = checkpoint_format.first_difference(saved.meta.get("params_fingerprint"),
                                                    checkpoint_format.state_fingerprint(template), "params")
    if difference:
        raise ConfigError(f"params saved at {os.path.join(saved.root, str(saved.step))} do not fit this network: "
                          f"{difference}.")
    stored = checkpoint_format.read_items(saved.root, saved.step, {"params": template})["params"]
    per_seed = checkpoint_format.unstack(stored, saved_seeds)
    chosen = [per_seed[k] if saved_seeds == num_seeds else per_seed[0] for k in range(num_seeds)]
    chosen = [checkpoint_format.from_storable(params, live) for params, live in zip(chosen, live_slots)]
    params = parallel.fill_slots(chosen, like=learner_state.params, num_seeds=num_seeds)
    return learner_state._replace(params=params)
