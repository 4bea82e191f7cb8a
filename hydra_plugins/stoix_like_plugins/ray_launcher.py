"""`-m hydra/launcher=ray`: each job of a sweep is a Ray task, on a local Ray started on demand or on a running
cluster (`hydra.launcher.ray.init.address=HOST:PORT`), with the CPUs and GPUs `hydra.launcher.ray.remote` asks.

Ours, on Ray's own API, rather than Hydra's hydra-ray-launcher 1.2.2: that plugin requires cloudpickle < 3 (this
stack has 3.x, which gymnasium and submitit use), ray[default] (the dashboard's ~30 packages) and boto3 for its AWS
launcher, and leaves an address that does not answer to Ray's own retries (20, about a second apart). This one
needs `ray` only (`pip install .[ray]`).

A job runs as the basic launcher runs it (Hydra's `run_job`), so it writes the same directory
(`<hydra.sweep.dir>/<hydra.sweep.subdir>`, the sweep directory made absolute on the machine that launches) and
returns the same JobReturn: a job that raises, or exits (a config refused inside the job exits 2), is a FAILED
job while the others go on; Hydra's sweeper then reports the first failure once every job of the batch is done.
An address that does not answer within `connect_timeout` seconds is refused in one line, exit code 2, before any
job starts.
"""


import dataclasses
import importlib.util
import logging
import math
import os
import socket
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, run_job, setup_globals
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict

log = logging.getLogger(__name__)


@dataclasses.dataclass
class RayConf:
    # ray.init's arguments: address (None: start a local Ray; HOST:PORT: a running cluster's GCS; "auto": the
    # cluster on this machine), num_cpus / num_gpus (a local Ray's size; None: the machine's)
    init: Dict[str, Any] = dataclasses.field(
        default_factory=lambda: {"address": None, "num_cpus": None, "num_gpus": None, "include_dashboard": False})
    # each job's resources (ray.remote's arguments); max_retries=0: a job whose worker died is reported, not rerun
    remote: Dict[str, Any] = dataclasses.field(
        default_factory=lambda: {"num_cpus": 1, "num_gpus": 0, "max_retries": 0})


@dataclasses.dataclass
class RayLauncherConf:
    _target_: str = "hydra_plugins.stoix_like_plugins.ray_launcher.RayLauncher"
    ray: RayConf = dataclasses.field(default_factory=RayConf)
    connect_timeout: float = 5.0  # seconds a cluster address has to answer


def address_problem(address: Optional[str], timeout: float) -> Optional[str]:
    """One line if `address` (HOST:PORT, or ray://HOST:PORT) does not accept a connection within `timeout`
    seconds; None for no address or "auto"/"local" (ray.init answers those itself, at once)."""
    if address in (None, "", "auto", "local"):
        return None
    host_port = str(address).split("://", 1)[-1]
    host, _, port = host_port.rpartition(":")
    if not host or not port.isdigit():
        return f"hydra.launcher.ray.init.address={address!r}: expected HOST:PORT (a Ray cluster's GCS address)"
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return None
    except OSError as error:
        return (f"hydra.launcher.ray.init.address={address}: no Ray cluster answered within {timeout:g} s "
                f"({error.strerror or error}); start one with `ray start --head`, or drop the address for a local Ray")


def _refuse(problem: str) -> None:
    print(f"error: {problem}", file=sys.stderr)
    sys.exit(2)


class RayLauncher(Launcher):
    def __init__(self, ray: DictConfig, connect_timeout: float = 5.0) -> None:
        self.ray_cfg = ray
        self.connect_timeout = float(connect_timeout)
        self.hydra_context: Optional[HydraContext] = None
        self.task_function: Optional[TaskFunction] = None
        self.config: Optional[DictConfig] = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function
        if importlib.util.find_spec("ray") is None:
            _refuse("hydra/launcher=ray needs ray: pip install 'stoix_like[ray]'")
        address = self.ray_cfg.init.get("address")
        problem = address_problem(address, self.connect_timeout)
        if problem:
            _refuse(problem)
        if address not in (None, "", "local"):
            # Something answered the port, but a Ray that does not answer its handshake is retried about once a
            # second, 20 times by default: as many as connect_timeout's seconds (read when ray is first imported).
            os.environ.setdefault("RAY_NUM_REDIS_GET_RETRIES", str(max(1, math.ceil(self.connect_timeout))))

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        import ray

        assert self.config is not None and self.hydra_context is not None and self.task_function is not None
        setup_globals()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        sweep_dir = Path(str(self.config.hydra.sweep.dir)).absolute()
        sweep_dir.mkdir(parents=True, exist_ok=True)
        _start_ray(ray, _plain_dict(self.ray_cfg.init))
        remote_job = ray.remote(**_plain_dict(self.ray_cfg.remote))(_run_job_remotely)
        log.info(f"Ray launcher: {len(job_overrides)} jobs on {ray.cluster_resources()}, sweep dir {sweep_dir}")
        pending = []
        for idx, overrides in enumerate(job_overrides, start=initial_job_idx):
            log.info(f"\t#{idx} : {' '.join(filter_overrides(overrides))}")
            sweep_config = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
            with open_dict(sweep_config):
                sweep_config.hydra.job.id = f"ray_{idx}"
                sweep_config.hydra.job.num = idx
                sweep_config.hydra.sweep.dir = str(sweep_dir)  # one directory, wherever the worker's cwd is
            pending.append((idx, overrides, remote_job.remote(
                self.hydra_context, self.task_function, sweep_config, Singleton.get_state(), os.getcwd())))
        results: List[JobReturn] = []
        for idx, overrides, ref in pending:
            try:
                result = ray.get(ref)
            except Exception as error:  # the worker died (out of memory, killed): no JobReturn came back
                result = JobReturn(overrides=list(overrides), status=JobStatus.FAILED, _return_value=error)
            if result.status == JobStatus.FAILED:
                log.error(f"job #{idx} ({' '.join(filter_overrides(overrides))}) failed: "
                          f"{type(result._return_value).__name__}: {result._return_value}")
            results.append(result)
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        return results


def _plain_dict(node: DictConfig) -> Dict[str, Any]:
    container = OmegaConf.to_container(node, resolve=True)
    assert isinstance(container, dict)
    return {str(key): value for key, value in container.items()}


def _start_ray(ray: Any, init: Dict[str, Any]) -> None:
    if ray.is_initialized():
        return
    init = {key: value for key, value in init.items() if value is not None}
    try:
        ray.init(**init)
    except (ConnectionError, RuntimeError, ValueError) as error:
        _refuse(f"ray.init({', '.join(f'{k}={v!r}' for k, v in init.items())}): {str(error).splitlines()[0]}")


def _run_job_remotely(hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig,
                      singleton_state: Dict[Any, Any], launch_cwd: str) -> JobReturn:
    """One job in a Ray worker: the launching process's Hydra state, its working directory where this machine
    has it (a local Ray), then Hydra's run_job as the basic launcher calls it."""
    setup_globals()
    Singleton.set_state(singleton_state)
    if os.path.isdir(launch_cwd):
        os.chdir(launch_cwd)
    try:
        return run_job(hydra_context=hydra_context, task_function=task_function, config=config,
                       job_dir_key="hydra.sweep.dir", job_subdir_key="hydra.sweep.subdir")
    except SystemExit as exit_:  # the entry refuses a bad config with exit 2: that job failed, not the sweep
        return JobReturn(overrides=list(config.hydra.overrides.task), status=JobStatus.FAILED,
                         _return_value=RuntimeError(f"the job exited with code {exit_.code}"))
