"""Helpers that build courses and submissions for the grader tests.

A *toy course* is a temporary folder with ``solutions/01_toy.ipynb`` holding three exercise cells and
a registry of three :class:`~utils.exercises.definition.Exercise` s, so that the grader's machinery can be
tested without the real chapters. Real-course helpers turn ``solutions/`` notebooks into submissions.
"""

from __future__ import annotations

import contextlib
import csv
import math
import os
import re
import sys
from fractions import Fraction
from pathlib import Path

import nbformat
import pytest
import torch

from utils.exercises.definition import Exercise, Mistake


@contextlib.contextmanager
def static_check_off(*markers: str):
    """While it is open, the grader's static check of exercise cells (``engine.unsafe_in_source``) lets cells
    through: for a test whose attack cell imports ``os``, ``time``, ``json``, ``signal``... or writes a file
    (forks, hangs, fd exhaustion, forged results), which the static check refuses (issue 35), so that only the
    sandbox's run-time defences stand between the cell and the grade. With ``markers``, only a cell that holds
    one of them passes unchecked; the others are still checked. Only in-process ``batch.grade`` calls see it;
    there is no switch in the grader itself."""
    from utils.grading import engine

    checked = engine.unsafe_in_source
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(engine, "unsafe_in_source", lambda source: None if not markers or any(
            marker in source for marker in markers) else checked(source))
        yield

REPO = Path(__file__).resolve().parents[1]

# --------------------------------------------------------------------------------------------------
# The toy course
# --------------------------------------------------------------------------------------------------


def _add_one(x):
    return x + 1


def _attend(q, k, v):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(scores, dim=-1) @ v


def _attend_no_scale(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v


def _total(x):
    return float(x.double().sum())


def _cases_add_one(rng, gen):
    return [{"x": torch.randn(rng.randint(1, 6), rng.randint(1, 5), generator=gen)} for _ in range(3)]


def _cases_attend(rng, gen):
    cases = []
    for _ in range(3):
        n, length, source, dim = rng.randint(1, 3), rng.randint(1, 5), rng.randint(1, 5), rng.randint(2, 8)
        cases.append({"q": torch.randn(n, length, dim, generator=gen), "k": torch.randn(n, source, dim, generator=gen),
                      "v": torch.randn(n, source, dim, generator=gen)})
    return cases


def _cases_total(rng, gen):
    return [{"x": torch.randn(rng.randint(1, 9), generator=gen)} for _ in range(3)]


ADD_ONE = Exercise(
    "ch1.add_one", _add_one, _cases_add_one, points=2,
    mistakes=(Mistake("add_two", lambda x: x + 2, "you added 2 instead of 1"),
              Mistake("same", lambda x: x.clone(), "you returned the input unchanged")),
)
ATTEND = Exercise(
    "ch1.attend", _attend, _cases_attend, points=3,
    mistakes=(Mistake("no_scale", _attend_no_scale, "you forgot to divide the scores by sqrt(d)"),
              Mistake("no_softmax", lambda q, k, v: q @ k.transpose(-2, -1) @ v, "you forgot the softmax")),
    forbidden=("torch.nn.functional.scaled_dot_product_attention", "utils"),
)
TOTAL = Exercise(
    "ch1.total", _total, _cases_total, points=1,
    mistakes=(Mistake("mean", lambda x: float(x.double().mean()), "you took the mean, not the sum"),
              Mistake("zero", lambda x: 0.0, "you returned 0")),
)
TOY_REGISTRY = {e.id: e for e in (ADD_ONE, ATTEND, TOTAL)}

TOY_SOLUTIONS = {
    "ch1.add_one": (
        'def add_one(x):\n    """(N, D) -> (N, D)"""\n    # BEGIN SOLUTION\n    return x + 1\n    # END SOLUTION\n'
    ),
    "ch1.attend": (
        'def attend(q, k, v):\n    """(N, L, D), (N, S, D), (N, S, D) -> (N, L, D)"""\n    # BEGIN SOLUTION\n'
        "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
        "    return torch.softmax(scores, dim=-1) @ v\n    # END SOLUTION\n"
    ),
    "ch1.total": (
        'def total(x):\n    """(N,) -> float"""\n    # BEGIN SOLUTION\n'
        "    return float(x.double().sum())\n    # END SOLUTION\n"
    ),
}
TOY_POINTS = {e.id: e.points for e in TOY_REGISTRY.values()}


def notebook(cells: list[tuple[str | None, str]], points: dict[str, int] | None = None) -> nbformat.NotebookNode:
    """A v4 notebook: ``(exercise id or None, source)`` per code cell, with prose around them."""
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell("# Chapter 1 · Toy"))
    for exercise_id, source in cells:
        cell = nbformat.v4.new_code_cell(source)
        if exercise_id is not None:
            cell.metadata["course"] = {"exercise": exercise_id, "points": (points or {}).get(exercise_id, 99)}
        nb.cells.append(cell)
        if exercise_id is not None:
            name = exercise_id.split(".", 1)[1]
            nb.cells.append(nbformat.v4.new_code_cell(f"from utils.exercises import check\ncheck.{name}({name})"))
    return nb


def write_notebook(path: Path, nb: nbformat.NotebookNode) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    return path


def make_toy_course(root: Path) -> Path:
    cells = [(eid, src) for eid, src in TOY_SOLUTIONS.items()]
    write_notebook(root / "solutions" / "01_toy.ipynb", notebook(cells, TOY_POINTS))
    return root


def toy_submission(overrides: dict[str, str | None] | None = None) -> nbformat.NotebookNode:
    """The toy solutions with some cells replaced (``None`` drops the cell). Points in the submission
    are deliberately absurd (99): the grader must take them from the course."""
    overrides = overrides or {}
    cells = []
    for eid, src in TOY_SOLUTIONS.items():
        source = overrides.get(eid, src)
        if source is not None:
            cells.append((eid, source))
    return notebook(cells)


def student(submissions: Path, name: str, notebooks: dict[str, nbformat.NotebookNode | str]) -> Path:
    """Create ``submissions/name/`` with the given notebooks (a ``str`` is written as raw text)."""
    folder = submissions / name
    folder.mkdir(parents=True, exist_ok=True)
    for file_name, nb in notebooks.items():
        if isinstance(nb, str):
            (folder / file_name).write_text(nb, encoding="utf-8")
        else:
            write_notebook(folder / file_name, nb)
    return folder


# --------------------------------------------------------------------------------------------------
# The real course
# --------------------------------------------------------------------------------------------------

_SOLUTION_BLOCK = re.compile(r"^([ \t]*)# BEGIN SOLUTION\n.*?^[ \t]*# END SOLUTION\n?", re.M | re.S)


def strip_solutions(source: str) -> str:
    """What the builder does to an exercise cell: the solution becomes ``raise NotImplementedError``."""
    return _SOLUTION_BLOCK.sub(lambda m: f"{m.group(1)}# YOUR CODE HERE\n{m.group(1)}raise NotImplementedError\n",
                               source)


def course_notebooks() -> list[Path]:
    """The solutions/ notebooks that have at least one exercise cell."""
    found = []
    for path in sorted((REPO / "solutions").glob("*.ipynb")):
        try:
            nb = nbformat.read(str(path), as_version=4)
        except Exception:
            continue
        if any(c.get("metadata", {}).get("course", {}).get("exercise") for c in nb.cells):
            found.append(path)
    return found


def student_version(solution: Path) -> nbformat.NotebookNode:
    """The untouched chapter notebook: chapters/<same name> when built, else the solution stripped."""
    built = REPO / "chapters" / solution.name
    if built.exists():
        return nbformat.read(str(built), as_version=4)
    nb = nbformat.read(str(solution), as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.get("metadata", {}).get("course", {}).get("exercise"):
            cell.source = strip_solutions(cell.source)
    return nb


def exercise_ids(nb: nbformat.NotebookNode) -> list[str]:
    return [c.metadata["course"]["exercise"] for c in nb.cells
            if c.cell_type == "code" and c.get("metadata", {}).get("course", {}).get("exercise")]


# --------------------------------------------------------------------------------------------------
# Reading the reports
# --------------------------------------------------------------------------------------------------


def part_rows(out: Path) -> dict[tuple[str, str, str], dict[str, str]]:
    """``results.csv`` by (student, exercise, part)."""
    with open(out / "results.csv", newline="", encoding="utf-8") as handle:
        return {(r["student"], r["exercise"], r["part"]): r for r in csv.DictReader(handle)}


def exercise_rows(out: Path) -> dict[tuple[str, str], dict[str, str]]:
    """``results.csv`` by (student, exercise), its part lines folded into one: points and max_points
    summed exactly, status ``passed`` when every part passed (else the first other part status), the
    feedback of the parts joined with " | "."""
    folded: dict[tuple[str, str], dict[str, str]] = {}
    for (student, exercise, _part), r in part_rows(out).items():
        got = folded.get((student, exercise))
        if got is None:
            folded[(student, exercise)] = dict(r)
            continue
        for key in ("points", "max_points"):
            total = Fraction(got[key]) + Fraction(r[key])
            got[key] = str(total.numerator) if total.denominator == 1 else str(float(total))
        if got["status"] == "passed":
            got["status"] = r["status"]
        got["feedback"] += " | " + r["feedback"]
    return folded


def blocked_folders() -> list[tuple[str, str]]:
    """Folders an unprivileged user cannot pass on the way to this Python (pyenv under /root, say)."""
    needed = {sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    found = set()
    for path in needed:
        parts = Path(path).parts
        for depth in range(2, len(parts) + 1):
            folder = str(Path(*parts[:depth]))
            if not os.stat(folder).st_mode & 0o001:
                found.add((folder, str(Path(*parts[:depth + 1]))))
                break
    return sorted(found)


# In a mount namespace of its own: each blocking folder becomes a passable tmpfs holding only the folder
# below it that leads to Python (as in a container whose Python is under /usr), then it execs argv (capsh
# dropping capabilities, or setpriv becoming an unprivileged user). Format it with repo, blocked
# (blocked_folders()) and argv.
REACHABLE = """
import os, sys
sys.path.insert(0, {repo!r})
from utils.grading.jail import MS_BIND, MS_PRIVATE, MS_REC, _mount
_mount(None, "/", None, MS_REC | MS_PRIVATE)
for blocked, inner in {blocked!r}:
    fd = os.open(inner, os.O_PATH)
    _mount("tmpfs", blocked, "tmpfs", 0, "mode=755,size=1m")
    os.makedirs(inner)
    _mount(f"/proc/self/fd/{{fd}}", inner, None, MS_BIND | MS_REC)
os.execvp({argv!r}[0], {argv!r})
"""
