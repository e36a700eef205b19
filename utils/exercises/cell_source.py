"""The source the notebook's check cell reads for a learner's function: what the grader will read.

The grader checks the whole exercise cell, as the learner typed it, with its IPython lines skipped
(:func:`utils.exercises.magics.python_of`). In a notebook, IPython keeps each cell in :mod:`linecache` in its
*transformed* form (``!pip list`` becomes ``get_ipython().system(...)``), and a cell under ``%%time`` is
compiled under a name linecache does not hold at all (walkthrough W25: ``%%time`` + ``import json`` passed the
check cell and scored 0). So the raw text of the cell in IPython's history that defined the function
is read, as the grader reads it: the history entry whose transformed text is the one linecache holds for the
function's code, or, for a body compiled under another name, the newest cell whose Python makes that very function
(same name, same bytecode); failing that, the cell linecache holds; outside IPython, the function's own source.
"""

from __future__ import annotations

import ast
import inspect
import linecache
import os
import sys
import types
from collections.abc import Callable
from typing import Any

from utils.exercises._forbidden_scopes import rebinds_name
from utils.exercises.magics import python_of

__all__ = ["cell_source", "out_of_sight"]

_TIMED = "<timed exec>"
"""The name IPython's ``%%time`` compiles a cell's body under."""
_NEWEST_CELLS = 200
"""How many of IPython's most recent inputs are searched for the defining cell."""


def cell_source(fn: Callable[..., Any], name: str | None = None) -> str | None:
    """The whole cell that defined the notebook function ``fn`` (bound to ``name``, by default its own) as the
    grader reads it; else ``fn``'s source; None when there is none (a builtin, or a notebook object whose cell
    cannot be found: see :func:`out_of_sight`)."""
    name = name or getattr(fn, "__name__", "")
    code = getattr(fn, "__code__", None)
    parsed, raw = _history()
    made = None
    if code is not None and getattr(fn, "__module__", None) == "__main__" and not os.path.exists(code.co_filename):
        made = _code_cell(fn, code, parsed, raw)
        if made is None:
            return None  # compiled from a string (exec, eval): no cell holds it
        if not name or _binds(_tree(made), name):
            return made
    if name and (cell := _binding_cell(name, raw)) is not None:  # a partial, an instance, a decorated function
        return cell
    if made is not None or out_of_sight(fn):
        return made
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return None


def _code_cell(fn: Callable[..., Any], code: types.CodeType, parsed: list[str], raw: list[str]) -> str | None:
    """The Python of the cell IPython compiled ``code`` from, found by its transformed text (what linecache holds)
    or, for a body compiled under another name (%%time's ``<timed exec>``), by compiling each input."""
    if lines := linecache.getlines(code.co_filename):
        transformed = "".join(lines)
        for cell, typed in zip(reversed(parsed), reversed(raw)):
            if cell.rstrip("\n") == transformed.rstrip("\n"):
                return python_of(typed)[0]
        return transformed
    if code.co_filename != _TIMED:  # exec, eval, compile: made from a string no cell holds
        return None
    for typed in reversed(raw):
        if getattr(fn, "__name__", "") in typed and _defines(python := python_of(typed)[0], code):
            return python
    return None


def _tree(python: str) -> list[ast.stmt]:
    try:
        return ast.parse(python).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []


def out_of_sight(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` was made in the notebook (a function, a ``functools.partial`` of one, an instance of a class
    defined there) in a way no cell binds it at its top level: ``exec``, ``eval`` (red team R25: the check cell
    read nothing and showed ✅ where the grader refused the cell)."""
    made = getattr(fn, "func", fn)  # a partial: the function it wraps
    owner = made if hasattr(made, "__code__") else type(made)
    return getattr(owner, "__module__", None) == "__main__" and bool(_history()[1])


def _binding_cell(name: str, raw: list[str]) -> str | None:
    """The Python (IPython lines skipped) of the newest input that binds ``name`` outside any function or class."""
    for typed in reversed(raw):
        if name in typed and _binds(_tree(python := python_of(typed)[0]), name):
            return python
    return None


def _binds(body: list[ast.stmt], name: str) -> bool:
    """Whether these top-level statements bind ``name`` outside any function or class body (inside ``if``,
    ``for``, ``with``, ``try`` too): what the grader reads as the exercise's own cell."""
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if rebinds_name(node, name):
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))
    return False


def _history() -> tuple[list[str], list[str]]:
    """IPython's newest inputs, transformed and as typed, aligned (two empty lists outside IPython)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    manager = getattr(shell, "history_manager", None)
    parsed, raw = getattr(manager, "input_hist_parsed", None), getattr(manager, "input_hist_raw", None)
    if not isinstance(parsed, list) or not isinstance(raw, list) or len(parsed) != len(raw):
        return [], []
    pairs = [(p, r) for p, r in zip(parsed[-_NEWEST_CELLS:], raw[-_NEWEST_CELLS:])
             if isinstance(p, str) and isinstance(r, str)]
    return [p for p, _ in pairs], [r for _, r in pairs]


def _defines(python: str, code: types.CodeType) -> bool:
    """Whether compiling ``python`` makes a function with ``code``'s name and bytecode."""
    try:
        stack = [compile(python, "<cell>", "exec", dont_inherit=True)]
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return False
    while stack:
        current = stack.pop()
        if current.co_name == code.co_name and current.co_code == code.co_code:
            return True
        stack.extend(c for c in current.co_consts if isinstance(c, types.CodeType))
    return False
