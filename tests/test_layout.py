"""The package's layout (docs/ARCHITECTURE.md): the root holds only what every layer shares, imports go down the
layers and never up, and no module imports one that imports it back. Read from the source (every import
statement, function-level ones included), so nothing is imported to check it."""

from __future__ import annotations

import ast
import pathlib
from typing import Dict, List, Set

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "stoix_like"
ROOT_MODULES = {"__init__", "types", "errors", "entry"}

# what each layer must never import (a layer above it)
NEVER_IMPORTS = {
    "runtime": {"config", "learner", "run", "systems", "claims", "report", "networks", "envs", "entry"},
    "config": {"runtime", "learner", "run", "systems", "claims", "report", "networks", "envs", "entry"},
    "ops": {"runtime", "config", "learner", "run", "systems", "claims", "report", "networks", "envs", "entry"},
    "envs": {"learner", "run", "systems", "claims", "report", "networks", "entry"},
    "networks": {"learner", "run", "systems", "claims", "report", "entry"},
    "learner": {"run", "systems", "claims", "report", "entry"},
    "run": {"report", "entry"},
    "systems": {"claims", "report", "entry"},
}
# the registry (stoix_like.systems) imports the systems, which import the loop: only these read it
REGISTRY_READERS = {"stoix_like.entry", "stoix_like.run.evaluate_saved", "stoix_like.claims.learning_population"}


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> Dict[str, Set[str]]:
    """module -> the stoix_like modules it imports (a `from package import name` counts as the submodule)."""
    modules = {_module_name(path): path for path in PACKAGE.rglob("*.py")}

    def resolve(name: str) -> str:
        while name not in modules and "." in name:
            name = name.rpartition(".")[0]
        return name

    graph: Dict[str, Set[str]] = {}
    for module, path in modules.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("stoix_like"):
                for alias in node.names:
                    submodule = f"{node.module}.{alias.name}"
                    targets.add(submodule if submodule in modules else resolve(node.module))
            elif isinstance(node, ast.Import):
                targets |= {resolve(alias.name) for alias in node.names if alias.name.startswith("stoix_like")}
        graph[module] = targets - {module, "stoix_like"}
    return graph


def _circles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    circles = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph.get(successor, ())))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        circles.append(sorted(component))
    return circles


def _layer(module: str) -> str:
    """`stoix_like.run.experiment` -> "run"; a root module is its own layer (`stoix_like.types` -> "types")."""
    return module.split(".")[1] if "." in module else module


def test_the_root_holds_only_what_every_layer_shares():
    root_modules = {path.stem for path in PACKAGE.glob("*.py")}
    assert root_modules == ROOT_MODULES, f"move {sorted(root_modules - ROOT_MODULES)} into a subpackage"


def test_no_module_imports_one_that_imports_it_back():
    assert _circles(_import_graph()) == []


def test_the_circle_finder_finds_a_circle():
    """The check above can fail: a made-up graph with a circle of three and a tail."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}
    assert _circles(graph) == [["a", "b", "c"]]


@pytest.mark.parametrize("layer", sorted(NEVER_IMPORTS))
def test_imports_go_down_the_layers(layer):
    graph = _import_graph()
    upward = sorted(f"{module} -> {target}" for module, targets in graph.items() if _layer(module) == layer
                    for target in targets if _layer(target) in NEVER_IMPORTS[layer])
    assert upward == []


def test_only_the_entry_the_saved_run_evaluator_and_population_training_read_the_registry():
    graph = _import_graph()
    readers = {module for module, targets in graph.items() if "stoix_like.systems" in targets
               and not module.startswith("stoix_like.systems")}
    assert readers == REGISTRY_READERS
