"""Checkpoints (orbax): save a run at each evaluation, resume it exactly, or start a new run from saved params.

A checkpoint root holds one directory per saved step, named by the env steps done:

    <root>/<steps>/learner_state  the whole learner state of every device of every process: params, optimiser
                                  states, env states, keys, observation statistics, replay buffers, counters
                  /params         `learner_state.params` of the first (device, batch) slot, per seed (fine-tuning)
                  /eval_params    what the eval policy needs, per seed (experiments.evaluate)
                  /best_params    the eval params with the best eval return so far, per seed
                  /loop           the loop's host-side arrays: each seed's next eval key
                  /meta           JSON: algorithm, system module, env, network, budget, seeds, progress, the
                                  composed config, the JSON log so far and a fingerprint of the learner state

Orbax writes a step under a temporary name and renames it when complete, so a run killed mid-save leaves
nothing that looks like a checkpoint. A step that exists but cannot be read is set aside (renamed, never
deleted) and the previous good one is used. Only process 0 writes; in a multi-host run it reads too and
broadcasts what it read. The gather (save) and broadcasts (checks, restore) are stages every process enters
in the same order (`parallel.collective_stage`); refusals found by process 0 are raised on every process.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import jax
import numpy as np
import orbax.checkpoint as ocp
from omegaconf import OmegaConf

from stoix_like import parallel, systems
from stoix_like.budget import Budget
from stoix_like.errors import ConfigError

# 2: a checkpoint names its system by the registry name it was trained as (`algorithm`, resolved through
# stoix_like.systems.MODULE_OF), so moving or renaming a module never strands a saved run. 1 also recorded the
# module path, which 2 ignores: version-1 checkpoints read the same way.
FORMAT_VERSION = 2
READABLE_FORMAT_VERSIONS = (1, 2)
_ARRAY_ITEMS = ("learner_state", "params", "eval_params", "best_params", "loop")
_UNREADABLE_SUFFIX = ".unreadable"


@dataclasses.dataclass
class Progress:
    """The experiment loop's host-side state: with the learner state, all a resumed run needs to go on exactly."""

    evaluations_done: int
    steps_done: int
    eval_keys: np.ndarray  # (num_seeds, 2): each seed's next eval key
    best_returns: List[float]  # per seed; -inf before the first evaluation
    best_params: List[Any]  # per seed: the eval params with the best eval return so far (None before)
    log_history: Any = None  # the JSON logger's data so far, so a resumed run's metrics.json is whole


# ----------------------------------------------------------------------------------------------------------------
# The run's checkpoints: what the experiment loop calls.


class Checkpoints:
    """Where a run saves, and what it resumes from; checks the request before any long work.

    `logger.checkpointing`: `save_model` saves at each evaluation into `directory` (default
    `<run dir>/checkpoints`), keeping the last `keep_last` and the best by eval return. `resume` continues the
    run that saved into `directory` (starting fresh when it holds no checkpoint yet, so a requeued job can
    always pass it); `resume_from=PATH` continues from PATH (a root: its latest good step, or one step).
    `load_params_from=PATH` starts a new run from saved params only.
    """

    def __init__(self, config: Any, run_dir: str, algorithm: str, budget: Budget,
                 seeds: Sequence[int]):
        settings = config.logger.checkpointing
        self.config, self.algorithm = config, algorithm
        self.budget, self.seeds = budget, list(seeds)
        self.save_model = bool(settings.save_model)
        self.keep_last = int(settings.keep_last)
        explicit_directory = settings.directory
        self.directory = _absolute(explicit_directory) if explicit_directory else os.path.join(run_dir, "checkpoints")
        self.load_params_from = _absolute(settings.load_params_from) if settings.load_params_from else None
        self.resume_root: Optional[str] = None
        self.resume_step: Optional[int] = None
        self._must_resume = False  # resume_from names a checkpoint: not finding one is an error

        if self.keep_last < 1:
            raise ConfigError(f"logger.checkpointing.keep_last={self.keep_last} must be at least 1.")
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
            self.resume_root = self.directory
        elif settings.resume_from:
            self.resume_root, self.resume_step = locate(_absolute(settings.resume_from))
            self._must_resume = True

        refusal = None
        if parallel.is_main_process():  # the one process that reads and writes checkpoints
            try:
                if self.save_model:
                    self._refuse_to_overwrite()
                if self.resume_root is not None:
                    self._check_latest_meta()
            except ConfigError as error:
                refusal = error
        if self.save_model or self.resume_root is not None:  # the same on every process: they all agree or none
            _agree(refusal, "checkpoint checks")  # a refusal stops every process, not only process 0
        if self.load_params_from is not None:  # every process reads the params it starts from
            self._load_source = locate(self.load_params_from)

    # -- before any long work ------------------------------------------------------------------------------------

    def _refuse_to_overwrite(self) -> None:
        existing = _finalized_steps(self.directory)
        if not existing:
            return
        if self.resume_root == self.directory:  # continuing the run that saved here
            later = [step for step in existing if self.resume_step is not None and step > self.resume_step]
            if later:
                raise ConfigError(
                    f"resuming from step {self.resume_step} while saving into {self.directory} would overwrite its "
                    f"later steps ({_short_list(later)}); set logger.checkpointing.directory to another directory.")
            return
        raise ConfigError(
            f"logger.checkpointing.directory={self.directory} already holds checkpoints (steps "
            f"{_short_list(existing)}) of another run; pass logger.checkpointing.resume=True to continue it, "
            f"or choose another directory.")

    def _check_latest_meta(self) -> None:
        """Refuse an incompatible checkpoint now, before envs, setup and compilation."""
        if not os.path.isdir(self.resume_root):
            if self._must_resume:
                raise ConfigError(f"logger.checkpointing.resume_from={self.resume_root}: no such directory.")
            return
        for step in self._candidate_steps():
            try:
                meta = _read_items(self.resume_root, step, {"meta": None})["meta"]
            except Exception:  # noqa: BLE001 - an unreadable step is skipped here and set aside at restore
                continue
            self._check_compatible(meta, step)
            return

    def _candidate_steps(self) -> List[int]:
        if self.resume_step is not None:
            return [self.resume_step]
        return sorted(_finalized_steps(self.resume_root), reverse=True)

    def _check_compatible(self, meta: Dict[str, Any], step: int) -> None:
        where = f"checkpoint {os.path.join(self.resume_root, str(step))}"
        if meta.get("format_version") not in READABLE_FORMAT_VERSIONS:
            raise ConfigError(f"{where} has format version {meta.get('format_version')}; this code reads "
                              f"{', '.join(map(str, READABLE_FORMAT_VERSIONS))}.")
        run = describe_run(self.config, self.algorithm)
        for field in ("algorithm", "env", "network"):
            if meta[field] != run[field]:
                raise ConfigError(f"{where} was written by a different {field}: "
                                  f"{_first_difference(meta[field], run[field], field)}; refusing to resume it.")
        budget = dataclasses.asdict(self.budget)
        if meta["budget"] != budget:
            raise ConfigError(f"{where} was written with a different budget or layout: "
                              f"{_first_difference(meta['budget'], budget, 'budget')}; resume with the same "
                              f"arch.total_timesteps, arch.total_num_envs, arch.num_evaluation and device count.")
        if meta["seeds"] != self.seeds:
            raise ConfigError(f"{where} holds seeds {meta['seeds']}; this run asks for {self.seeds} "
                              f"(arch.seed, arch.num_seeds).")
        changed = _differences(meta["config"].get("system", {}), OmegaConf.to_container(self.config.system), "system")
        if changed and parallel.is_main_process():
            warnings.warn(f"resuming {where} with changed hyperparameters: {'; '.join(changed[:5])}", stacklevel=2)

    # -- resume / load -------------------------------------------------------------------------------------------

    def restore(self, learner_state: Any, progress: Progress, eval_params_template: Any
                ) -> Tuple[Any, Progress, Optional[str]]:
        """The state to start from: resumed, or with loaded params, or as given. Returns (state, progress, note)."""
        if self.load_params_from is not None:
            root, step = self._load_source
            return load_params(root, step, learner_state, len(self.seeds)), progress, (
                f"started from the params saved at {os.path.join(root, str(step or 'latest'))}")
        if self.resume_root is None:
            return learner_state, progress, None
        restored = _on_main_then_broadcast(
            lambda: self._read_latest_good(learner_state, eval_params_template),
            templates=(_global_template(learner_state), _progress_template(progress, eval_params_template)),
        )
        if restored is None:
            if self._must_resume:
                raise ConfigError(f"no readable checkpoint under {self.resume_root}.")
            return learner_state, progress, f"no checkpoint under {self.resume_root} yet: starting afresh"
        global_state, restored_progress, step = restored
        state = _from_storable(parallel.local_share(global_state), learner_state)
        return state, restored_progress, f"resumed from {os.path.join(self.resume_root, str(step))}"

    def _read_latest_good(self, learner_state: Any, eval_params_template: Any):
        for step in self._candidate_steps():
            try:
                meta = _read_items(self.resume_root, step, {"meta": None})["meta"]
            except Exception as error:  # noqa: BLE001
                self._set_aside(step, error)
                continue
            self._check_compatible(meta, step)
            templates = {
                "learner_state": _global_template(learner_state),
                "best_params": _stacked_template(eval_params_template, len(self.seeds)),
                "loop": {"eval_keys": jax.ShapeDtypeStruct((len(self.seeds), 2), np.uint32)},
            }
            # A state of another structure is refused here, so that a failed read below can only mean damage.
            for item, saved_fingerprint in (("learner_state", meta["fingerprint"]),
                                            ("best_params", meta.get("eval_params_fingerprint"))):
                difference = saved_fingerprint and _first_difference(
                    saved_fingerprint, state_fingerprint(templates[item]), item)
                if difference:
                    raise ConfigError(f"checkpoint {os.path.join(self.resume_root, str(step))} holds a {item} of "
                                      f"another shape: {difference}; refusing to resume it.")
            try:
                items = _read_items(self.resume_root, step, templates)
            except Exception as error:  # noqa: BLE001 - a corrupt step: use the one before
                self._set_aside(step, error)
                continue
            progress = Progress(
                evaluations_done=int(meta["evaluations_done"]),
                steps_done=int(meta["steps_done"]),
                eval_keys=np.array(items["loop"]["eval_keys"]),  # a writable copy: the loop advances it
                best_returns=[_float(r) for r in meta["best_returns"]],
                best_params=_unstack(items["best_params"], len(self.seeds)),
                log_history=meta.get("log_history"),
            )
            return items["learner_state"], progress, step
        return None

    def _set_aside(self, step: int, error: Exception) -> None:
        path = os.path.join(self.resume_root, str(step))
        message = f"checkpoint {path} is unreadable ({type(error).__name__}: {str(error)[:200]})"
        # Saving into this root again would collide with the bad step's name, so it is renamed, never deleted.
        if self.save_model and self.resume_root == self.directory:
            aside = f"{path}{_UNREADABLE_SUFFIX}-{int(time.time())}"
            os.replace(path, aside)
            message += f"; moved to {aside}"
        warnings.warn(message + "; trying the previous checkpoint.", stacklevel=2)

    # -- save ----------------------------------------------------------------------------------------------------

    def save(self, learner_state: Any, progress: Progress, eval_params_now: Sequence[Any], eval_return: float
             ) -> Optional[str]:
        """Save after an evaluation; every process calls it (the state gather is a collective)."""
        if not self.save_model:
            return None
        global_state = parallel.gather_to_host(_to_storable(learner_state))
        if not parallel.is_main_process():
            return None
        items: Dict[str, Any] = {
            "learner_state": global_state,
            "eval_params": _stack(eval_params_now),
            "best_params": _stack(progress.best_params),
            "loop": {"eval_keys": np.asarray(progress.eval_keys, np.uint32)},
        }
        num_seeds = len(self.seeds)
        if hasattr(global_state, "params"):  # what load_params_from reads: one slot per seed
            items["params"] = _stack([parallel.first_slot(global_state.params, k, num_seeds) for k in range(num_seeds)])
        meta = {
            "format_version": FORMAT_VERSION,
            **describe_run(self.config, self.algorithm),
            "budget": dataclasses.asdict(self.budget),
            "seeds": self.seeds,
            "evaluations_done": progress.evaluations_done,
            "steps_done": progress.steps_done,
            "eval_return": _json_float(eval_return),
            "best_returns": [_json_float(r) for r in progress.best_returns],
            "fingerprint": state_fingerprint(global_state),
            "params_fingerprint": state_fingerprint(items["params"]) if "params" in items else None,
            "eval_params_fingerprint": state_fingerprint(items["best_params"]),
            "config": _config_container(self.config),
            "log_history": progress.log_history,
        }
        manager = _manager(self.directory)
        args = {name: ocp.args.PyTreeSave(tree) for name, tree in items.items()}
        manager.save(progress.steps_done, args=ocp.args.Composite(**args, meta=ocp.args.JsonSave(meta)))
        for step in _steps_to_drop(self.directory, self.keep_last):
            manager.delete(step)
        manager.close()
        return os.path.join(self.directory, str(progress.steps_done))


# ----------------------------------------------------------------------------------------------------------------
# Reading a saved run outside the loop: fine-tuning and evaluation.


@dataclasses.dataclass
class SavedRun:
    root: str
    step: int
    meta: Dict[str, Any]

    @property
    def config(self) -> Any:
        config = OmegaConf.create(self.meta["config"])
        OmegaConf.set_struct(config, True)
        return config

    @property
    def budget(self) -> Budget:
        return Budget(**self.meta["budget"])

    @property
    def learner_setup(self) -> Callable:
        """The setup of the system the run was trained as, found by its registry name, not a module path."""
        algorithm = self.meta["algorithm"]
        if algorithm not in systems.MODULE_OF:
            raise ConfigError(f"{self.root} was written by algorithm {algorithm!r}, which this code does not know "
                              f"(stoix_like.systems.MODULE_OF lists {', '.join(sorted(systems.MODULE_OF))}).")
        return systems.system_module(algorithm).learner_setup


def locate(path: str) -> Tuple[str, Optional[int]]:
    """(root, step) of a checkpoint path: a root (step None: its latest good one) or one step inside a root."""
    if not os.path.isdir(path):
        raise ConfigError(f"no checkpoint at {path}: no such directory.")
    name = os.path.basename(os.path.normpath(path))
    if name.isdigit() and os.path.isdir(os.path.join(path, "meta")):
        return os.path.dirname(os.path.normpath(path)), int(name)
    if not _finalized_steps(path):
        raise ConfigError(f"no checkpoint at {path}: it holds no saved step.")
    return path, None


def read_saved_run(path: str) -> SavedRun:
    """The newest readable step at `path` (or that step itself), with its metadata."""
    root, step = locate(_absolute(path))
    for candidate in ([step] if step is not None else sorted(_finalized_steps(root), reverse=True)):
        try:
            return SavedRun(root, candidate, _read_items(root, candidate, {"meta": None})["meta"])
        except Exception as error:  # noqa: BLE001
            warnings.warn(f"checkpoint {os.path.join(root, str(candidate))} is unreadable ({error}); "
                          f"trying the previous one.", stacklevel=2)
    raise ConfigError(f"no readable checkpoint at {path}.")


def load_eval_params(saved: SavedRun, eval_params_template: Any, which: str) -> List[Any]:
    """Per seed, the eval params of a saved run: `which` is "best" or "latest"."""
    items = {"best": "best_params", "latest": "eval_params"}
    if which not in items:
        raise ConfigError(f"params={which!r} must be one of {sorted(items)}.")
    num_seeds = len(saved.meta["seeds"])
    template = _stacked_template(eval_params_template, num_seeds)
    stored = _read_items(saved.root, saved.step, {items[which]: template})[items[which]]
    return _unstack(stored, num_seeds)


def load_params(root: str, step: Optional[int], learner_state: Any, num_seeds: int) -> Any:
    """`learner_state` with its params replaced by saved ones, in every slot; everything else fresh.

    Seed k takes saved seed k when the counts match, else every seed takes saved seed 0.
    """
    if not hasattr(learner_state, "params"):
        raise ConfigError("logger.checkpointing.load_params_from needs a learner state with a `params` field.")
    saved = read_saved_run(os.path.join(root, str(step)) if step is not None else root)
    saved_seeds = len(saved.meta["seeds"])
    slot_params = _to_storable(parallel.first_slot(learner_state.params, 0, num_seeds))
    template = _stacked_template(slot_params, saved_seeds)
    difference = _first_difference(saved.meta.get("params_fingerprint"), state_fingerprint(template), "params")
    if difference:
        raise ConfigError(f"params saved at {os.path.join(saved.root, str(saved.step))} do not fit this network: "
                          f"{difference}.")
    stored = _read_items(saved.root, saved.step, {"params": template})["params"]
    per_seed = _unstack(stored, saved_seeds)
    chosen = [per_seed[k] if saved_seeds == num_seeds else per_seed[0] for k in range(num_seeds)]
    chosen = [_from_storable(p, slot_params_like) for p, slot_params_like in
              zip(chosen, [parallel.first_slot(learner_state.params, k, num_seeds) for k in range(num_seeds)])]
    params = parallel.fill_slots(chosen, like=learner_state.params, num_seeds=num_seeds)
    return learner_state._replace(params=params)


# ----------------------------------------------------------------------------------------------------------------
# What identifies a run, and the pieces of the file format.


def describe_run(config: Any, algorithm: str) -> Dict[str, Any]:
    """What must match for a checkpoint to continue: the algorithm, the env and the network."""
    return {
        "algorithm": algorithm,
        "env": {"suite": str(config.env.suite), "scenario": str(config.env.scenario.name),
                "kwargs": _config_container(config.env.get("kwargs") or {})},
        "network": _config_container(config.network),
    }


def state_fingerprint(tree: Any) -> Dict[str, List[Any]]:
    """{leaf path: [shape, dtype]} of a (storable) pytree: two states fit each other when these are equal."""
    leaves, _ = jax.tree_util.tree_flatten_with_path(tree)
    return {jax.tree_util.keystr(path): [list(leaf.shape), str(np.dtype(leaf.dtype))] for path, leaf in leaves}


def _steps_to_drop(root: str, keep_last: int) -> List[int]:
    """All but the last `keep_last` steps and the best by eval return (the latest of equals).

    Decided from the steps' own metadata rather than by orbax's preservation policies, whose memory of
    the metrics does not outlive the process: a resumed run keeps pruning what the killed one saved.
    """
    steps = sorted(_finalized_steps(root))
    keep = set(steps[-keep_last:])
    returns = {}
    for step in steps:
        try:
            value = _read_items(root, step, {"meta": None})["meta"].get("eval_return")
        except Exception:  # noqa: BLE001 - unreadable: never the best, and gone once older than the last K
            continue
        if value is not None:
            returns[step] = float(value)
    if returns:
        keep.add(max(returns, key=lambda step: (returns[step], step)))
    return [step for step in steps if step not in keep]


def _manager(root: str, read_only: bool = False) -> ocp.CheckpointManager:
    """A manager over one root; `read_only` ones only restore (orbax's own read-only mode logs warnings)."""
    options = ocp.CheckpointManagerOptions(
        enable_async_checkpointing=False,  # a checkpoint is complete when save returns: SIGKILL-safe
        create=False,  # made below: orbax will not create it for a subset of processes
        cleanup_tmp_directories=not read_only,  # a killed save's leftovers; never a finished step
        # only process 0 touches the files; the others take part through gather/broadcast instead
        multiprocessing_options=ocp.options.MultiprocessingOptions(primary_host=parallel.process_index(),
                                                                   active_processes={parallel.process_index()}),
    )
    if not read_only:
        os.makedirs(root, exist_ok=True)
    return ocp.CheckpointManager(root, options=options)


def _read_items(root: str, step: int, templates: Dict[str, Any]) -> Dict[str, Any]:
    """Read some items of one step; `templates[name]` is a pytree of ShapeDtypeStructs, or None for the JSON meta."""
    args = {}
    for name, template in templates.items():
        if name == "meta":
            args[name] = ocp.args.JsonRestore()
        else:
            restore_args = jax.tree_util.tree_map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), template)
            args[name] = ocp.args.PyTreeRestore(item=template, restore_args=restore_args)
    manager = _manager(root, read_only=True)
    try:
        restored = manager.restore(step, args=ocp.args.Composite(**args))
    finally:
        manager.close()
    items = {name: restored[name] for name in templates}
    for name, template in templates.items():
        if template is not None:  # orbax may fill a missing leaf from the template: refuse a partial read
            difference = _first_difference(state_fingerprint(items[name]), state_fingerprint(template), name)
            if difference:
                raise ValueError(f"item {name} does not match: {difference}")
    return items


def _finalized_steps(root: str) -> List[int]:
    if not os.path.isdir(root):
        return []
    return [int(name) for name in os.listdir(root)
            if name.isdigit() and os.path.isdir(os.path.join(root, name))
            and os.path.exists(os.path.join(root, name, "_CHECKPOINT_METADATA"))]


def _is_key(leaf: Any) -> bool:
    return hasattr(leaf, "dtype") and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key)


def _to_storable(tree: Any) -> Any:
    """Typed PRNG keys become their raw uint32 data; everything else is stored as it is."""
    return jax.tree_util.tree_map(lambda x: jax.random.key_data(x) if _is_key(x) else x, tree)


def _from_storable(tree: Any, like: Any) -> Any:
    """Back to the live state's types: raw key data becomes typed keys where `like` has them."""
    return jax.tree_util.tree_map(
        lambda stored, live: jax.random.wrap_key_data(stored, impl=jax.random.key_impl(live)) if _is_key(live)
        else stored, tree, like)


def _global_template(learner_state: Any) -> Any:
    """ShapeDtypeStructs of the gathered (every process's devices) storable learner state."""
    storable = jax.eval_shape(_to_storable, learner_state)
    return jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(parallel.global_shape(x.shape), x.dtype), storable)


def _stacked_template(tree: Any, num: int) -> Any:
    return jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct((num,) + tuple(np.shape(x)), x.dtype),
                                  jax.eval_shape(lambda t: t, tree))


def _progress_template(progress: Progress, eval_params_template: Any) -> Any:
    num_seeds = len(progress.best_returns)
    return Progress(0, 0, jax.ShapeDtypeStruct((num_seeds, 2), np.uint32), [0.0] * num_seeds,
                    [eval_params_template] * num_seeds)


def _on_main_then_broadcast(read: Callable[[], Any], templates: Tuple[Any, Any]) -> Any:
    """Run `read` on process 0 and give every process its result: (global_state, progress, step) or None.

    On one process this is just `read()`. On several, process 0 reads and then broadcasts a status, and
    the arrays when there are any; a refusal on process 0 stops every process.
    """
    if parallel.process_count() == 1:
        return read()
    result, refusal = None, None
    if parallel.is_main_process():
        try:
            result = read()
        except ConfigError as error:
            refusal = error
    status = parallel.broadcast_from_main(np.asarray(2 if refusal else (1 if result else 0), np.int32),
                                          stage="checkpoint restore")
    if int(status) == 2:
        raise refusal if refusal else ConfigError("process 0 refused the checkpoint; see its log.")
    if int(status) == 0:
        return None
    state_template, progress_template = templates
    zeros = lambda t: jax.tree_util.tree_map(lambda s: np.zeros(s.shape, s.dtype), t)  # noqa: E731
    if parallel.is_main_process():
        global_state, progress, step = result
        counters = np.asarray([progress.evaluations_done, progress.steps_done, step], np.uint64)
        payload = (global_state, progress.eval_keys, _stack(progress.best_params),
                   # jax carries 32 bits: step counts beyond 2**32 travel as (high, low) words
                   np.stack([counters >> 32, counters & 0xFFFFFFFF]).astype(np.uint32),
                   np.asarray(progress.best_returns, np.float32))
    else:
        num_seeds = len(progress_template.best_returns)
        payload = (zeros(state_template), zeros(progress_template.eval_keys),
                   zeros(_stacked_template(progress_template.best_params[0], num_seeds)),
                   np.zeros((2, 3), np.uint32), np.zeros(num_seeds, np.float32))
    global_state, eval_keys, best_params, words, best_returns = parallel.broadcast_from_main(
        payload, stage="checkpoint restore")
    counters = (np.asarray(words[0], np.uint64) << 32) | np.asarray(words[1], np.uint64)
    num_seeds = len(best_returns)
    if parallel.is_main_process():  # exact values where they are logged
        return result
    progress = Progress(int(counters[0]), int(counters[1]), np.array(eval_keys), [float(r) for r in best_returns],
                        _unstack(best_params, num_seeds))
    return global_state, progress, int(counters[2])


def _agree(refusal: Optional[ConfigError], stage: str) -> None:
    """Raise process 0's refusal on every process (a stage they all enter); on one process, just raise it."""
    if parallel.process_count() == 1:
        if refusal is not None:
            raise refusal
        return
    refused = parallel.broadcast_from_main(np.asarray(refusal is not None, np.int32), stage=stage)
    if int(refused):
        raise refusal if refusal else ConfigError("process 0 refused the checkpoint settings; see its log.")


def _stack(trees: Sequence[Any]) -> Any:
    return jax.tree_util.tree_map(lambda *leaves: np.stack([np.asarray(leaf) for leaf in leaves]), *trees)


def _unstack(tree: Any, num: int) -> List[Any]:
    return [jax.tree_util.tree_map(lambda x: np.asarray(x[k]), tree) for k in range(num)]


def _config_container(node: Any) -> Any:
    if not OmegaConf.is_config(node):
        return node
    try:
        return OmegaConf.to_container(node, resolve=True)
    except Exception:  # noqa: BLE001 - an interpolation only Hydra can resolve: keep it as written
        return OmegaConf.to_container(node, resolve=False)


def _differences(saved: Any, current: Any, prefix: str) -> List[str]:
    if isinstance(saved, dict) and isinstance(current, dict):
        found: List[str] = []
        for key in sorted(set(saved) | set(current), key=str):
            found += _differences(saved.get(key, "<absent>"), current.get(key, "<absent>"), f"{prefix}.{key}")
        return found
    return [] if saved == current else [f"{prefix}: {saved!r} in the checkpoint, {current!r} here"]


def _first_difference(saved: Any, current: Any, prefix: str) -> str:
    found = _differences(saved, current, prefix)
    return found[0] + (f" (and {len(found) - 1} more)" if len(found) > 1 else "") if found else ""


def _short_list(steps: Sequence[int]) -> str:
    steps = sorted(steps)
    return ", ".join(map(str, steps)) if len(steps) <= 4 else f"{steps[0]}, ..., {steps[-1]}"


def _absolute(path: str) -> str:
    return os.path.abspath(os.path.expanduser(str(path)))


def _json_float(value: float) -> Optional[float]:
    return float(value) if math.isfinite(value) else None


def _float(value: Optional[float]) -> float:
    return -math.inf if value is None else float(value)
