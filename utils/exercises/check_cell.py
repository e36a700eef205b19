"""What a notebook's check cell calls: ``check.project_qkv(project_qkv)`` prints one ✅ or ❌ line.

:data:`check` is a :class:`CheckCellAPI`: one attribute per exercise function name. Each runs
:func:`run_public_check`, the runner and the judge in one process (the kernel), on the public cases
(seed 0). The grader runs the same two halves on hidden cases, with a process boundary between them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from utils.exercises.common import Status
from utils.exercises.definition import Exercise
from utils.exercises.forbidden import forbidden_in_function
from utils.exercises.judging import Verdict, describe, judge
from utils.exercises.registry import all_exercises
from utils.exercises.runner import run_cases
from utils.notebook_setup import verify_course_package


def run_public_check(exercise: Exercise, fn: Callable[..., Any], *, seed: int = 0, quiet: bool = False) -> Verdict:
    """Check ``fn`` against ``exercise`` and print one ``✅``/``❌`` line (unless ``quiet``)."""
    if not callable(fn):
        verdict = Verdict(False, Status.ERROR, f"expected your function {exercise.func_name}, got {describe(fn)}")
    else:
        name = forbidden_in_function(fn, exercise.forbidden)
        if name:
            verdict = Verdict(
                False, Status.FORBIDDEN,
                f"your function uses {name}; this exercise asks you to implement it yourself",
            )
        else:
            cases = exercise.cases(seed)
            verdict = judge(exercise, cases, run_cases(fn, cases, exercise.forbidden, exercise.gradients))
    if not quiet:
        print(verdict.line)
    return verdict


class CheckCellAPI:
    """``check.<function name>(fn, **kwargs)`` runs :func:`run_public_check` for that exercise."""

    def __getattr__(self, func_name: str) -> Callable[..., Verdict]:
        if func_name.startswith("__"):
            raise AttributeError(func_name)
        verify_course_package()  # a learner's own `utils` imported later would make every check lie
        for exercise in all_exercises().values():
            if exercise.func_name == func_name:
                return lambda fn, **kwargs: run_public_check(exercise, fn, **kwargs)
        raise AttributeError(f"no exercise named {func_name!r}")

    def __dir__(self) -> list[str]:
        return [e.func_name for e in all_exercises().values()]


check = CheckCellAPI()
