"""Reading notebooks: the course's exercise list (trusted) and a student's exercise cells (hostile).

Exercises are found by the id in the cell metadata (``{"course": {"exercise": "ch2.causal_mask",
"points": 2}}``), never by file name, so a renamed notebook still grades. Points always come from the
course's own source notebooks in ``solutions/``.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from utils.grading import files

MAX_NOTEBOOK_BYTES = 20 * 2**20
MAX_CELL_CHARS = 200_000


@dataclass(frozen=True)
class CourseExercise:
    id: str
    points: int
    notebook: str  # the solutions/ notebook it comes from
    exercise: Any  # utils.exercises.definition.Exercise


class InvalidNotebook(ValueError):
    pass


def read_notebook(path: Path) -> Any:
    """Parse a notebook with a size cap; raises :class:`InvalidNotebook` with a readable reason."""
    try:  # through one descriptor, without following links or blocking: a FIFO or device is refused
        text = files.read_regular(path, MAX_NOTEBOOK_BYTES).decode("utf-8")
    except files.TooLarge as exc:
        raise InvalidNotebook(f"is too large ({exc.size / 2**20:.0f} MB > {MAX_NOTEBOOK_BYTES // 2**20} MB)") from None
    except files.Refused as exc:
        raise InvalidNotebook(str(exc)) from None
    except UnicodeDecodeError:
        raise InvalidNotebook("is not UTF-8 text") from None
    try:
        notebook = nbformat.reads(text, as_version=4)
    except Exception as exc:  # nbformat raises many kinds (NotJSONError, ValueError, KeyError...)
        reason = "is not valid JSON" if "JSON" in type(exc).__name__ or "JSON" in str(exc)[:200] else \
            f"is not a Jupyter notebook ({type(exc).__name__})"
        raise InvalidNotebook(reason) from None
    cells = notebook.get("cells") if isinstance(notebook, Mapping) else None
    if not isinstance(cells, list):
        raise InvalidNotebook("is not a Jupyter notebook (no cells)")
    return notebook


def exercise_cells(notebook: Any) -> list[tuple[str, str, Any]]:
    """``(exercise id, source, points metadata)`` for every code cell tagged as an exercise."""
    found = []
    for cell in notebook.get("cells", []):
        if not isinstance(cell, Mapping) or cell.get("cell_type") != "code":
            continue
        metadata = cell.get("metadata")
        course = metadata.get("course") if isinstance(metadata, Mapping) else None
        exercise_id = course.get("exercise") if isinstance(course, Mapping) else None
        if not isinstance(exercise_id, str):
            continue
        source = cell.get("source", "")
        if isinstance(source, list):
            source = "".join(s for s in source if isinstance(s, str))
        if not isinstance(source, str):
            source = ""
        found.append((exercise_id[:100], source, course.get("points")))
    return found


def load_course(course_root: Path, registry: Mapping[str, Any]) -> list[CourseExercise]:
    """Every exercise of every chapter present in ``course_root/solutions``, in course order."""
    exercises: list[CourseExercise] = []
    seen: set[str] = set()
    for path in sorted((course_root / "solutions").glob("*.ipynb")):
        notebook = read_notebook(path)
        for exercise_id, _source, points in exercise_cells(notebook):
            if exercise_id in seen:
                raise ValueError(f"{path.name}: exercise {exercise_id!r} appears twice in the course")
            if exercise_id not in registry:
                print(f"grader: {path.name} has exercise {exercise_id!r} with no definition in "
                      f"utils.exercises; skipped", file=sys.stderr)
                continue
            if not isinstance(points, int) or isinstance(points, bool) or points < 0:
                raise ValueError(f"{path.name}: exercise {exercise_id!r} has no valid integer points")
            seen.add(exercise_id)
            exercises.append(CourseExercise(exercise_id, points, path.name, registry[exercise_id]))
    return exercises


@dataclass
class Submission:
    """One student's exercise cells, keyed by id, and the notebooks that could not be read."""

    student: str
    cells: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # id -> [(file, source)]
    invalid: list[tuple[str, str]] = field(default_factory=list)  # (file, reason)


def find_students(submissions: Path) -> list[Path]:
    return sorted(p for p in submissions.iterdir()
                  if p.is_dir() and not p.is_symlink() and not p.name.startswith("."))


def skipped_entries(submissions: Path) -> list[str]:
    """``"name (why)"`` for every entry of ``submissions`` that is not graded as a student, so that the
    grader can say so instead of dropping it silently."""
    skipped = []
    for path in sorted(submissions.iterdir()):
        if path.is_symlink():
            skipped.append(f"{path.name} (a symbolic link)")
        elif not path.is_dir():
            skipped.append(f"{path.name} (not a folder)")
        elif path.name.startswith("."):
            skipped.append(f"{path.name} (a folder whose name starts with '.')")
    return skipped


def read_submission(folder: Path) -> Submission:
    submission = Submission(folder.name)
    for path in sorted(folder.glob("*.ipynb")):
        try:
            notebook = read_notebook(path)
        except InvalidNotebook as exc:
            submission.invalid.append((path.name, str(exc)))
            continue
        for exercise_id, source, _points in exercise_cells(notebook):
            submission.cells.setdefault(exercise_id, []).append((path.name, source))
    return submission


def syntax_problem(source: str) -> str | None:
    """A one-line description of a syntax error in the cell, or None. Parsing never runs code."""
    if len(source) > MAX_CELL_CHARS:
        return f"the cell is too long ({len(source)} characters)"
    try:
        ast.parse(source)
    except SyntaxError as exc:
        return f"syntax error on line {exc.lineno}: {exc.msg}"
    except (ValueError, RecursionError, MemoryError) as exc:
        return f"the cell cannot be parsed ({type(exc).__name__})"
    return None
