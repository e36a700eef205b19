"""Every exercise of the course, defined once (see :mod:`utils.exercises.base`).

In a notebook::

    from utils.exercises import check
    check.project_qkv(project_qkv)      # prints one line starting with ✅ or ❌

The grader and the pipeline tests use :func:`get` and :func:`all_exercises`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from utils.exercises.base import Exercise, Mistake, Verdict

# One module per chapter, in course order. Each defines EXERCISES: list[Exercise].
CHAPTER_MODULES = ("qkv", "sdpa", "multihead", "positional", "transformer", "at_scale")

__all__ = ["CHAPTER_MODULES", "Exercise", "Mistake", "Verdict", "all_exercises", "check", "get"]


def all_exercises() -> dict[str, Exercise]:
    """All exercises by id, in course order. Raises if two share an id or a function name."""
    registry: dict[str, Exercise] = {}
    names: dict[str, str] = {}
    for module_name in CHAPTER_MODULES:
        module = importlib.import_module(f"utils.exercises.{module_name}")
        for exercise in module.EXERCISES:
            if exercise.id in registry:
                raise ValueError(f"duplicate exercise id {exercise.id!r} in utils.exercises.{module_name}")
            if exercise.func_name in names:
                raise ValueError(
                    f"exercise function name {exercise.func_name!r} is used by both "
                    f"{names[exercise.func_name]} and {exercise.id}"
                )
            registry[exercise.id] = exercise
            names[exercise.func_name] = exercise.id
    return registry


def get(exercise_id: str) -> Exercise:
    """The exercise with this id, e.g. ``get("ch1.project_qkv")``."""
    registry = all_exercises()
    if exercise_id not in registry:
        raise KeyError(f"no exercise {exercise_id!r}; known: {', '.join(registry)}")
    return registry[exercise_id]


class _Checker:
    """``check.<function name>(fn)`` runs that exercise's check and prints ✅ or ❌."""

    def __getattr__(self, func_name: str) -> Callable[..., Verdict]:
        if func_name.startswith("__"):
            raise AttributeError(func_name)
        for exercise in all_exercises().values():
            if exercise.func_name == func_name:
                return lambda fn, **kwargs: _run_check(exercise, fn, **kwargs)
        raise AttributeError(f"no exercise named {func_name!r}")

    def __dir__(self) -> list[str]:
        return [e.func_name for e in all_exercises().values()]


def _run_check(exercise: Exercise, fn: Any, **kwargs: Any) -> Verdict:
    from utils.exercises.base import check as run_check

    return run_check(exercise, fn, **kwargs)


check = _Checker()
