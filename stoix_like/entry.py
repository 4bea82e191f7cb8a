"""The Hydra entry every `experiments/<algo>.py` shares: compose `config/<algo>.yaml`, run, report errors in one line."""

from __future__ import annotations

import os
import sys
from typing import Callable

import hydra
from omegaconf import DictConfig

from stoix_like.errors import ConfigError

CONFIG_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "config")


def hydra_entry(config_name: str, run_experiment: Callable[[DictConfig], float]) -> Callable[[], float]:
    @hydra.main(config_path=CONFIG_DIR, config_name=config_name, version_base="1.3")
    def main(config: DictConfig) -> float:
        try:
            return run_experiment(config)
        except ConfigError as error:
            print(f"error: {error}", file=sys.stderr)
            sys.exit(2)

    return main
