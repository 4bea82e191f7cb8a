"""A learner's numeric hyperparameters, read as data when a sweep trains several of their values in one program.

A single run reads `system.ent_coef` as the Python number in its config: XLA sees a constant, and nothing here
changes that run's program. A sweep (`sweep.system.ent_coef=[0.0,0.01]`, stoix_like/config/sweep.py) trains every
grid point × seed as one member of one compiled program, so a swept value must be an array that differs per
member: the program binds each member's values while it is traced (`member_values`), and the learner reads them
through `value(system, name)` at trace time, where it would otherwise have read the constant.

A learner that supports sweeps reads each sweepable key through `value` *inside* the traced learner: the program
is built from the first member's setup, so a number captured while that setup built the learner (a closure, a
`functools.partial`) would be the first member's for every member. Outside a member's trace `value` gives the
config's number, which is right for what each member's own setup runs (its warm-up, example transitions: each member
is set up from its own config) and wrong only for such a capture; the tests that compare a member other than the
first with its single run (tests/test_sweep_in_one_program.py) are what catch one. A learning rate is captured by its
optimiser at setup, so it is asked for with `learning_rate`, which, while a sweep sets up its members (`sweeping`),
defers the read to the optimiser's update.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Callable, Iterator, Mapping, Sequence, TypeVar, Union

import jax
import jax.numpy as jnp
import numpy as np
from omegaconf import DictConfig

State = TypeVar("State")
Outputs = TypeVar("Outputs")

# A number from the config, or (inside a member's trace) that member's value as a traced scalar
Number = Union[float, jax.Array]
# A learning rate an optimiser reads at each update: a number, or a function returning this member's rate
LearningRate = Union[float, Callable[[], Number]]


class _Binding(threading.local):
    """What the sweep on this thread binds: the swept names while members are set up and traced, and a member's
    values while its learner is traced. Thread-local: Sebulba traces on threads of its own."""

    swept: frozenset = frozenset()
    values: Mapping[str, jax.Array] | None = None


_binding = _Binding()


@contextlib.contextmanager
def sweeping(names: frozenset) -> Iterator[None]:
    """Members of a sweep of the system keys `names` are being set up and compiled."""
    previous = _binding.swept
    _binding.swept = frozenset(names)
    try:
        yield
    finally:
        _binding.swept = previous


@contextlib.contextmanager
def member_values(values: Mapping[str, jax.Array]) -> Iterator[None]:
    """One member's learner is being traced: `value` reads its swept keys from `values` (scalars, traced)."""
    previous = _binding.values
    _binding.values = values
    try:
        yield
    finally:
        _binding.values = previous


def value(system: DictConfig, name: str) -> Number:
    """`system.<name>`; inside a member's trace, that member's value of it when the sweep sweeps it. A learner calls
    it while it is traced, not while it is built (the module's docstring says why)."""
    if _binding.values is not None and name in _binding.values:
        return _binding.values[name]
    return system[name]


def learning_rate(system: DictConfig, name: str) -> LearningRate:
    """The learning rate `system.<name>` for an optimiser built at setup: the number itself, or, when swept, a
    function the optimiser calls inside the traced update (stoix_like/learner/optim.py, `make_optimizer`)."""
    if name in _binding.swept:
        return lambda: value(system, name)
    return float(system[name])


def per_member(learner_fn: Callable[[State], Outputs], values_by_member: Mapping[str, Sequence[float]]
               ) -> Callable[[State, jax.Array], Outputs]:
    """`learner_fn(state)` as `learner(state, member_index)`, which reads that member's value of every swept key
    (`values_by_member[key][member_index]`, in float32 as the config's numbers are once they meet the learner's
    arrays). runtime/parallel.py's `distribute(..., member_indexed=True)` gives each member its index."""
    tables = {name: np.asarray(values, np.float32) for name, values in values_by_member.items()}

    def member_learner(state: State, member_index: jax.Array) -> Outputs:
        values = {name: jnp.asarray(table)[member_index] for name, table in tables.items()}
        with sweeping(frozenset(tables)), member_values(values):
            return learner_fn(state)

    return member_learner
