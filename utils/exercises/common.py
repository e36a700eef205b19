"""Plain data and helpers that both sides of the grader's trust boundary use.

The runner (:mod:`utils.exercises.runner`, beside the learner's code) records an :class:`Outcome` per
case; the judge (:mod:`utils.exercises.judging`, trusted) turns outcomes into a verdict whose status is
a :class:`Status`. This module knows nothing about references, mistakes or how a grade is decided, so
the sandboxed worker may import it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import torch

Case = dict[str, Any]
"""Keyword arguments for one call: tensors, ints, floats, bools, strings, None or tuples of ints."""

PASS, FAIL = "✅", "❌"
"""The marks that start a check cell's line and a feedback row."""

ERROR_MESSAGE_CHARS = 200
"""An error message raised by learner code is kept to this many characters (runner and judge agree)."""


class Status(StrEnum):
    """Every status an exercise can end with: in a check cell's verdict, a grader row and the reports.

    A ``StrEnum``, so a status is also its plain string (``Status.PASSED == "passed"``) in CSV and JSON.
    """

    PASSED = "passed"
    FAILED = "failed"  # ran, and the output is wrong (or an input was changed in place)
    ERROR = "error"  # raised, not implemented, could not run, or ended its process
    TIMEOUT = "timeout"
    MEMORY = "memory"
    FORBIDDEN = "forbidden"
    MISSING = "missing"  # grader only: no exercise cell (or more than one) in the submission
    INVALID = "invalid"  # grader only: the notebook could not be read


def one_line(text: object, limit: int = 300) -> str:
    """``text`` with its whitespace collapsed to single spaces, cut to ``limit`` characters with ``…``.

    >>> one_line("a\\n  b", limit=10), one_line("x" * 12, limit=5)
    ('a b', 'xxxx…')
    """
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class Outcome:
    """What one call of the learner's function produced. Plain data, so it can cross processes.

    ``output`` is a tensor, a tuple of tensors (or None) or a Python number; ``error`` is
    ``(exception type name, message)`` when it raised instead. ``mutated`` lists the arguments it
    changed in place. ``forbidden`` names a forbidden call made at run time.
    """

    output: Any = None
    error: tuple[str, str] | None = None
    mutated: list[str] = field(default_factory=list)
    forbidden: str | None = None


def clone_case(case: Case) -> Case:
    """A copy of ``case`` whose tensors are clones, so a call cannot change the original."""
    return {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in case.items()}


def plain_copy(value: Any) -> Any:
    """A plain copy of an output to compare: tensors become plain CPU ``torch.Tensor`` s (a subclass
    could lie through ``__torch_function__`` or an overridden method), numbers and strings their exact
    built-in type (a subclass could lie through ``__eq__`` or ``__float__``), lists tuples."""
    if isinstance(value, torch.Tensor):
        with torch._C.DisableTorchFunctionSubclass():
            plain = torch.Tensor.cpu(torch.Tensor.detach(value))
        return plain.as_subclass(torch.Tensor) if type(plain) is not torch.Tensor else plain
    if isinstance(value, (tuple, list)):
        return tuple(plain_copy(v) for v in value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, str):
        return str.__str__(value)
    return value


def resolve(dotted: str) -> tuple[Any, str] | None:
    """``(owner, attribute)`` for ``"package.module.attribute"``, or None when it does not exist here
    (or is a bare package name, which has no owner). The runner patches the attribute out; the
    forbidden-name check looks for the object it holds."""
    module_name, _, attr = dotted.rpartition(".")
    if not module_name:
        return None
    try:
        owner = importlib.import_module(module_name)
    except ImportError:
        return None
    return (owner, attr) if hasattr(owner, attr) else None
