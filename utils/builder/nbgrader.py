"""``python -m utils.build --nbgrader DIR``: the course as an nbgrader course directory.

For each ``solutions/NN_name.ipynb`` it writes ``DIR/source/NN_name/NN_name.ipynb`` (one assignment per
chapter, named like its notebook), stamped as the builder stamps it, outputs cleared, with nbgrader's
cell metadata (schema 3):

- **exercise cells** (``course.exercise``) become *solution* cells (``grade_id``: the exercise id
  with ``-`` for ``.``, as nbgrader's ids allow); their ``# BEGIN SOLUTION`` / ``# END SOLUTION``
  lines become nbgrader's ``### BEGIN SOLUTION`` / ``### END SOLUTION``, at the same indentation.
  Their ``course`` metadata stays, so the course's own grader can grade nbgrader's released notebooks;
- **check cells** (``check.<name>(<name>)``) become locked, graded *test* cells worth the exercise's
  points (``grade_id``: ``ch2-causal_mask-tests``). They run the public cases with
  ``assert_passed=True`` (a failure raises ``AssertionError`` with the ❌ line, so nbgrader gives 0),
  then, inside ``### BEGIN HIDDEN TESTS`` / ``### END HIDDEN TESTS``, the hidden cases, which
  ``nbgrader generate_assignment`` removes from the students' copy and ``nbgrader autograde`` restores;
- **prose cells** (markdown) and the **setup cell** are locked (``grade_id``: ``cell-<cell id>``);
  other code cells stay free, since the chapters' "Try it" prompts ask the learner to edit them.

``DIR/nbgrader_config.py`` names the course, keeps the course's stub for cleared solutions and gives
each cell a longer timeout. Run nbgrader (0.9) in DIR, with a kernel named ``python3`` in which the
course package is installed (``make lab``'s venv)::

    nbgrader generate_assignment 02_scaled_dot_product_attention
    nbgrader autograde 02_scaled_dot_product_attention
    nbgrader export
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from pathlib import Path

import nbformat

from utils.builder.chapter import KERNELSPEC, chapter_path
from utils.builder.config import load_config
from utils.builder.course import notebook_text
from utils.builder.stamps import SETUP_TAG, stamp
from utils.builder.strip import BEGIN, END, exercise_meta
from utils.notebook_files import NOTEBOOK_GLOB, BuildError, read_source_notebook
from utils.paths import REPO_ROOT

__all__ = ["NBGRADER_CONFIG", "export_nbgrader", "nbgrader_notebook", "nbgrader_test_source"]

NBGRADER_CONFIG = '''"""nbgrader's configuration for the course exported by `python -m utils.build --nbgrader DIR`."""

c = get_config()  # noqa: F821  (nbgrader defines it)
c.CourseDirectory.course_id = "attention-step-by-step"
# The course's own stub, as in chapters/.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\\nraise NotImplementedError"}
# Chapters train small models: give each cell time (seconds).
c.Execute.timeout = 300
'''
_CHECK_CELL = re.compile(r"\s*check\.(\w+)\((\w+)\)\s*")


def _grade_id(exercise_id: str) -> str:
    """nbgrader's ids allow letters, digits, ``_`` and ``-`` only: ``ch2.causal_mask`` -> ``ch2-causal_mask``."""
    return exercise_id.replace(".", "-")


def nbgrader_test_source(func_name: str, exercise_id: str, points: int, hidden_tests: bool = True) -> str:
    """The source of the graded test cell that replaces ``check.<func_name>(<func_name>)``.

    >>> print(nbgrader_test_source("causal_mask", "ch2.causal_mask", 1))
    # Tests of ch2.causal_mask (1 point): the public cases, then the grader's hidden ones.
    check.causal_mask(causal_mask, assert_passed=True)
    ### BEGIN HIDDEN TESTS
    check.causal_mask(causal_mask, cases="hidden", assert_passed=True)
    ### END HIDDEN TESTS
    """
    unit = "point" if points == 1 else "points"
    lines = [f"# Tests of {exercise_id} ({points} {unit}): the public cases"
             + (", then the grader's hidden ones." if hidden_tests else "."),
             f"check.{func_name}({func_name}, assert_passed=True)"]
    if hidden_tests:
        lines += ["### BEGIN HIDDEN TESTS", f'check.{func_name}({func_name}, cases="hidden", assert_passed=True)',
                  "### END HIDDEN TESTS"]
    return "\n".join(lines)


def _meta(grade_id: str, *, grade: bool = False, solution: bool = False, locked: bool = False,
          points: int | None = None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3, "solution": solution,
            "task": False}
    if points is not None:
        meta["points"] = points
    return meta


def _nbgrader_markers(source: str) -> str:
    """``# BEGIN SOLUTION`` -> ``### BEGIN SOLUTION`` (whole lines, indentation kept); the same for END."""
    out = []
    for line in source.split("\n"):
        stripped = line.strip()
        if stripped in (BEGIN, END):
            line = line[: len(line) - len(line.lstrip())] + "##" + stripped
        out.append(line)
    return "\n".join(out)


def nbgrader_notebook(solution: nbformat.NotebookNode, rel: str, hidden_tests: bool = True) -> nbformat.NotebookNode:
    """A stamped solution notebook as an nbgrader source notebook (see the module docstring).

    Args:
        solution: the solution notebook; it is not modified.
        rel: its path, for error messages.
        hidden_tests: add the hidden block to each test cell. Default: ``True``.

    Returns:
        The nbgrader notebook. Raises :class:`BuildError` when an exercise has no check cell after it.
    """
    nb = copy.deepcopy(solution)
    exercises: dict[str, tuple[str, int]] = {}  # function name -> (exercise id, points)
    tested: set[str] = set()
    for index, cell in enumerate(nb.cells):
        meta = exercise_meta(cell)
        kept = {k: v for k, v in cell.get("metadata", {}).items() if k in ("tags", "course")}
        if meta is not None:
            exercise_id, points = meta["exercise"], meta["points"]
            exercises[exercise_id.split(".", 1)[1]] = (exercise_id, points)
            cell.source = _nbgrader_markers(cell.source)
            kept["nbgrader"] = _meta(_grade_id(exercise_id), solution=True)
        elif cell.cell_type == "code" and (match := _CHECK_CELL.fullmatch(cell.source)):
            name = match[1]
            if name not in exercises or match[2] != name:
                raise BuildError(rel, index, f"check cell {cell.source.strip()!r} does not follow the exercise "
                                             f"cell that defines {name}")
            exercise_id, points = exercises[name]
            cell.source = nbgrader_test_source(name, exercise_id, points, hidden_tests)
            kept["nbgrader"] = _meta(f"{_grade_id(exercise_id)}-tests", grade=True, locked=True, points=points)
            tested.add(name)
        elif cell.cell_type == "markdown" or SETUP_TAG in cell.get("metadata", {}).get("tags", []):
            kept["nbgrader"] = _meta(f"cell-{cell.get('id', index)}", locked=True)
        cell.metadata = nbformat.from_dict(kept)
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    untested = [name for name in exercises if name not in tested]  # in course order
    if untested:
        raise BuildError(rel, None, f"exercise {exercises[untested[0]][0]!r} has no check cell "
                                    f"`check.{untested[0]}({untested[0]})`, so nbgrader could not grade it")
    nb.metadata = nbformat.from_dict({"kernelspec": dict(KERNELSPEC), "language_info": {"name": "python"}})
    return nb


def export_nbgrader(out_dir: str | Path, root: str | Path = REPO_ROOT, *, hidden_tests: bool = True,
                    chapters: Mapping[str, object] | None = None) -> list[Path]:
    """Write the nbgrader course directory ``out_dir`` and return the files written.

    Args:
        out_dir: the course directory (created if needed; other files in it are left alone).
        root: the course repository. Default: :data:`utils.paths.REPO_ROOT`.
        hidden_tests: add the hidden block to each test cell. Default: ``True``.
        chapters: only these notebook stems (e.g. ``{"01_queries_keys_values"}``). Default: every chapter.
    """
    root, out_dir = Path(root), Path(out_dir)
    config = load_config(root / "pyproject.toml")
    written = []
    for path in sorted((root / "solutions").glob(NOTEBOOK_GLOB)):
        if chapters is not None and path.stem not in chapters:
            continue
        rel = path.relative_to(root).as_posix()
        solution = read_source_notebook(path, rel)
        stamp(solution, config, chapter_path(rel))  # badges open the chapter, as in chapters/
        nb = nbgrader_notebook(solution, rel, hidden_tests)
        nbformat.validate(nb)
        target = out_dir / "source" / path.stem / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(notebook_text(nb), encoding="utf-8")
        written.append(target)
    config_path = out_dir / "nbgrader_config.py"
    config_path.write_text(NBGRADER_CONFIG, encoding="utf-8")
    return [*written, config_path]
