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

_COURSE_PACKAGE = __name__.split(".")[0]  # "utils": the course's own code, trusted by the checks


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


def forbidden_in_function(fn: Callable[..., Any], forbidden: Sequence[str]) -> str | None:
    """The forbidden name ``fn`` uses, found in its source (when it has one) or through the globals
    and closure variables it reaches; None when it uses none."""
    return _forbidden_in_own_source(fn, forbidden) or forbidden_in_globals(fn, forbidden)


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
