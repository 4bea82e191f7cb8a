"""`python -m experiments.<algo> --describe [group=option ...]`: every key of the composed config with its type and
valid range, its default and what it means, read from the schema (stoix_like/config/validation.py). Nothing runs."""

from __future__ import annotations

from typing import List, Sequence

from stoix_like.config import validation


def describe_lines(config: validation.Config) -> List[str]:
    """One line per leaf: `key  type and range  default  meaning`, in the config's order, columns aligned."""
    rows = []
    for key, value in validation.leaves(config):
        spec = validation.spec_of(key)
        if spec is not None:
            kind, meaning = spec.describe(), spec.meaning
        else:
            kind, meaning = "text", validation._lookup(validation.FREE_FORM, key) or ""
        rows.append((key, kind, validation.show(value), meaning))
    # a few long values (paths, interpolations) overflow their column rather than widen it for every row
    widths = [min(max(len(row[column]) for row in rows), cap) for column, cap in enumerate((44, 34, 12))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths)) + "  " + row[3] for row in rows]


def describe(config_name: str, overrides: Sequence[str]) -> str:
    """The description of `config/<config_name>.yaml` composed with `overrides` (group options pick a variant)."""
    from stoix_like.config.compose import compose_config

    config = compose_config(config_name, list(overrides))
    header = (f"{config_name}: every key as `key  type and valid range  default  meaning` "
              f"(set one with key=value; docs/configuration.md, docs/glossary.md)")
    return "\n".join([header, *describe_lines(config)])
