"""One name, one definition: no public name is defined in two modules of ``utils``.

A name is *defined* by a module when the object's ``__module__`` is that module (functions, classes),
or, for constants, when the module assigns it at top level (found in its source by ``ast``), rather
than importing it. Two definitions of one name let a re-export or a star import silently pick one.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from collections import defaultdict

import utils

# Names that every module of one kind defines by design: the command-line entry point of a
# `python -m` module, and the exercise list of a chapter's exercise module.
PROTOCOL = {"main", "EXERCISES"}

ALLOWED: dict[str, frozenset[str]] = {}


def _top_level_assignments(module) -> set[str]:
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError):
        return set()
    names = set()
    for node in tree.body:
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        for target in targets:
            for leaf in ast.walk(target):
                if isinstance(leaf, ast.Name):
                    names.add(leaf.id)
    return names


def _modules():
    yield utils
    for info in pkgutil.walk_packages(utils.__path__, prefix="utils."):
        if info.name.endswith("__main__"):
            continue
        yield importlib.import_module(info.name)


def definitions() -> dict[str, list[str]]:
    """Public name -> the modules that define it."""
    homes: dict[str, list[str]] = defaultdict(list)
    for module in _modules():
        assigned = _top_level_assignments(module)
        for name, value in vars(module).items():
            if name.startswith("_") or inspect.ismodule(value):
                continue
            owner = (
                getattr(value, "__module__", None) if (inspect.isfunction(value) or inspect.isclass(value)) else None
            )
            if owner == module.__name__ or (owner is None and name in assigned):
                homes[name].append(module.__name__)
    return homes


def test_definitions_finds_functions_classes_and_constants():
    homes = definitions()
    assert homes["attention_heatmap"] == ["utils.plotting.common"]
    assert homes["Quiz"] == ["utils.widgets.quiz"]
    assert homes["CMAP"] == ["utils.plotting.common"]


def test_every_public_name_has_one_definition():
    clashes = {
        name: modules for name, modules in definitions().items()
        if len(modules) > 1 and name not in PROTOCOL and frozenset(modules) != ALLOWED.get(name)
    }
    assert not clashes, "public names defined in more than one module of utils:\n" + "\n".join(
        f"  {name}: defined in {' and '.join(modules)}" for name, modules in sorted(clashes.items()))
