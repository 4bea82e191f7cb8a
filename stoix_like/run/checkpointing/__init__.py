"""Checkpoints (orbax): save a run at each evaluation, resume it exactly, or start a new run from saved params.

    format.py       what a checkpoint holds, its format version, reading and writing one step
    store.py        saving into a directory: prune to the last K and the best, set corrupt steps aside
    resume.py       which step to resume from and whether it fits this run; saved params and eval params
    checkpoints.py  `Checkpoints`, what the experiment loop calls: settings checked up front, restore, save

A step that exists but cannot be read is set aside (renamed, never deleted) and the previous good one is used.
Only process 0 reads and writes; in a multi-host run it broadcasts what it decided and read.
"""

from stoix_like.run.checkpointing.checkpoints import Checkpoints
from stoix_like.run.checkpointing.format import (
    FORMAT_VERSION,
    READABLE_FORMAT_VERSIONS,
    Progress,
    describe_run,
    read_config,
    saved_description,
    state_fingerprint,
)
from stoix_like.run.checkpointing.resume import SavedRun, load_eval_params, load_params, locate, read_saved_run

__all__ = [
    "FORMAT_VERSION", "READABLE_FORMAT_VERSIONS", "Checkpoints", "Progress", "SavedRun", "describe_run",
    "load_eval_params", "load_params", "locate", "read_config", "read_saved_run", "saved_description",
    "state_fingerprint",
]
