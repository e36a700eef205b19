"""Step 3 of a build: validate an exercise cell and strip its solution.

An exercise cell (cell metadata ``course.exercise``) holds exactly one top-level function with a
docstring; what lies between whole-line ``# BEGIN SOLUTION`` / ``# END SOLUTION`` markers is replaced
by ``# YOUR CODE HERE`` / ``raise NotImplementedError`` at the marker's indentation.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from pathlib import Path

from utils.notebook_files import BuildError

__all__ = ["BEGIN", "END", "STUB", "check_exercise_cell", "exercise_meta", "marker_lines", "strip_solution"]

BEGIN, END = "# BEGIN SOLUTION", "# END SOLUTION"
STUB = ("# YOUR CODE HERE", "raise NotImplementedError")


def strip_solution(source: str, path: str | Path = "<cell>", cell: int | None = None) -> str:
    """Replace every ``# BEGIN SOLUTION`` ... ``# END SOLUTION`` block (markers included) by the stub.

    Markers count only as whole lines. The stub takes the BEGIN marker's indentation.

    Args:
        source: the cell's source.
        path: the notebook, for the message. Default: ``"<cell>"``.
        cell: the cell's index, for the message. Default: ``None``.

    Returns:
        The source without the solution. Raises :class:`BuildError` on unbalanced or nested markers.

    >>> print(strip_solution("def f():\\n    # BEGIN SOLUTION\\n    return 1\\n    # END SOLUTION"))
    def f():
        # YOUR CODE HERE
        raise NotImplementedError
    """
    out: list[str] = []
    begin: tuple[int, str] | None = None
    for number, line in enumerate(source.splitlines(), 1):
        stripped = line.strip()
        indent = line[: len(line) - len(line.lstrip())]
        if stripped == BEGIN:
            if begin is not None:
                raise BuildError(
                    path, cell, f"line {number}: nested {BEGIN} (the one on line {begin[0]} is still open)"
                )
            begin = (number, indent)
            out.extend(indent + stub for stub in STUB)
        elif stripped == END:
            if begin is None:
                raise BuildError(path, cell, f"line {number}: {END} without a {BEGIN} before it")
            if indent != begin[1]:
                raise BuildError(
                    path, cell, f"line {number}: {END} is indented differently from its {BEGIN} on line {begin[0]}"
                )
            begin = None
        elif begin is None:
            out.append(line)
    if begin is not None:
        raise BuildError(path, cell, f"line {begin[0]}: {BEGIN} has no matching {END}")
    return "\n".join(out)


def marker_lines(source: str) -> list[int]:
    """The line numbers (from 1) of the solution markers in ``source``."""
    return [n for n, line in enumerate(source.splitlines(), 1) if line.strip() in (BEGIN, END)]


def exercise_meta(cell: Mapping) -> Mapping | None:
    """The cell's ``course`` metadata when it is an exercise cell, else ``None``."""
    course = cell.get("metadata", {}).get("course")
    if isinstance(course, Mapping) and "exercise" in course:
        return course
    return None


def check_exercise_cell(
    cell: Mapping, index: int, path: str, chapter: int | None, registry: Mapping
) -> str:
    """Validate one exercise cell; return its exercise id."""
    meta = exercise_meta(cell)
    assert meta is not None
    exercise_id = meta["exercise"]
    if cell["cell_type"] != "code":
        raise BuildError(
            path, index, f"exercise {exercise_id!r} is on a {cell['cell_type']} cell; it must be a code cell"
        )
    if not isinstance(exercise_id, str) or not re.fullmatch(r"ch\d+\.[A-Za-z_]\w*", exercise_id):
        raise BuildError(path, index, f"exercise id {exercise_id!r} must look like 'ch<N>.<function name>'")
    if chapter is not None and exercise_id.split(".")[0] != f"ch{chapter}":
        raise BuildError(
            path, index, f"exercise {exercise_id!r} is in chapter {chapter}'s notebook; use 'ch{chapter}.…'"
        )
    if exercise_id not in registry:
        raise BuildError(
            path, index,
            f"exercise {exercise_id!r} is not defined in utils.exercises; add an Exercise to EXERCISES in "
            f"the chapter's module (known: {', '.join(registry) or 'none'})",
        )
    points = meta.get("points")
    if not isinstance(points, int) or isinstance(points, bool):
        raise BuildError(
            path, index, f"exercise {exercise_id!r}: metadata course.points must be an int, got {points!r}"
        )
    if points != registry[exercise_id].points:
        raise BuildError(
            path, index,
            f"exercise {exercise_id!r}: metadata says {points} points but utils.exercises says "
            f"{registry[exercise_id].points}; make them agree",
        )
    source = cell["source"]
    strip_solution(source, path, index)  # marker errors first: they explain a syntax error
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise BuildError(path, index, f"exercise {exercise_id!r} is not valid Python: {exc}") from exc
    defs = [node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    func_name = exercise_id.split(".", 1)[1]
    if len(defs) != 1:
        names = ", ".join(d.name for d in defs) or "none"
        raise BuildError(
            path, index,
            f"exercise {exercise_id!r} must define exactly one top-level function ({func_name}), "
            f"found {len(defs)}: {names}",
        )
    if defs[0].name != func_name:
        raise BuildError(path, index, f"exercise {exercise_id!r} defines {defs[0].name}(); name it {func_name}()")
    if ast.get_docstring(defs[0]) is None:
        raise BuildError(path, index, f"{func_name}() needs a docstring stating its input and output shapes")
    if not marker_lines(source):
        raise BuildError(
            path, index, f"exercise {exercise_id!r} has no {BEGIN} / {END} block, so nothing would be hidden"
        )
    return exercise_id
