"""Every exercise of the course, defined once, one module per chapter (``qkv``, ``sdpa``, …).

In a notebook::

    from utils.exercises import check
    check.project_qkv(project_qkv)      # prints one line starting with ✅ or ❌

The grader and the pipeline tests use :func:`get` and :func:`all_exercises`. The modules, by side of
the grader's trust boundary:

* runs beside the learner's code: :mod:`~utils.exercises.runner` (and the plain data in
  :mod:`~utils.exercises.common`); the sandboxed worker imports nothing else of this package;
* decides a grade: :mod:`~utils.exercises.judging`, :mod:`~utils.exercises.forbidden`, the
  definitions (:mod:`~utils.exercises.definition`, the chapter modules, found by
  :mod:`~utils.exercises.registry`);
* the check cell, which runs both in the kernel: :mod:`~utils.exercises.check_cell`.

The names below are looked up lazily, so that importing ``utils.exercises.runner`` (which runs this
file first) loads no reference and no judging code.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "check": "utils.exercises.check_cell",
    "all_exercises": "utils.exercises.registry",
    "get": "utils.exercises.registry",
    "Exercise": "utils.exercises.definition",
    "Mistake": "utils.exercises.definition",
    "Verdict": "utils.exercises.judging",
    "Status": "utils.exercises.common",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
