"""What a checkpoint holds, its format version, and reading and writing one step.

A checkpoint root holds one directory per saved step, named by the env steps done:

    <root>/<steps>/learner_state  the whole learner state of every device of every process: params, optimiser
                                  states, env states, keys, observation statistics, replay buffers, counters
                  /params         `learner_state.params` of the first (device, batch) slot, per seed (fine-tuning)
                  /eval_params    what the eval policy needs, per seed (experiments.evaluate)
                  /best_params    the eval params with the best eval return so far, per seed
                  /loop           the loop's host-side arrays: each seed's next eval key
                  /meta           JSON: format version, algorithm, env, network, budget, seeds, progress, the
                                  composed config, the JSON log so far and fingerprints of the arrays

Orbax writes a step under a temporary name and renames it when complete, so a run killed mid-save leaves
nothing that looks like a checkpoint (`finalized_steps` lists only complete ones).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import types
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, TypeVar

import jax
import numpy as np
from omegaconf import DictConfig, OmegaConf

from stoix_like.runtime import parallel
from stoix_like.run import run_record
from stoix_like.config.upgrade import add_later_keys, upgrade_saved_config
from stoix_like.types import HostTree, JSONValue, LearnerState, PyTree

if TYPE_CHECKING:
    import orbax.checkpoint as ocp


def _orbax() -> types.ModuleType:
    """orbax.checkpoint, imported when a run first saves or reads a checkpoint: a run without checkpoints never
    pays its ~0.2 s import."""
    import orbax.checkpoint

    return orbax.checkpoint

# 2: a checkpoint names its system by the registry name it was trained as (`algorithm`, resolved through
# stoix_like.systems.MODULE_OF), so moving or renaming a module never strands a saved run. 1 also recorded the
# module path, which 2 ignores: version-1 checkpoints read the same way.
# 3: the saved config speaks the one vocabulary of docs/glossary.md. Versions 1 and 2 saved the old key names
# (q networks as critic_network, per-slot batch_size, ...): their config is upgraded as it is read
# (stoix_like.config.upgrade), and what identifies their run is described again from the upgraded config.
FORMAT_VERSION = 3
READABLE_FORMAT_VERSIONS = (1, 2, 3)
_FIRST_VERSION_WITH_TODAYS_NAMES = 3


# A pytree handed back with the same structure (and, for to_storable, the same type) it came in with.
TreeT = TypeVar("TreeT")


@dataclasses.dataclass
class Progress:
    """The experiment loop's host-side state: with the learner state, all a resumed run needs to go on exactly."""

    evaluations_done: int
    steps_done: int
    eval_keys: np.ndarray  # (num_seeds, 2): each seed's next eval key
    best_returns: List[float]  # per seed; -inf before the first evaluation
    best_params: List[Optional[HostTree]]  # per seed: the eval params with the best eval return so far (None before)
    log_history: JSONValue = None  # the JSON logger's data so far, so a resumed run's metrics.json is whole


# ----------------------------------------------------------------------------------------------------------------
# What identifies a run, and the metadata of a step.


def describe_run(config: DictConfig, algorithm: str) -> Dict[str, JSONValue]:
    """What must match for a checkpoint to continue: the algorithm, the env and the network."""
    return {
        "algorithm": algorithm,
        # the task name (run_record.task_name): the scenario, and which entries it observes where it hides some
        "env": {"suite": str(config.env.suite), "scenario": run_record.task_name(config.env),
                "kwargs": config_container(config.env.get("kwargs") or {}),
                "max_episode_steps": config.env.get("max_episode_steps")},
        "network": config_container(config.network),
    }


def read_config(meta: Dict[str, JSONValue]) -> DictConfig:
    """The composed config a checkpoint was written with (struct mode on), in today's key names: the one way code
    reads a saved config."""
    saved = meta["config"]
    if meta.get("format_version", 1) < _FIRST_VERSION_WITH_TODAYS_NAMES:
        budget = meta["budget"]  # the old batch_size counted per (device, batch) slot
        saved = upgrade_saved_config(saved, meta["algorithm"],
                                     batch_slots=int(budget["n_devices"]) * int(budget["update_batch_size"]))
    else:
        saved = add_later_keys(copy.deepcopy(dict(saved)))
    config = OmegaConf.create(saved)
    OmegaConf.set_struct(config, True)
    return config


def saved_description(meta: Dict[str, JSONValue]) -> Dict[str, JSONValue]:
    """`describe_run` as the checkpoint's run would give it today (older versions recorded it in old names)."""
    if meta.get("format_version", 1) < _FIRST_VERSION_WITH_TODAYS_NAMES:
        return describe_run(read_config(meta), meta["algorithm"])
    return {field: meta[field] for field in ("algorithm", "env", "network")}


def state_fingerprint(tree: PyTree) -> Dict[str, List[JSONValue]]:
    """{leaf path: [shape, dtype]} of a (storable) pytree: two states fit each other when these are equal."""
    leaves, _ = jax.tree_util.tree_flatten_with_path(tree)
    return {jax.tree_util.keystr(path): [list(leaf.shape), str(np.dtype(leaf.dtype))] for path, leaf in leaves}


def json_float(value: float) -> Optional[float]:
    """JSON has no infinity: a return of -inf (no evaluation yet) is stored as null."""
    return float(value) if math.isfinite(value) else None


def float_of_json(value: Optional[float]) -> float:
    return -math.inf if value is None else float(value)


# ----------------------------------------------------------------------------------------------------------------
# Reading and writing one step.


def finalized_steps(root: str) -> List[int]:
    """The complete steps under `root`: orbax's temporary directories of an interrupted save are not among them."""
    if not os.path.isdir(root):
        return []
    return [int(name) for name in os.listdir(root)
            if name.isdigit() and os.path.isdir(os.path.join(root, name))
            and os.path.exists(os.path.join(root, name, "_CHECKPOINT_METADATA"))]


def manager(root: str, read_only: bool = False) -> ocp.CheckpointManager:
    ocp = _orbax()
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


def write_step(checkpoint_manager: ocp.CheckpointManager, step: int, items: Dict[str, HostTree],
               meta: Dict[str, JSONValue]) -> None:
    """Save array items (host pytrees) and the JSON meta of one step; complete when this returns."""
    ocp = _orbax()
    args = {name: ocp.args.PyTreeSave(tree) for name, tree in items.items()}
    checkpoint_manager.save(step, args=ocp.args.Composite(**args, meta=ocp.args.JsonSave(meta)))


def read_meta(root: str, step: int) -> Dict[str, JSONValue]:
    return read_items(root, step, {"meta": None})["meta"]


def read_items(root: str, step: int, templates: Dict[str, Optional[PyTree]]) -> Dict[str, HostTree]:
    """Read some items of one step; `templates[name]` is a pytree of ShapeDtypeStructs, or None for the JSON meta."""
    ocp = _orbax()
    args = {}
    for name, template in templates.items():
        if name == "meta":
            args[name] = ocp.args.JsonRestore()
        else:
            restore_args = jax.tree_util.tree_map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), template)
            args[name] = ocp.args.PyTreeRestore(item=template, restore_args=restore_args)
    reader = manager(root, read_only=True)
    try:
        restored = reader.restore(step, args=ocp.args.Composite(**args))
    finally:
        reader.close()
    items = {name: restored[name] for name in templates}
    for name, template in templates.items():
        if template is not None:  # orbax may fill a missing leaf from the template: refuse a partial read
            difference = first_difference(state_fingerprint(items[name]), state_fingerprint(template), name)
            if difference:
                raise ValueError(f"item {name} does not match: {difference}")
    return items


# ----------------------------------------------------------------------------------------------------------------
# Live state <-> what is stored.


def _is_key(leaf: object) -> bool:
    return hasattr(leaf, "dtype") and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key)


def to_storable(tree: TreeT) -> TreeT:
    """Typed PRNG keys become their raw uint32 data; everything else is stored as it is."""
    return jax.tree_util.tree_map(lambda x: jax.random.key_data(x) if _is_key(x) else x, tree)


def from_storable(tree: HostTree, like: TreeT) -> TreeT:
    """Back to the live state's types: raw key data becomes typed keys where `like` has them."""
    return jax.tree_util.tree_map(
        lambda stored, live: jax.random.wrap_key_data(stored, impl=jax.random.key_impl(live)) if _is_key(live)
        else stored, tree, like)


def global_template(learner_state: LearnerState) -> PyTree:
    """ShapeDtypeStructs of the gathered (every process's devices) storable learner state."""
    storable = jax.eval_shape(to_storable, learner_state)
    return jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(parallel.global_shape(x.shape), x.dtype), storable)


def stacked_template(tree: PyTree, num: int) -> PyTree:
    """ShapeDtypeStructs of `num` copies of `tree` stacked on a new first axis (one per seed)."""
    return jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct((num,) + tuple(np.shape(x)), x.dtype),
                                  jax.eval_shape(lambda t: t, tree))


def stack(trees: Sequence[PyTree]) -> HostTree:
    return jax.tree_util.tree_map(lambda *leaves: np.stack([np.asarray(leaf) for leaf in leaves]), *trees)


def unstack(tree: PyTree, num: int) -> List[HostTree]:
    return [jax.tree_util.tree_map(lambda x: np.asarray(x[k]), tree) for k in range(num)]


def config_container(node: object) -> JSONValue:
    if not OmegaConf.is_config(node):
        return node
    try:
        return OmegaConf.to_container(node, resolve=True)
    except Exception:  # noqa: BLE001 - an interpolation only Hydra can resolve: keep it as written
        return OmegaConf.to_container(node, resolve=False)


# ----------------------------------------------------------------------------------------------------------------
# Saying how a checkpoint differs from this run.


def differences(saved: object, current: object, prefix: str) -> List[str]:
    if isinstance(saved, dict) and isinstance(current, dict):
        found: List[str] = []
        for key in sorted(set(saved) | set(current), key=str):
            found += differences(saved.get(key, "<absent>"), current.get(key, "<absent>"), f"{prefix}.{key}")
        return found
    return [] if saved == current else [f"{prefix}: {saved!r} in the checkpoint, {current!r} here"]


def first_difference(saved: object, current: object, prefix: str) -> str:
    found = differences(saved, current, prefix)
    return found[0] + (f" (and {len(found) - 1} more)" if len(found) > 1 else "") if found else ""
