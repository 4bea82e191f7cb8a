"""`-m hydra/sweeper=optuna` with `hydra.sweeper.storage=sqlite:///study.db hydra.sweeper.study_name=NAME`: a
study that outlives the process and that several concurrent jobs share.

Hydra's Optuna sweeper already opens a stored study by name (`load_if_exists=True`), asks for `n_trials` trials
and tells each its value; this subclass adds only what a shared, resumable study needs on top:

- the storage URL is checked before anything runs: an SQLAlchemy database URL (SQLite is what CI checks), a name
  to find the study again by; anything else is refused in one line, exit code 2 (optuna 2.10, the release
  Hydra's sweeper works with, has no journal-file storage);
- heartbeats: while a trial runs, this process records its heartbeat every `heartbeat_interval` seconds. When a
  sweep starts on a stored study, it fails the RUNNING trials whose heartbeat is older than twice that interval:
  their process died (killed, preempted) without telling their value. A live job keeps its own trials' heartbeats
  fresh, so a job that starts while others run never fails their trials. A RUNNING trial that never had a
  heartbeat (written by another program) is left alone: nothing says whether its process lives.

Each job adds `n_trials` trials to the study: two concurrent jobs of 2 trials make 4, and running a killed
sweep's command again adds `n_trials` more, with the sampler seeing every trial already finished in the study.
"""


import dataclasses
import logging
import sys
import threading
from typing import Any, List, Optional, Set

from hydra_plugins.hydra_optuna_sweeper.config import OptunaSweeperConf
from hydra_plugins.hydra_optuna_sweeper.optuna_sweeper import OptunaSweeper

log = logging.getLogger(__name__)

# SQLAlchemy dialects Optuna's RDBStorage can open; SQLite needs no server and is what CI checks.
DATABASE_SCHEMES = ("sqlite", "postgresql", "mysql")


@dataclasses.dataclass
class SharedStudySweeperConf(OptunaSweeperConf):
    _target_: str = "hydra_plugins.stoix_like_plugins.optuna_study.SharedStudySweeper"
    heartbeat_interval: int = 60  # seconds between a running trial's heartbeats (a stored study only)


def storage_problem(storage: Optional[Any], study_name: Optional[str]) -> Optional[str]:
    """One line saying what is wrong with `hydra.sweeper.storage` / `study_name`, or None (None: in memory)."""
    if storage is None:
        return None
    url = str(storage)
    scheme = url.split("://", 1)[0].split("+", 1)[0].lower() if "://" in url else ""
    if scheme not in DATABASE_SCHEMES:
        journal = " (optuna 2.10 has no journal-file storage)" if "journal" in url.lower() else ""
        return (f"hydra.sweeper.storage={url!r}: not a database URL{journal}; use sqlite:///path/study.db "
                f"(or a {', '.join(DATABASE_SCHEMES[1:])}:// URL)")
    if scheme == "sqlite" and not url.startswith("sqlite:///"):
        return f"hydra.sweeper.storage={url!r}: an SQLite URL has three slashes: sqlite:///path/study.db"
    if not study_name:
        return ("hydra.sweeper.storage needs hydra.sweeper.study_name=NAME: the name other jobs, and a resumed "
                "sweep, find the study by")
    return None


class SharedStudySweeper(OptunaSweeper):
    """Hydra's OptunaSweeper with a checked storage URL, heartbeats, and stale trials failed at start."""

    def __init__(self, heartbeat_interval: int = 60, **kwargs: Any) -> None:
        problem = storage_problem(kwargs.get("storage"), kwargs.get("study_name"))
        if problem is None and heartbeat_interval < 1:
            problem = f"hydra.sweeper.heartbeat_interval={heartbeat_interval}: a whole number of seconds >= 1"
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            sys.exit(2)
        super().__init__(**kwargs)
        self.heartbeat_interval = int(heartbeat_interval)

    def sweep(self, arguments: List[str]) -> None:
        impl = self.sweeper
        if impl.storage is None:
            return super().sweep(arguments)
        url = str(impl.storage)
        storage = _heartbeat_storage(url, self.heartbeat_interval)
        _fail_stale_trials(storage, str(impl.study_name), url)
        impl.storage = storage  # optuna.create_study takes the storage object as it takes its URL
        try:
            return super().sweep(arguments)
        finally:
            storage.stop_heartbeats()
            impl.storage = url


def _fail_stale_trials(storage: Any, study_name: str, url: str) -> None:
    import optuna

    try:
        study = optuna.load_study(study_name=study_name, storage=storage)
    except KeyError:  # a new study: nothing to resume
        log.info(f"Optuna study {study_name!r} is new in {url}")
        return
    before = {trial.number for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.FAIL,))}
    optuna.storages.fail_stale_trials(study)
    failed = sorted({trial.number for trial in study.get_trials(
        deepcopy=False, states=(optuna.trial.TrialState.FAIL,))} - before)
    done = len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)))
    message = f"Optuna study {study_name!r} resumed from {url}: {done} trials complete"
    if failed:
        message += f"; trials {failed} had no heartbeat for over {2 * storage.heartbeat_interval} s: FAIL"
    log.info(message)
    print(message, file=sys.stderr)


def _heartbeat_storage(url: str, heartbeat_interval: int) -> Any:
    """An RDBStorage that records a heartbeat for each trial this process creates, every `heartbeat_interval`
    seconds on a daemon thread, until the trial is finished."""
    from optuna.storages import RDBStorage

    class HeartbeatStorage(RDBStorage):
        def __init__(self) -> None:
            if url.startswith("sqlite:///"):
                # Two jobs writing one SQLite file wait for its lock (up to a minute) rather than fail at once; two
                # jobs opening a new file create its tables one after the other (else: "table studies already
                # exists"), under a lock file beside it.
                from filelock import FileLock

                database = url[len("sqlite:///"):]
                with FileLock(f"{database}.lock", timeout=120):
                    super().__init__(url, engine_kwargs={"connect_args": {"timeout": 60}},
                                     heartbeat_interval=heartbeat_interval)
            else:
                super().__init__(url, heartbeat_interval=heartbeat_interval)
            self._mine: Set[int] = set()
            self._lock = threading.Lock()
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._beat, name="optuna-heartbeat", daemon=True)
            self._thread.start()

        def _create_new_trial(self, study_id: int, template_trial: Any = None) -> Any:
            trial = super()._create_new_trial(study_id, template_trial)
            if trial.state == trial.state.RUNNING:
                self.record_heartbeat(trial._trial_id)
                with self._lock:
                    self._mine.add(trial._trial_id)
            return trial

        def _beat(self) -> None:
            while not self._stop.wait(self.heartbeat_interval):
                with self._lock:
                    trial_ids = sorted(self._mine)
                for trial_id in trial_ids:
                    try:
                        if self.get_trial(trial_id).state.is_finished():
                            with self._lock:
                                self._mine.discard(trial_id)
                        else:
                            self.record_heartbeat(trial_id)
                    except Exception as error:  # a locked database: the next beat tries again
                        log.warning(f"Optuna heartbeat of trial {trial_id}: {error}")

        def __str__(self) -> str:  # what Hydra's sweeper logs as "Storage:"
            return url

        def stop_heartbeats(self) -> None:
            self._stop.set()

    return HeartbeatStorage()
