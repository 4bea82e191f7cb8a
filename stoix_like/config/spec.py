"""What one config key may hold: a `Spec` (type, valid interval or choices, nullable, meaning) and the helpers
that write one (`real("(0, 1]", "the discount")`), plus the choices of the enumerated keys. No jax, no Hydra:
the schemas (stoix_like/config/schemas.py) and the validator (stoix_like/config/validation.py) both build on it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional, Tuple, TypeAlias, TypedDict

INF = math.inf

# A config's plain data, as OmegaConf.to_container gives it: a number, a string, a bool, None, or a list or nested
# dict of those. jax-free stand-in for stoix_like.types.JSONValue (that module imports jax); loose on purpose,
# since the validators compare and add values whose type a Spec has already checked.
ConfigValue: TypeAlias = Any


@dataclass(frozen=True)
class Spec:
    """What one key may hold. `kind`: "real" (an int is fine too), "int", "bool", "choice" (one of `choices`)
    or "int_list" (a list of ints, each in the interval)."""

    kind: str
    meaning: str
    low: float = -INF
    high: float = INF
    low_open: bool = True  # the bound itself is excluded ("(" rather than "[")
    high_open: bool = True
    choices: Tuple[str, ...] = ()
    nullable: bool = False  # null is allowed (and `meaning` says what it means)

    def interval(self) -> str:
        """The valid range in words a user can act on: "in (0, 1]", "at least 1", "greater than 0", ..."""
        low, high = _number(self.low), _number(self.high)
        if self.low > -INF and self.high < INF:
            return f"in {'(' if self.low_open else '['}{low}, {high}{')' if self.high_open else ']'}"
        if self.low > -INF:
            return f"{'greater than' if self.low_open else 'at least'} {low}"
        if self.high < INF:
            return f"{'less than' if self.high_open else 'at most'} {high}"
        return ""

    def describe(self) -> str:
        """What the value must be, e.g. "an integer, at least 1", "in (0, 1]", "one of relu, tanh"."""
        if self.kind == "bool":
            text = "True or False"
        elif self.kind == "choice":
            text = "one of " + ", ".join(self.choices)
        elif self.kind == "int":
            text = "an integer" + (", " + self.interval() if self.interval() else "")
        elif self.kind == "int_list":
            text = "a list of integers" + (", each " + self.interval() if self.interval() else "")
        else:
            text = self.interval() or "a number"
        return text + (" or null" if self.nullable else "")

    def problem(self, value: ConfigValue) -> Optional[str]:
        """None if `value` is valid, else what is wrong with it ("is out of range", "is not an integer", ...)."""
        if value is None:
            return None if self.nullable else "is not set"
        if self.kind == "bool":
            return None if isinstance(value, bool) else "is not a boolean"
        if self.kind == "choice":
            return None if isinstance(value, str) and value in self.choices else "is not one of the choices"
        if self.kind == "int_list":
            if not isinstance(value, (list, tuple)) or not all(_is_int(item) for item in value):
                return "is not a list of integers"
            return None if all(self._inside(item) for item in value) else "is out of range"
        if self.kind == "int":
            if not (_is_int(value) or _is_whole_float(value)):
                return "is not an integer"
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
            return "is not a number"
        return None if self._inside(value) else "is out of range"

    def _inside(self, value: float) -> bool:
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_whole_float(value: object) -> bool:
    """`arch.total_timesteps=1e6` reaches us as 1000000.0: a whole number, written the way researchers write it."""
    return isinstance(value, float) and value.is_integer() and abs(value) < 2 ** 53


def _number(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


class _Interval(TypedDict):
    """The bounds of a Spec, as `_parse_interval` reads them."""

    low: float
    high: float
    low_open: bool
    high_open: bool


def _parse_interval(interval: str) -> _Interval:
    """"(0, 1]" -> low=0, high=1, low_open=True, high_open=False; "inf" / "-inf" for an open end."""
    low, high = (part.strip() for part in interval[1:-1].split(","))
    parse = lambda text: float(text) if "inf" in text or "." in text or "e" in text else int(text)
    return dict(low=parse(low), high=parse(high), low_open=interval[0] == "(", high_open=interval[-1] == ")")


def real(interval: str, meaning: str, nullable: bool = False) -> Spec:
    return Spec("real", meaning, nullable=nullable, **_parse_interval(interval))


def integer(interval: str, meaning: str, nullable: bool = False) -> Spec:
    return Spec("int", meaning, nullable=nullable, **_parse_interval(interval))


def int_list(interval: str, meaning: str, nullable: bool = False) -> Spec:
    return Spec("int_list", meaning, nullable=nullable, **_parse_interval(interval))


def flag(meaning: str, nullable: bool = False) -> Spec:
    return Spec("bool", meaning, nullable=nullable)


def choice(choices: Tuple[str, ...], meaning: str) -> Spec:
    return Spec("choice", meaning, choices=tuple(choices))


# Choices of enumerated keys. Kept here as data (importing the modules that define them would import jax);
# tests/test_config_validation.py checks each against the code that reads it.
TD_TARGETS = ("q_learning", "double_q_learning", "munchausen")  # systems/q_learning/dqn.py TD_ERRORS
DISTRIBUTIONAL_TD_TARGETS = ("q_learning", "double_q_learning")  # systems/q_learning/distributional_dqn.py
DISTRIBUTIONS = ("categorical", "quantile")  # systems/q_learning/distributional_dqn.py DISTRIBUTIONS
SEARCH_POLICIES = ("gumbel_muzero", "muzero")  # systems/search/mcts.py SEARCH_POLICIES
ACTIVATIONS = ("elu", "gelu", "relu", "silu", "tanh")  # networks/torsos.py
KERNEL_INITS = ("orthogonal", "lecun_uniform")  # networks/torsos.KERNEL_INITS
CONVOLUTIONS = ("auto", "xla", "patches")  # networks/torsos.CONVOLUTIONS
PADDINGS = ("SAME", "VALID")  # networks/torsos.PADDINGS
ENV_SUITES = ("gymnax", "brax", "jumanji", "navix", "xminigrid", "craftax", "pgx", "gymnasium", "envpool",
              "playground", "popjax")  # envs/factory.py AVAILABLE_SUITES
OBSERVATION_LAYOUTS = ("flat", "image")  # envs/environment.py OBSERVATION_LAYOUTS
PLAYGROUND_IMPLS = ("jax", "warp")  # MuJoCo Playground's `impl`: its MJX backend
BRAX_BACKENDS = ("spring", "generalized", "positional", "mjx")
EVAL_METRICS = ("episode_return", "episode_length")  # what the evaluator measures per episode
NEPTUNE_MODES = ("async", "sync", "offline", "debug", "read-only")  # logging.py NEPTUNE_MODES
WANDB_MODES = ("online", "offline", "disabled")  # wandb.init's modes
SAVED_PARAMS = ("best", "latest")  # checkpointing.load_eval_params
SEED_LOOPS = ("vmap", "map", "map_on_cpu")  # parallel.py SEED_LOOPS
RECURRENT_CELLS = ("gru", "lstm")  # networks/recurrent.py CELLS
MUNCHAUSEN_KEYS = ("entropy_temperature", "munchausen_coefficient", "munchausen_clip_value_min")

POSITIVE_INT = "[1, inf)"
