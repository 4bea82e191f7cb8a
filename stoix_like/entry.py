"""The Hydra entry every `experiments/<algo>.py` shares: compose `config/<algo>.yaml`, run, report errors in one line."""

from __future__ import annotations

import os
import sys
from typing import Callable

import hydra
from hydra.core.config_store import ConfigStore
from hydra.core.plugins import Plugins
from omegaconf import DictConfig

from stoix_like.errors import ConfigError

CONFIG_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "config")


def register_plugin_defaults() -> None:
    """Our defaults for the Hydra plugins, under the plugins' own names.

    `-m hydra/sweeper=optuna` maximises what `run_experiment` returns (the absolute-metric return), one
    TPE trial at a time, with the study in memory. `hydra/launcher=submitit_slurm` requeues a preempted or
    timed-out job (run it with logger.checkpointing.resume=True and a fixed directory, and the requeued job
    goes on from its last checkpoint). `hydra/launcher=submitit_local` runs each job in its own local process.
    These are stored in Hydra's ConfigStore rather than as config/hydra/... files because a file with a
    plugin config's name is merged with the plugin's schema, which Hydra refuses for Optuna's.
    """
    # Hydra executes every plugin module once, when it first scans them; ours must come after that.
    Plugins.instance()
    try:
        from hydra_plugins.hydra_optuna_sweeper.config import Direction, OptunaSweeperConf
    except ImportError:  # the plugin is optional at run time
        pass
    else:
        ConfigStore.instance().store(
            group="hydra/sweeper", name="optuna", provider="stoix_like",
            node=OptunaSweeperConf(direction=Direction.maximize,
                                   n_jobs=1, max_failure_rate=0.25))
    try:
        from hydra_plugins.hydra_submitit_launcher.config import LocalQueueConf, SlurmQueueConf
    except ImportError:
        pass
    else:
        # The plugins name jobs `${hydra.job.name}`, which config/hydra_settings.yaml sets through the
        # `hydra:` resolver, unavailable when the launcher is built: name them by the config directly.
        job_name = "${hydra.job.config_name}"
        ConfigStore.instance().store(group="hydra/launcher", name="submitit_local", provider="stoix_like",
                                     node=LocalQueueConf(name=job_name))
        ConfigStore.instance().store(group="hydra/launcher", name="submitit_slurm", provider="stoix_like",
                                     node=SlurmQueueConf(name=job_name, timeout_min=240, max_num_timeout=3))


def hydra_entry(config_name: str, run_experiment: Callable[[DictConfig], float]) -> Callable[[], float]:
    register_plugin_defaults()

    @hydra.main(config_path=CONFIG_DIR, config_name=config_name, version_base="1.3")
    def main(config: DictConfig) -> float:
        try:
            return run_experiment(config)
        except ConfigError as error:
            print(f"error: {error}", file=sys.stderr)
            sys.exit(2)

    return main
