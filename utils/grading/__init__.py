"""The instructor grader: ``python -m utils.grade SUBMISSIONS`` (see :mod:`utils.grading.cli`).

Modules: :mod:`~utils.grading.course` (reading notebooks), :mod:`~utils.grading.engine` (planning,
running units, judging), :mod:`~utils.grading.sandbox` (isolation, processes),
:mod:`~utils.grading.worker` (the untrusted side), :mod:`~utils.grading.serialize` (npy + JSON),
:mod:`~utils.grading.report` (CSVs, feedback). Kept light: the worker imports this package.
"""

from __future__ import annotations

from typing import Any


def grade(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """See :func:`utils.grading.cli.grade`."""
    from utils.grading.cli import grade as _grade

    return _grade(*args, **kwargs)


__all__ = ["grade"]
