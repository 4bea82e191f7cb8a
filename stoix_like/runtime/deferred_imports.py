"""Modules a dependency imports at its top but a run never uses, loaded on first use instead of at import.

gymnax's package imports every environment it has, and three of them (Pong, Catch, the meta-maze) import
matplotlib's pyplot and seaborn at their top, for rendering: 4.2 s of a command-line run's start on 2 cores, for a
run that renders nothing (issue 15's first result is meant to take 12 s in all). `defer` puts a stand-in in
`sys.modules` that imports the real module at its first attribute access and forwards to it, so the dependency's
`import seaborn as sns` costs nothing until something draws.

Not `importlib.util.LazyLoader`: on Python 3.11 an `import` statement that finds its module already in
`sys.modules` reads the module's `__spec__`, which makes a LazyLoader module load there and then.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import types
from typing import Any

# what gymnax's rendering imports; matplotlib itself is read at import (`from matplotlib import colors`)
RENDERING_MODULES = ("matplotlib.pyplot", "seaborn")


class DeferredModule(types.ModuleType):
    """Stands in for a module not imported yet: its first attribute read imports it, in its place in `sys.modules`
    (later imports get the real module) and forwards there from then on (for whoever kept the stand-in)."""

    def __init__(self, name: str, spec: importlib.machinery.ModuleSpec) -> None:
        super().__init__(name)
        self.__spec__ = spec  # what an `import` of it reads: found, and not being initialised
        self._real_module: types.ModuleType | None = None

    def __getattr__(self, attribute: str) -> Any:  # only for attributes the stand-in does not have itself
        return getattr(self.real_module(), attribute)

    def real_module(self) -> types.ModuleType:
        if self._real_module is None:
            name = self.__name__
            if sys.modules.get(name) is self:
                del sys.modules[name]
            self._real_module = importlib.import_module(name)  # sets it as its parent's attribute too
        return self._real_module


def defer(module_name: str) -> None:
    """Puts a `DeferredModule` for `module_name` in `sys.modules` (and as its parent package's attribute). A module
    already imported, or not installed (its importer then fails as it would have), is left as it is."""
    if module_name in sys.modules:
        return
    spec = importlib.util.find_spec(module_name)  # imports the parent package, if any
    if spec is None:
        return
    stand_in = DeferredModule(module_name, spec)
    sys.modules[module_name] = stand_in
    parent, _, child = module_name.rpartition(".")
    if parent:  # `import matplotlib.pyplot as plt` reads it as matplotlib's attribute
        setattr(sys.modules[parent], child, stand_in)


def defer_rendering_modules() -> None:
    for name in RENDERING_MODULES:
        defer(name)
