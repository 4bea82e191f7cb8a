"""The Hydra entry every `experiments/<algo>.py` shares: compose `config/<algo>.yaml`, run, report errors in one line."""

from __future__ import annotations

import gc
import importlib
import sys
from typing import Callable, Optional

import hydra
from omegaconf import DictConfig

from stoix_like import systems
from stoix_like.config import validation
from stoix_like.config.compose import CONFIG_DIR, check_overrides, command_line, register_plugin_defaults
from stoix_like.errors import ConfigError

def hydra_entry(config_name: str, run_experiment: Optional[str | Callable[[DictConfig], float]] = None
                ) -> Callable[[], float]:
    """The `main` of `experiments/<config_name>.py`. An algorithm's entry names the algorithm only: its
    `run_experiment` is found through the registry (`stoix_like.systems.MODULE_OF`). Another entry (evaluate)
    gives "module:function". Either is imported only once the config has validated, so bad input is refused
    before jax and the system load (about 1 s instead of 5 on a busy 2-core CPU)."""
    if run_experiment is None:
        run_experiment = f"{systems.module_name(config_name)}:run_experiment"
    register_plugin_defaults()

    @hydra.main(config_path=CONFIG_DIR, config_name=config_name, version_base="1.3")
    def hydra_main(config: DictConfig) -> float:
        try:
            _refuse_options_of_another_algorithm(config_name, config)
            validation.validate(config)
            _keep_compiled_programs(config)
            run = _resolve(run_experiment)
            if _is_the_program(main):
                _collector_skips_what_is_loaded()
            return run(config)
        except ConfigError as error:
            print(f"error: {error}", file=sys.stderr)
            sys.exit(2)

    def main() -> float:
        sys.argv = [sys.argv[0], *command_line(sys.argv[1:])]
        if "--describe" in sys.argv[1:]:
            _describe_and_exit(config_name, [arg for arg in sys.argv[1:] if arg != "--describe"])
        _refuse_bad_overrides(config_name, sys.argv[1:])
        try:
            return hydra_main()
        finally:
            if _is_the_program(main):
                # the run is over: exit without the cycle collections Python's shutdown makes over every object
                # left (jax's traces, lowered modules, compiled programs); the atexit handlers still run, and the
                # run's logs and checkpoints were closed before its last line
                gc.freeze()

    return main


# The cyclic garbage collector and a command-line run. A run allocates millions of small objects while jax traces
# and lowers its programs, and every full collection walks every object alive: jax, flax, Hydra and the system
# loaded, then what tracing made. `gc.freeze` takes the objects alive now out of every later collection. Only
# where the entry is the program (`python -m experiments.<algo>`): in a process that goes on (a test, a notebook),
# frozen objects that become garbage in a cycle would never be collected.


def _is_the_program(main: Callable[[], float]) -> bool:
    return getattr(sys.modules.get("__main__"), "main", None) is main


_loaded_code_frozen = False


def _collector_skips_what_is_loaded() -> None:
    """Once per process, before its first run: what is loaded by then (modules, classes, functions, the config)
    lives as long as the process. A sweep's later jobs freeze nothing more, so one job's leftovers never outlive
    it uncollected."""
    global _loaded_code_frozen
    if not _loaded_code_frozen:
        gc.freeze()
        _loaded_code_frozen = True


def _keep_compiled_programs(config: DictConfig) -> None:
    """The user's persistent compilation cache (compilation_cache.use_user_cache), unless
    `arch.compilation_cache=False`, and left off for a multi-process run, whose programs hold cross-process
    collectives that this library has not checked load back correctly. Imported here: jax loads only once the
    config has validated."""
    from stoix_like.runtime import compilation_cache

    arch = config.get("arch") or {}
    several_processes = bool(arch.get("multihost")) or arch.get("coordinator_address") is not None
    compilation_cache.use_user_cache(bool(arch.get("compilation_cache", True)) and not several_processes)


def _refuse_bad_overrides(config_name: str, overrides: list[str]) -> None:
    """Exit 2 with one line if `check_overrides` finds a problem in the command line."""
    try:
        problem = check_overrides(config_name, overrides)
    except Exception:  # the pre-check only sharpens messages; Hydra still validates everything itself
        problem = None
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        sys.exit(2)


def _refuse_options_of_another_algorithm(config_name: str, config: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig

    from stoix_like.systems import fit

    network_option = HydraConfig.get().runtime.choices.get("network") if HydraConfig.initialized() else None
    problem = fit.misfit(config_name, config, network_option)
    if problem:
        raise ConfigError(problem)


def _describe_and_exit(config_name: str, overrides: list[str]) -> None:
    """`--describe`: print every key of the composed config with its type, range, default and meaning; exit 0
    (exit 2 with one line if the overrides themselves are wrong)."""
    from stoix_like.config.describe import describe

    _refuse_bad_overrides(config_name, overrides)
    print(describe(config_name, overrides))
    sys.exit(0)


def _resolve(run_experiment: str | Callable[[DictConfig], float]) -> Callable[[DictConfig], float]:
    if callable(run_experiment):
        return run_experiment
    module, function = run_experiment.split(":")
    return getattr(importlib.import_module(module), function)
