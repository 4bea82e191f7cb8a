"""Composing `config/<algo>.yaml` with a command line's overrides, as Hydra will, and refusing a bad override in one
line before Hydra's own longer error: the schemas registered in Hydra's ConfigStore (so composition types every
key), the plugins' defaults, whole-number budgets written as `1e6`, and the pre-check `check_overrides`."""

from __future__ import annotations

import difflib
import os

from hydra.core.config_store import ConfigStore
from hydra.core.plugins import Plugins
from omegaconf import DictConfig, OmegaConf

from stoix_like.config import schemas, sweep, validation

# the YAMLs: config/ at the repository root, beside this package
CONFIG_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "config")


def register_plugin_defaults() -> None:
    """Our defaults for the Hydra plugins, under the plugins' own names.

    `-m hydra/sweeper=optuna` maximises what `run_experiment` returns (the seeds' IQM of the absolute-metric
    return), one TPE trial at a time, with the study in memory, or in the database `hydra.sweeper.storage`
    names, shared by every job that names the same `hydra.sweeper.study_name`
    (hydra_plugins/stoix_like_plugins/optuna_study.py). `hydra/launcher=ray` runs each job as a Ray task
    (hydra_plugins/stoix_like_plugins/ray_launcher.py). `hydra/launcher=submitit_slurm` requeues a preempted or
    timed-out job (run it with logger.checkpointing.resume=True and a fixed directory, and the requeued job
    goes on from its last checkpoint). `hydra/launcher=submitit_local` runs each job in its own local process.
    These are stored in Hydra's ConfigStore rather than as config/hydra/... files because a file with a
    plugin config's name is merged with the plugin's schema, which Hydra refuses for Optuna's.
    """
    # Hydra executes every plugin module once, when it first scans them; ours must come after that.
    Plugins.instance()
    try:
        from hydra_plugins.hydra_optuna_sweeper.config import Direction
    except ImportError:  # the plugin is optional at run time
        pass
    else:
        from hydra_plugins.stoix_like_plugins.optuna_study import SharedStudySweeperConf

        ConfigStore.instance().store(
            group="hydra/sweeper", name="optuna", provider="stoix_like",
            node=SharedStudySweeperConf(direction=Direction.maximize, n_jobs=1, max_failure_rate=0.25))
    from hydra_plugins.stoix_like_plugins.ray_launcher import RayLauncherConf  # ray itself loads at launch

    ConfigStore.instance().store(group="hydra/launcher", name="ray", provider="stoix_like", node=RayLauncherConf)
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


def register_schemas() -> None:
    """The schemas (stoix_like/config/schemas.py) in Hydra's ConfigStore, where the YAMLs' defaults lists name them
    (`- /schema/system/dqn@_here_`): composing a config then types every key, so Hydra refuses a wrong type or an
    unknown key. Run on import of this module, which every composition goes through (`compose_config`, the
    entry, and CONFIG_DIR for code that composes by itself)."""
    store = ConfigStore.instance()
    for name, schema in schemas.SYSTEM_SCHEMAS.items():
        store.store(group="schema/system", name=name, node=schema, provider="stoix_like")
    for group, schema in schemas.GROUP_SCHEMAS.items():
        if group:  # evaluate's top-level keys are checked by validate() only
            store.store(group="schema", name=group, node=schema, provider="stoix_like")
    for name, schema in schemas.ARCH_VARIANT_SCHEMAS.items():
        store.store(group="schema", name=f"arch_{name}", node=schema, provider="stoix_like")


register_schemas()


def whole_numbers_as_ints(overrides: list[str]) -> list[str]:
    """`arch.total_timesteps=1e6` is how budgets are written; Hydra reads `1e6` as a float, which an int field
    refuses. A whole number written so at an int key is passed on as `1000000`; anything else is left as it is."""
    rewritten = []
    for override in overrides:
        key, sep, value = override.partition("=")
        spec = validation.spec_of(key.lstrip("+~"))
        if sep and spec is not None and spec.kind == "int":
            try:
                number = float(value)
            except ValueError:  # not a plain number: a sweep, an interpolation, null, ...
                number = None
            if number is not None and number.is_integer() and abs(number) < 2 ** 53:
                override = f"{key}={int(number)}"
        rewritten.append(override)
    return rewritten


def compose_config(config_name: str, overrides: list[str] | tuple = ()) -> DictConfig:
    """The config `python -m experiments.<config_name> <overrides>` runs, composed without launching anything
    (struct mode on, every key typed by its schema)."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        return compose(config_name, overrides=command_line(list(overrides)))


def command_line(overrides: list[str]) -> list[str]:
    """The overrides as Hydra is given them: whole numbers at int keys as ints, `sweep.*` keys as additions."""
    return sweep.command_line_additions(whole_numbers_as_ints(overrides))


CONFIG_GROUPS = ("arch", "system", "network", "env", "logger")


def available_options(group: str) -> list[str]:
    """Every option of a config group, nested folders included (`env` -> gymnax/cartpole, brax/ant, ...).
    A group's `shared/` folder holds values its options extend (config/system/shared/q_learning.yaml), not options."""
    root = os.path.join(CONFIG_DIR, group)
    options = []
    for folder, _, files in os.walk(root):
        if os.path.relpath(folder, root).split(os.sep)[0] == "shared":
            continue
        for name in files:
            if name.endswith(".yaml"):
                options.append(os.path.relpath(os.path.join(folder, name), root)[: -len(".yaml")])
    return sorted(option.replace(os.sep, "/") for option in options)


def check_overrides(config_name: str, overrides: list[str]) -> str | None:
    """One line saying what is wrong with the command line's overrides, or None.

    Hydra reports an unknown option or key in several lines (and lists no options in nested groups like
    env/gymnax/...); this check answers first, in one line: an old name with its new one
    (validation.RENAMED), else the available choices or a close match.
    A value of the wrong type is named as validate() would name it; whatever Hydra still refuses when composing
    is reported by its first line. Sweeps (`a=1,2`, `choice(...)`, `-m`) and anything unusual are left to Hydra.
    """
    if any(arg in ("-m", "--multirun") for arg in overrides) or not _plain_overrides(overrides):
        return None  # a sweep is Hydra's to expand; with nothing overridden there is nothing to compose twice
    if _composition_problem(config_name, overrides) is None:
        # Hydra composed every override: no option or key is unknown (or an old name), since either would have
        # failed the composition. Only a value's range is left to check. (One composition, ~0.25 s, instead of two.)
        return _value_problem(overrides)
    group_overrides, key_overrides = [], []
    for override in overrides:
        if "=" not in override or override.startswith(("-", "+", "~")):
            continue
        key, value = override.split("=", 1)
        if key in CONFIG_GROUPS:
            if any(mark in value for mark in ",()[]"):
                return None  # a sweep over options: Hydra expands and checks it
            options = available_options(key)
            if value not in options:
                renamed = validation.renamed_option_problem(key, value)
                if renamed:
                    return renamed
                close = difflib.get_close_matches(value, options, n=1)
                hint = f" (did you mean {close[0]}?)" if close else ""
                return f"unknown {key} {value!r}{hint}; available: {', '.join(options)}"
            group_overrides.append(override)
        elif "/" not in key and not key.startswith("hydra"):
            key_overrides.append(key)
    config = compose_config(config_name, group_overrides)
    system_name = validation.system_name_of(config)
    for key in key_overrides:
        renamed = validation.renamed_key_problem(key, system_name)
        if renamed:
            return renamed
        parent_key, _, leaf = key.rpartition(".")
        parent = OmegaConf.select(config, parent_key, default=None) if parent_key else config
        siblings = [str(k) for k in parent.keys()] if isinstance(parent, DictConfig) else []
        if leaf not in siblings:  # keys(), not select(): a required `???` value exists but has no value yet
            close = difflib.get_close_matches(leaf, siblings, n=1)
            hint = f"did you mean {(parent_key + '.' if parent_key else '') + close[0]}? " if close else ""
            return f"unknown config key {key!r}; {hint}(to add a new key on purpose, write +{key}=...)"
    return _value_problem(overrides) or _composition_problem(config_name, overrides)


def _plain_overrides(overrides: list[str]) -> list[str]:
    """The overrides a plain compose takes: no flags, no Hydra settings."""
    return [override for override in overrides if not override.startswith("-") and "=" in override
            and not override.lstrip("+~").startswith("hydra")]


def _value_problem(overrides: list[str]) -> str | None:
    """A value of the wrong type or out of its range, named in config_schema's words (Hydra would coerce `1` to
    True, or refuse `2.5` for an int in several lines)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    for override in whole_numbers_as_ints(_plain_overrides(overrides)):
        parsed = parser.parse_override(override)
        if parsed.is_sweep_override() or parsed.is_delete():
            continue
        problem = validation.check_key(parsed.key_or_group, parsed.value())
        if problem:
            return problem
    return None


def _composition_problem(config_name: str, overrides: list[str]) -> str | None:
    """Whatever Hydra refuses when it composes the whole command line (a typed key that cannot take a value, a
    key added to a typed block), as one line."""
    try:
        compose_config(config_name, _plain_overrides(overrides))
    except Exception as error:  # Hydra's composition errors have several types; each says what went wrong
        reasons = [str(error).strip().splitlines()[0]]
        if error.__cause__ is not None and str(error.__cause__).strip():
            reasons.append(str(error.__cause__).strip().splitlines()[0])
        return ": ".join(reasons)
    return None
