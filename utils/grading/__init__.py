"""The instructor grader: ``python -m utils.grade SUBMISSIONS`` (see :mod:`utils.grading.cli`).

Modules: :mod:`~utils.grading.course` (reading notebooks), :mod:`~utils.grading.engine` (planning,
running units, judging), :mod:`~utils.grading.sandbox` (isolation, processes),
:mod:`~utils.grading.worker` (the untrusted side), :mod:`~utils.grading.serialize` (npy + JSON),
:mod:`~utils.grading.report` (CSVs, feedback). Kept light: the worker imports this package.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    """``utils.grading.grade`` is :func:`utils.grading.cli.grade`, imported on first use so that the
    worker, which imports this package, never loads the trusted side."""
    if name == "grade":
        from utils.grading.cli import grade

        return grade
    raise AttributeError(f"module 'utils.grading' has no attribute {name!r}")


__all__ = ["grade"]
