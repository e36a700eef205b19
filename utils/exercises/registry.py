"""Every exercise of the course, found by looking: each chapter module of :mod:`utils.exercises`.

**Registering a chapter** is adding one file, ``utils/exercises/<slug>.py``, that declares
``EXERCISES: tuple[Exercise, ...] = (...)`` with ids ``ch<N>.<function name>``. Nothing else lists
the chapters: :func:`chapter_modules` finds every module of the package (except the machinery named
in :data:`MACHINERY`) and orders them by the chapter number in their ids, which is course order.

**A chapter's kernel loads only its own exercises.** ``check.<function name>`` (and :func:`get`) find
the one module to import with :func:`exercise_index`, which reads the chapter modules' sources (the
literal ``id="ch<N>.<name>"`` of each ``Exercise(...)``) without importing them; so an edit to one
chapter's exercises, mistakes or edge cases stales only that chapter's executed copies in html-cache/.
A test fails when the index and the modules' ``EXERCISES`` disagree (tests/test_chapter_isolation.py).
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.util
import pkgutil
import re
from pathlib import Path
from types import ModuleType

from utils.exercises.definition import Exercise

MACHINERY = frozenset({"cell_source", "check_cell", "common", "credit", "definition", "forbidden", "gradient_check",
                       "judging", "magics", "mistake_search", "probes", "registry", "relations", "runner"})
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


def _chapter_sources(package: str) -> list[tuple[str, Path]]:
    """(module name, source file) of each chapter module of ``package``, found without importing them."""
    found = []
    for info in pkgutil.iter_modules(importlib.import_module(package).__path__):
        if info.ispkg or info.name.startswith("_") or info.name in MACHINERY:
            continue
        name = f"{package}.{info.name}"
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
            raise ValueError(f"{name}: its source cannot be read to index its exercises")
        found.append((name, Path(spec.origin)))
    return found


_PARSED: dict[tuple[str, int, int], list[str]] = {}
"""(source path, mtime, size) -> the exercise ids it declares: each file is parsed once until it changes."""


def _literal_ids(module: str, path: Path) -> list[str]:
    """The ``id`` of every ``Exercise(...)`` call in the source at ``path``, which must be a string literal."""
    stat = path.stat()
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    if key in _PARSED:
        return _PARSED[key]
    ids = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
        if callee != "Exercise":
            continue
        given = [k.value for k in node.keywords if k.arg == "id"] or node.args[:1]
        if (not given or not isinstance(given[0], ast.Constant) or not isinstance(given[0].value, str)
                or not _ID.match(given[0].value)):
            raise ValueError(f"{module}, line {node.lineno}: write the Exercise's id as a string literal "
                             f"id=\"ch<N>.<function name>\", so that the check cell finds its chapter without "
                             "importing the others (exercise_index in utils/exercises/registry.py)")
        ids.append(given[0].value)
    _PARSED[key] = ids
    return ids


def exercise_index(package: str = "utils.exercises") -> dict[str, str]:
    """Exercise function name -> the chapter module that defines it, in course order, read from the
    sources (``ast``) without importing a chapter module. Raises ``ValueError`` naming the module and
    line of an ``Exercise(...)`` whose id is not a string literal ``"ch<N>.<function name>"``."""
    found = []
    for module, path in _chapter_sources(package):
        found += [(int(_ID.match(i).group(1)), module, i.partition(".")[2]) for i in _literal_ids(module, path)]
    index: dict[str, str] = {}
    for _, module, name in sorted(found, key=lambda item: item[0]):  # stable: a module's own order kept
        index.setdefault(name, module)
    return index


def exercise_named(func_name: str, package: str = "utils.exercises") -> Exercise:
    """The exercise whose function is ``func_name``, importing only its chapter's module (an unknown
    name, a typo or IPython asking for ``_repr_html_``, imports none).

    Raises ``KeyError`` when no chapter defines it."""
    index = exercise_index(package)
    if func_name in index:
        for exercise in importlib.import_module(index[func_name]).EXERCISES:
            if exercise.func_name == func_name:
                return exercise
    raise KeyError(f"no exercise named {func_name!r}; known: {', '.join(index)}")


def get(exercise_id: str) -> Exercise:
    """The exercise with this id, e.g. ``get("ch1.project_qkv")``, importing only its chapter's module."""
    if _ID.match(exercise_id):
        with contextlib.suppress(KeyError):
            exercise = exercise_named(exercise_id.partition(".")[2])
            if exercise.id == exercise_id:
                return exercise
    raise KeyError(f"no exercise {exercise_id!r}; known: {', '.join(all_exercises())}")
