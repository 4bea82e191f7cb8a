"""The config's keys and what they may hold: `spec` (one key's type and range), `schemas` (the dataclasses whose fields
are the keys), `validation` (every key's range as one table and the rules that relate keys), `upgrade` (configs saved
under old names), `compose` (Hydra composition and the one-line refusal of a bad override) and `describe`
(`--describe`). No jax: a bad command line is refused before anything heavy is imported."""
