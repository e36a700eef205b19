"""The layout rules of CONTRIBUTING, checked: no import circle, layers one way down, no ``import *``,
modules of one job.

Every import counts, wherever it is written: module level, inside a function or a class, under
``if TYPE_CHECKING:``, in a ``try``, and ``importlib.import_module("utils.x")`` with a literal name. A
function-local import is still a dependency: it only hides the circle until the function runs.

The layer order and which module is in which layer are written once, in ``utils/__init__.py``'s
docstring (a drawing ``core ──▶ explorers ──▶ ...`` and a table); this file reads them from there.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "utils"
MAX_LINES = 420  # "about 400": past that, split the module along the course's seams


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the course module it imports
    path: Path
    line: int
    kind: str  # module-level, function-local, class body, TYPE_CHECKING, importlib

    def where(self) -> str:
        return f"{self.path}:{self.line} ({self.kind})"


def package_modules(package: Path) -> dict[str, Path]:
    """Every module of ``package`` by dotted name (a package by its own name, not ``.__init__``)."""
    modules = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


MODULES = package_modules(PACKAGE)


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The module that importing ``name`` names: ``utils.x.func`` -> ``utils.x``."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _kind(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> str:
    while node in parents:
        node = parents[node]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return "function-local"
        if isinstance(node, ast.ClassDef):
            return "class body"
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return "TYPE_CHECKING"
    return "module-level"


def _is_import_module(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] == "import_module"
            and bool(node.args) and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str))


def imports_of(name: str, modules: dict[str, Path]) -> list[Import]:
    """Every import of a course module that module ``name`` writes, of every kind, in source order."""
    path = modules[name]
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found: list[Import] = []
    for node in ast.walk(tree):
        kind = _kind(node, parents)
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            names = [f"{base}.{alias.name}" for alias in node.names]
        elif _is_import_module(node):
            names, kind = [node.args[0].value], "importlib"
        else:
            continue
        for imported in names:
            target = _resolve(imported, modules)
            if target is not None and target != name:
                found.append(Import(name, target, path, node.lineno, kind))
    return sorted(set(found), key=lambda found_import: (found_import.line, found_import.target))


def all_imports(modules: dict[str, Path]) -> list[Import]:
    """Every import between the modules, less those of a module's own packages: Python imports a
    module's packages before the module itself, so such an edge closes no circle."""
    edges = []
    for name in modules:
        ancestors = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
        edges += [found for found in imports_of(name, modules) if found.target not in ancestors]
    return edges


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return stack[stack.index(target):] + [target]
            if target not in state and (cycle := walk(target)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := walk(node)):
            return cycle
    return None


def import_circle(modules: dict[str, Path]) -> str | None:
    """One import circle, each step with the file and line that imports, or None."""
    edges = all_imports(modules)
    graph: dict[str, set[str]] = {}
    for found in edges:
        graph.setdefault(found.source, set()).add(found.target)
    cycle = find_cycle(graph)
    if cycle is None:
        return None
    where = {(found.source, found.target): found.where() for found in reversed(edges)}
    return " -> ".join(cycle) + "\n" + "\n".join(
        f"  {source} imports {target} at {where[source, target]}" for source, target in zip(cycle, cycle[1:]))


# --- layers -------------------------------------------------------------------------------------------

def read_layers(package_init: Path) -> tuple[list[str], dict[str, str]]:
    """The layer order (the ``a ──▶ b ──▶ ...`` drawing) and the table ``module -> layer`` of a package
    docstring."""
    doc = ast.get_docstring(ast.parse(package_init.read_text())) or ""
    drawing = [line for line in doc.splitlines() if "──▶" in line]
    assert len(drawing) == 1, f"{package_init}: the docstring draws the layers on one line `a ──▶ b ──▶ c`"
    order = [layer.strip() for layer in drawing[0].split("──▶")]
    lines = doc.splitlines()
    borders = [i for i, line in enumerate(lines) if re.fullmatch(r"=+( +=+){2}", line)]
    header = [i for i in borders if i + 1 < len(lines) and lines[i + 1].split()[:2] == ["layer", "modules"]]
    assert header, f"{package_init}: no `layer  modules  why there` table in the docstring"
    start = header[0] + 3
    end = next(i for i in borders if i > start)
    spans = [match.span() for match in re.finditer(r"=+", lines[header[0]])]
    table: dict[str, str] = {}
    layer = ""
    for line in lines[start:end]:
        layer = line[slice(*spans[0])].strip() or layer  # a blank layer cell continues the row above
        assert layer in order, f"{package_init}: layer {layer!r} is not in the drawing {order}"
        for module in re.findall(r"``([\w.]+)``", line[spans[1][0]:spans[2][0]]):
            assert module not in table, f"{package_init}: {module} is in the table twice"
            table[module] = layer
    return order, table


def layer_of(name: str, table: dict[str, str]) -> str | None:
    """The layer of the longest name in the table that is ``name`` or a package above it (the root
    package's row names only the root)."""
    root = name.split(".")[0]
    candidates = [listed for listed in table
                  if listed == name or (listed != root and name.startswith(listed + "."))]
    return table[max(candidates, key=len)] if candidates else None


def unclassified(modules: dict[str, Path], table: dict[str, str]) -> list[str]:
    return [name for name in modules if layer_of(name, table) is None]


def upward_imports(modules: dict[str, Path], order: list[str], table: dict[str, str]) -> list[str]:
    """Every import of a module of a later layer (to the right in the drawing), as a sentence."""
    found = []
    for edge in all_imports(modules):
        source, target = layer_of(edge.source, table), layer_of(edge.target, table)
        if source and target and order.index(target) > order.index(source):
            found.append(f"{edge.where()}: {edge.source} ({source}) imports {edge.target} ({target})")
    return found


def test_no_import_circle():
    circle = import_circle(MODULES)
    assert circle is None, "import circle (function-local and TYPE_CHECKING imports count): " + circle


def test_every_module_is_in_a_layer():
    missing = unclassified(MODULES, read_layers(PACKAGE / "__init__.py")[1])
    assert not missing, f"not in the layer table of utils/__init__.py's docstring: {missing}"


def test_every_layer_row_names_a_module():
    _, table = read_layers(PACKAGE / "__init__.py")
    stale = [name for name in table if name not in MODULES]
    assert not stale, f"utils/__init__.py's layer table names modules that do not exist: {stale}"


def test_no_module_imports_a_later_layer():
    order, table = read_layers(PACKAGE / "__init__.py")
    assert order == ["core", "explorers", "plotting", "widgets", "exercises", "tools"], order
    upward = upward_imports(MODULES, order, table)
    assert not upward, "imports against the layer order " + " ──▶ ".join(order) + ":\n" + "\n".join(upward)


# --- the checker, on a package written here ---------------------------------------------------------

LAYER_DOC = '''"""A made-up package.

    low ──▶ high

==========  ==============  ========
layer       modules         why there
==========  ==============  ========
low         ``pkg``
low         ``pkg.base``    the base
high        ``pkg.top``
            ``pkg.lazy``    continues the row above
==========  ==============  ========
"""
'''


def write_package(root: Path, sources: dict[str, str]) -> dict[str, Path]:
    for relative, text in {"pkg/__init__.py": LAYER_DOC, **sources}.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    return package_modules(root / "pkg")


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("statement, kind", [
    ("from pkg.top import thing", "module-level"),
    ("from .top import thing", "module-level"),
    ("import pkg.top", "module-level"),
    ("def f():\n    from pkg.top import thing", "function-local"),
    ("class C:\n    from pkg import top", "class body"),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.top import Thing", "TYPE_CHECKING"),
    ("try:\n    import pkg.top\nexcept ImportError:\n    pass", "module-level"),
    ("import importlib\ndef f():\n    return importlib.import_module('pkg.top')", "importlib"),
])
def test_every_kind_of_import_is_seen(tmp_path, statement, kind):
    modules = write_package(tmp_path, {"pkg/base.py": statement + "\n", "pkg/top.py": "thing = 1\n"})
    assert [(found.target, found.kind) for found in imports_of("pkg.base", modules)] == [("pkg.top", kind)]


def test_a_function_local_import_that_closes_a_circle_is_reported(tmp_path):
    sources = {"pkg/base.py": "def f():\n    from pkg.top import g\n", "pkg/top.py": "from pkg.base import f\n"}
    circle = import_circle(write_package(tmp_path, sources))
    assert circle is not None and circle.startswith("pkg.base -> pkg.top -> pkg.base"), circle
    assert "base.py:2 (function-local)" in circle and "top.py:1 (module-level)" in circle
    # the same package without the local import has no circle
    assert import_circle(write_package(tmp_path, {**sources, "pkg/base.py": "def f():\n    pass\n"})) is None


def test_an_import_of_a_package_above_is_no_circle(tmp_path):
    sources = {"pkg/__init__.py": LAYER_DOC + "def lazy():\n    from pkg import base\n",
               "pkg/base.py": "import pkg\n"}
    assert import_circle(write_package(tmp_path, sources)) is None


def test_an_upward_import_is_reported_with_its_file_line_and_layers(tmp_path):
    modules = write_package(tmp_path, {
        "pkg/base.py": "x = 1\n\n\ndef f():\n    import pkg.lazy\n",
        "pkg/top.py": "from pkg.base import x\n",  # downward: allowed
        "pkg/lazy.py": "",
    })
    order, table = read_layers(tmp_path / "pkg" / "__init__.py")
    assert order == ["low", "high"] and table["pkg.lazy"] == "high"
    upward = upward_imports(modules, order, table)
    assert upward == [f"{tmp_path / 'pkg' / 'base.py'}:5 (function-local): pkg.base (low) imports pkg.lazy (high)"]


def test_a_module_in_no_layer_is_reported(tmp_path):
    modules = write_package(tmp_path, {"pkg/base.py": "", "pkg/new.py": "", "pkg/top/inner.py": ""})
    _, table = read_layers(tmp_path / "pkg" / "__init__.py")
    assert unclassified(modules, table) == ["pkg.new"]  # pkg.top covers its package; pkg covers only itself


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_star_import_and_a_bounded_size(name):
    path = MODULES[name]
    tree = ast.parse(path.read_text())
    stars = [node.lineno for node in ast.walk(tree)
             if isinstance(node, ast.ImportFrom) and any(alias.name == "*" for alias in node.names)]
    assert not stars, f"{path}: `import *` on line(s) {stars}; import the names you use"
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path} has {lines} lines (> {MAX_LINES}): split it along the course's seams"


def test_contributing_maps_every_folder_of_the_package():
    text = (PACKAGE.parent / "CONTRIBUTING.md").read_text()
    folders = sorted({path.parent.relative_to(PACKAGE.parent).as_posix() for path in PACKAGE.rglob("*.py")})
    unmapped = [folder for folder in folders if f"| `{folder}/` |" not in text]
    assert not unmapped, f"CONTRIBUTING.md's table 'The package, folder by folder' lacks a row for {unmapped}"
