"""Results people can look at, from the logs runs already write: `python -m experiments.report RUN_DIR ...`.

    runs.py        read runs' `metrics.json` + `run.json` (single runs, `arch.num_seeds` runs, Hydra sweeps) and
                   group them: one group per (env, algorithm, the config keys that differ), seeds pooled
    statistics.py  rliable's stratified-bootstrap intervals: IQM / median / mean, curves, P(improvement)
    figures.py     matplotlib: learning curves, aggregates, sample efficiency
    tables.py      report.md and README's learning-table rows
    build.py       all of it, in one call

`runs.py` needs nothing beyond the core; the rest needs the `report` extra (`pip install -e ".[report]"`:
rliable, matplotlib, pandas<3), which `require_extra` names in one line when it is missing.
"""

from __future__ import annotations

from stoix_like.errors import ConfigError

EXTRA_HINT = 'pip install -e ".[report]" (rliable, matplotlib and pandas<3)'


def require_extra() -> None:
    """A one-line ConfigError naming the `report` extra if one of its packages cannot be imported."""
    try:
        import matplotlib  # noqa: F401
        import rliable.library  # noqa: F401
    except ImportError as error:
        raise ConfigError(f"the report needs the report extra ({error.name or error} is missing): "
                          f"{EXTRA_HINT}.") from None
    except Exception as error:  # noqa: BLE001 - e.g. rliable's `arch` under pandas 3 fails on import, not ImportError
        reason = str(error).splitlines()[0] if str(error) else ""
        raise ConfigError(f"the report extra does not import ({type(error).__name__}: {reason}): {EXTRA_HINT}."
                          ) from None
