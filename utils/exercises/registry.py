"""Every exercise of the course, found by looking: each chapter module of :mod:`utils.exercises`.

**Registering a chapter** is adding one file, ``utils/exercises/<slug>.py``, that declares
``EXERCISES: tuple[Exercise, ...] = (...)`` with ids ``ch<N>.<function name>``. Nothing else lists
the chapters: :func:`chapter_modules` finds every module of the package (except the machinery named
in :data:`MACHINERY`) and orders them by the chapter number in their ids, which is course order.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from types import ModuleType

from utils.exercises.definition import Exercise

MACHINERY = frozenset({"check_cell", "common", "credit", "definition", "forbidden", "judging", "registry", "runner"})
"""Modules of :mod:`utils.exercises` that hold the machinery, not a chapter's exercises."""

_ID = re.compile(r"^ch([1-9][0-9]*)\.[A-Za-z_][A-Za-z0-9_]*$")
_HOW = ("each chapter module of {package} declares `EXERCISES: tuple[Exercise, ...] = (...)` with ids "
        "'ch<N>.<function name>' of one chapter N; a module that is machinery, not a chapter, is listed in "
        "MACHINERY in utils/exercises/registry.py")


def _chapter_number(module: ModuleType, package: str) -> int:
    exercises = getattr(module, "EXERCISES", None)
    how = _HOW.format(package=package)
    if not isinstance(exercises, tuple) or not exercises:
        raise ValueError(f"{module.__name__} has no EXERCISES tuple ({type(exercises).__name__}): {how}")
    numbers = set()
    for exercise in exercises:
        if not isinstance(exercise, Exercise):
            raise ValueError(f"{module.__name__}.EXERCISES holds a {type(exercise).__name__}, not an Exercise: {how}")
        match = _ID.match(exercise.id)
        if match is None:
            raise ValueError(f"{module.__name__}: exercise id {exercise.id!r} is not 'ch<N>.<function name>': {how}")
        numbers.add(int(match.group(1)))
    if len(numbers) != 1:
        chapters = ", ".join(f"ch{n}" for n in sorted(numbers))
        raise ValueError(f"{module.__name__} mixes the exercises of chapters {chapters}: {how}")
    return numbers.pop()


def chapter_modules(package: str = "utils.exercises") -> tuple[ModuleType, ...]:
    """The chapter modules of ``package``, in course order (by the chapter number of their ids).

    Raises ``ValueError`` naming the module and what to change when a module breaks the convention
    or two modules claim the same chapter.
    """
    found: dict[int, ModuleType] = {}
    for info in pkgutil.iter_modules(importlib.import_module(package).__path__):
        if info.ispkg or info.name.startswith("_") or info.name in MACHINERY:
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        number = _chapter_number(module, package)
        if number in found:
            raise ValueError(f"chapter ch{number} is defined by both {found[number].__name__} and "
                             f"{module.__name__}: one module per chapter")
        found[number] = module
    return tuple(found[number] for number in sorted(found))


def all_exercises(package: str = "utils.exercises") -> dict[str, Exercise]:
    """All exercises by id, in course order. Raises if two share an id or a function name."""
    registry: dict[str, Exercise] = {}
    names: dict[str, str] = {}
    for module in chapter_modules(package):
        for exercise in module.EXERCISES:
            if exercise.id in registry:
                raise ValueError(f"duplicate exercise id {exercise.id!r} in {module.__name__}")
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
