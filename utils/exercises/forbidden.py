"""Forbidden names, as judged: does the learner's source, or the function a check cell received, use
a name the exercise asks them to implement themselves?

Trusted side: :func:`forbidden_in_source` only parses text (the grader calls it before anything
runs); :func:`forbidden_in_globals` inspects a function object without calling it. The run-time half
(patching the names out while the learner's code runs) is :func:`utils.exercises.runner.forbid`.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable, Sequence
from typing import Any

from utils.exercises.common import resolve
from utils.i18n.messages import tr

_COURSE_PACKAGE = __name__.split(".")[0]  # "utils": the course's own code, trusted by the checks

UNSAFE_BUILTINS = frozenset({"exec", "eval", "compile", "__import__", "globals", "locals", "vars", "setattr",
                             "delattr", "breakpoint", "__builtins__", "__loader__", "__spec__"})
"""Builtins that run text as code, or reach or change objects by computed names."""
UNSAFE_MODULES = frozenset({"importlib", "ctypes", "gc", "inspect", "builtins", "marshal", "pickle", "copyreg",
                            "types", "dill", "cloudpickle", "_thread", "code", "codeop", "runpy", "pdb"})
"""Modules that import, run or reach code by name, or walk frames and live objects."""
UNSAFE_ATTRIBUTES = frozenset({"f_back", "f_globals", "f_locals", "f_builtins", "f_code", "gi_frame", "cr_frame",
                               "ag_frame", "gi_code", "tb_frame", "tb_next", "_getframe", "_current_frames",
                               "settrace", "setprofile", "attrgetter", "methodcaller"})
"""Frame walking (``sys._getframe().f_back``, a generator's or traceback's frame) and name-based access."""
SAFE_DUNDERS = frozenset({"__init__", "__call__", "__name__", "__doc__"})
"""The only dunder attributes an exercise cell may touch (``super().__init__()``)."""
_TORCH_MODULES = ("torch",)


def forbidden_in_source(source: str, forbidden: Sequence[str]) -> str | None:
    """Return the first forbidden dotted name the source uses (as an attribute, an import, or the
    ``utils`` package), or None. The function's own name is never flagged.

    >>> forbidden_in_source("def f(q):\\n    return F.scaled_dot_product_attention(q, q, q)",
    ...                     ["torch.nn.functional.scaled_dot_product_attention"])
    'torch.nn.functional.scaled_dot_product_attention'
    """
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return None
    by_attr = {name.rpartition(".")[2]: name for name in forbidden}
    packages = {name for name in forbidden if "." not in name}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in by_attr:
            return by_attr[node.attr]
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in packages:
                    return alias.name
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if module.split(".")[0] in packages:
                return module
            for alias in node.names:
                if alias.name in by_attr:
                    return by_attr[alias.name]
        if isinstance(node, ast.Name) and node.id in packages:
            return node.id
    return None


def unsafe_in_source(source: str) -> str | None:
    """What in ``source`` an exercise cell may not use, whatever the exercise, or None.

    An exercise cell needs only ``math``, ``torch``, ``nn``, ``F`` and its own code. Code that runs
    text (``exec``, ``eval``, ``compile``), imports by name (``__import__``, ``importlib``), reaches
    objects by computed names (``getattr`` with a name that is not a literal, ``vars``, ``setattr``,
    ``sys.modules``, dunder attributes), walks frames (``sys._getframe``, ``f_back``, ``gi_frame``,
    ``tb_frame``) or uses torch's internals (``torch._C``, ``torch.ops``, any ``_private`` name of
    ``torch``) could reach a forbidden function, or the machinery that checks it, without naming it.

    >>> unsafe_in_source("def f(q):\\n    return getattr(F, 'scaled_' + 'dot')(q)")
    'getattr with a computed attribute name'
    >>> unsafe_in_source("def f(x):\\n    return torch.softmax(x, dim=-1)") is None
    True
    """
    try:
        tree = ast.parse(textwrap.dedent(source))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    torch_names = {"torch", "F", "nn"}
    sys_names = set()
    for node in ast.walk(tree):  # the names that modules are bound to, wherever they are imported
        if isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.split(".")[0]
                if root in _TORCH_MODULES:
                    torch_names.add((alias.asname or alias.name).split(".")[0])
                if root == "sys":
                    sys_names.add(alias.asname or "sys")
    for node in ast.walk(tree):
        reason = _unsafe_node(node, torch_names, sys_names)
        if reason:
            return reason
    return None


def _unsafe_node(node: ast.AST, torch_names: set[str], sys_names: set[str]) -> str | None:
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name.split(".")[0] in UNSAFE_MODULES:
                return f"import {alias.name}"
            if alias.name.split(".")[0] == _COURSE_PACKAGE:
                return tr("{code} (the course's own code, including the machinery that checks it)",
                          code=f"import {alias.name}")
            if alias.name.startswith(("torch._", "torch.ops")):
                return tr("{code} (torch's internals)", code=f"import {alias.name}")
    if isinstance(node, ast.ImportFrom):
        module = node.module or ""
        if module.split(".")[0] in UNSAFE_MODULES:
            return f"from {module} import ..."
        if module.split(".")[0] == _COURSE_PACKAGE:
            return tr("{code} (the course's own code, including the machinery that checks it)",
                      code=f"from {module} import ...")
        if module.startswith(("torch._", "torch.ops")):
            return tr("{code} (torch's internals)", code=f"from {module} import ...")
        for alias in node.names:
            if alias.name in UNSAFE_BUILTINS | UNSAFE_ATTRIBUTES or (module == "sys" and alias.name == "modules"):
                return f"from {module} import {alias.name}"
            if module.split(".")[0] in _TORCH_MODULES and (alias.name.startswith("_") or alias.name == "ops"):
                return tr("{code} (torch's internals)", code=f"from {module} import {alias.name}")
    if isinstance(node, ast.Name) and node.id in UNSAFE_BUILTINS:
        return node.id
    if isinstance(node, ast.Attribute):
        if node.attr in UNSAFE_ATTRIBUTES:
            return f".{node.attr}"
        if node.attr.startswith("__") and node.attr.endswith("__") and node.attr not in SAFE_DUNDERS:
            return f".{node.attr}"
        if isinstance(node.value, ast.Name) and node.value.id in sys_names and node.attr == "modules":
            return "sys.modules"
        chain = _attribute_chain(node)
        if chain and chain[0] in torch_names and any(part.startswith("_") or part == "ops" for part in chain[1:]):
            return tr("{code} (torch's internals)", code=".".join(chain))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
        name = node.args[1] if len(node.args) > 1 else None
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
            return tr("getattr with a computed attribute name")
        if name.value.startswith("_") or name.value in UNSAFE_ATTRIBUTES or name.value in ("ops", "modules"):
            return f"getattr(..., {name.value!r})"
    return None


def _attribute_chain(node: ast.Attribute) -> list[str]:
    """``["torch", "_C", "_nn"]`` for ``torch._C._nn``; ``[]`` when the chain does not start at a name."""
    parts: list[str] = []
    current: ast.AST = node
    while isinstance(current, ast.Attribute):
        parts.append(current.attr)
        current = current.value
    return [current.id, *reversed(parts)] if isinstance(current, ast.Name) else []


def forbidden_in_function(fn: Callable[..., Any], forbidden: Sequence[str]) -> str | None:
    """The forbidden name ``fn`` uses, found in its source (when it has one) or through the globals
    and closure variables it reaches; or what in its source no exercise may use
    (:func:`unsafe_in_source`); None when it uses none."""
    return (_forbidden_in_own_source(fn, forbidden) or forbidden_in_globals(fn, forbidden)
            or _unsafe_in_own_source(fn))


def _unsafe_in_own_source(fn: Callable[..., Any]) -> str | None:
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        return None
    return unsafe_in_source(source)


def forbidden_in_globals(fn: Callable[..., Any], forbidden: Sequence[str]) -> str | None:
    """Return the forbidden name that ``fn`` reaches through a global or closure variable, or None.

    This catches an alias the source check cannot see, e.g. ``from utils.positional import
    sinusoidal_encoding as table`` in an earlier cell and ``return table(...)`` in the exercise.
    Objects are matched by identity with the forbidden dotted names, and anything defined in a
    forbidden bare package (``"utils"``) by its ``__module__``.
    """
    code = getattr(fn, "__code__", None)
    if code is None or not forbidden:
        return None
    targets: dict[int, str] = {}
    packages = {name for name in forbidden if "." not in name}
    own_module = getattr(fn, "__module__", None) or ""
    if own_module.split(".")[0] in packages | {_COURSE_PACKAGE}:
        return None  # the course's own references and mistakes (a learner's cell runs in __main__)
    for dotted in forbidden:
        resolved = resolve(dotted)
        if resolved is not None:
            targets[id(getattr(*resolved))] = dotted
    referenced = []
    stack = [code]
    while stack:  # names used by fn and by functions, lambdas and comprehensions nested in it
        current = stack.pop()
        referenced.extend(current.co_names)
        stack.extend(c for c in current.co_consts if inspect.iscode(c))
    values = [fn.__globals__[name] for name in referenced if name in getattr(fn, "__globals__", {})]
    values += [cell.cell_contents for cell in (fn.__closure__ or ()) if _cell_filled(cell)]
    for value in values:
        if id(value) in targets:
            return targets[id(value)]
        module = value.__name__ if inspect.ismodule(value) else getattr(value, "__module__", None)
        if isinstance(module, str) and module.split(".")[0] in packages:
            name = getattr(value, "__qualname__", None)
            return f"{module}.{name}" if name and not inspect.ismodule(value) else module
    return None


def _cell_filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


def _forbidden_in_own_source(fn: Callable[..., Any], forbidden: Sequence[str]) -> str | None:
    if not forbidden:
        return None
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        return None
    return forbidden_in_source(source, forbidden)
