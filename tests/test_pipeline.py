"""Pipeline tests over every solution notebook and every exercise, so each new chapter is covered
without touching this file.

- ``chapters/`` equals a fresh build, and the solutions' stamped regions are current;
- no solution line leaks into ``chapters/``;
- each solution, put back on its own, makes its check print ``✅``; the stub prints
  ``❌ not implemented yet``; every ``Mistake`` prints ``❌`` with its diagnosis;
- every exercise of ``utils.exercises`` is in exactly one solution notebook, with the same points;
- every chapter has a check cell after each exercise, an explorer and a quiz of three or more
  questions whose right answers grade True and whose wrong answers grade False.

Parameter lists are built from the files; an empty list shows up as a skip, never as a silent pass.
"""

from __future__ import annotations

import ast
import functools
import importlib
import pkgutil
import re
from pathlib import Path

import nbformat
import pytest

import utils.widgets
from utils import build
from utils.exercises import all_exercises
from utils.exercises.check_cell import run_public_check
from utils.exercises.common import FAIL, PASS
from utils.exercises.runner import load_function
from utils.widgets.quiz import Choice, Numeric, Quiz

REPO = Path(__file__).resolve().parent.parent
SOLUTIONS = sorted((REPO / "solutions").glob(build.NOTEBOOK_GLOB))
REGISTRY = all_exercises()


@functools.cache
def solution(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def chapter(path: Path) -> nbformat.NotebookNode:
    chapter_file = REPO / build.chapter_path(path)
    if not chapter_file.is_file():
        pytest.fail(f"{chapter_file.relative_to(REPO)} is missing: run `python -m utils.build` (make chapters)")
    return nbformat.read(chapter_file, as_version=4)


def chapter_number(path: Path) -> int:
    return int(path.name.split("_", 1)[0])


def exercise_cells(nb: nbformat.NotebookNode) -> list[tuple[int, str]]:
    """(cell index, exercise id) of every exercise cell."""
    found = []
    for index, cell in enumerate(nb.cells):
        course = cell.get("metadata", {}).get("course", {})
        if isinstance(course, dict) and "exercise" in course:
            found.append((index, course["exercise"]))
    return found


EXERCISE_CELLS = [(path, index, eid) for path in SOLUTIONS for index, eid in exercise_cells(solution(path))]
MISTAKES = [(e, m) for e in REGISTRY.values() for m in e.mistakes]


@functools.cache
def fresh_build() -> dict[Path, str]:
    return build.render(REPO)


def nb_id(path: Path) -> str:
    return path.stem


def cell_id(param) -> str:
    return param if isinstance(param, str) else ""


# --------------------------------------------------------------------------------------------------
# chapters/ is generated
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", SOLUTIONS, ids=nb_id)
def test_chapter_equals_a_fresh_build(path):
    try:
        expected = fresh_build()
    except build.BuildError as exc:
        pytest.fail(f"the build fails: {exc}")
    assert path not in expected, (
        f"{path.relative_to(REPO)}: badges or setup cell out of date; run `python -m utils.build`"
    )
    chapter_file = REPO / build.chapter_path(path)
    assert chapter_file.is_file(), f"{chapter_file.relative_to(REPO)} missing; run `python -m utils.build`"
    assert chapter_file.read_text(encoding="utf-8") == expected[chapter_file], (
        f"{chapter_file.relative_to(REPO)} differs from a fresh build; "
        "run `python -m utils.build`, never edit chapters/"
    )


def test_no_chapter_without_a_solution():
    chapters = {p.name for p in (REPO / "chapters").glob("*.ipynb")}
    assert chapters <= {p.name for p in SOLUTIONS}, (
        "chapters/ holds notebooks with no solution; run `python -m utils.build`"
    )


def _is_trivial(line: str) -> bool:
    """Lines too generic to count as a leak (``return out``, ``)``, ``else:``)."""
    return len("".join(line.split())) < 10


@pytest.mark.parametrize("path", SOLUTIONS, ids=nb_id)
def test_no_solution_line_leaks(path):
    student = chapter(path)
    student_lines = {line.strip() for cell in student.cells for line in cell.source.splitlines()}
    text = nbformat.writes(student)
    assert build.BEGIN not in text and build.END not in text
    leaks = []
    for index, _ in exercise_cells(solution(path)):
        inside = False
        for line in solution(path).cells[index].source.splitlines():
            if line.strip() == build.BEGIN:
                inside = True
            elif line.strip() == build.END:
                inside = False
            elif inside and not _is_trivial(line) and line.strip() in student_lines:
                leaks.append(f"cell {index}: {line.strip()}")
    assert not leaks, "solution lines appear in the student notebook:\n" + "\n".join(leaks)


# --------------------------------------------------------------------------------------------------
# Checks: the solution passes, the stub and every mistake fail with the right message
# --------------------------------------------------------------------------------------------------


def _check_line(exercise, fn, capsys) -> str:
    capsys.readouterr()
    verdict = run_public_check(exercise, fn)
    lines = capsys.readouterr().out.splitlines()
    assert lines == [verdict.line], f"a check prints exactly one line, got {lines}"
    return lines[0]


def _exercise(exercise_id: str):
    if exercise_id not in REGISTRY:
        pytest.fail(f"exercise {exercise_id!r} is not in utils.exercises")
    return REGISTRY[exercise_id]


@pytest.mark.parametrize(("path", "index", "exercise_id"), EXERCISE_CELLS, ids=lambda p: cell_id(p))
def test_solution_passes_its_check(path, index, exercise_id, capsys):
    exercise = _exercise(exercise_id)
    fn = load_function(solution(path).cells[index].source, exercise.func_name)
    line = _check_line(exercise, fn, capsys)
    assert line.startswith(PASS), line


@pytest.mark.parametrize(("path", "index", "exercise_id"), EXERCISE_CELLS, ids=lambda p: cell_id(p))
def test_stub_is_not_implemented_yet(path, index, exercise_id, capsys):
    exercise = _exercise(exercise_id)
    student = chapter(path)
    assert student.cells[index].metadata["course"]["exercise"] == exercise_id
    fn = load_function(student.cells[index].source, exercise.func_name)
    line = _check_line(exercise, fn, capsys)
    assert line.startswith(f"{FAIL} not implemented yet"), line


@pytest.mark.slow  # ~450 check-cell runs with probes: `make unit`; quick keeps tests/test_mistakes_distinct.py
@pytest.mark.parametrize(("exercise", "mistake"), MISTAKES, ids=[f"{e.id}-{m.name}" for e, m in MISTAKES])
def test_mistake_gets_its_diagnosis(exercise, mistake, capsys):
    line = _check_line(exercise, mistake.fn, capsys)
    assert line.startswith(FAIL) and mistake.diagnosis in line, f"{mistake.name}: {line}"


@pytest.mark.parametrize("exercise", list(REGISTRY.values()), ids=lambda e: e.id)
def test_exercise_definition(exercise):
    assert len(exercise.mistakes) >= 2, f"{exercise.id}: needs at least two Mistakes"
    assert len({m.name for m in exercise.mistakes}) == len(exercise.mistakes)
    assert exercise.cases(0), f"{exercise.id}: make_cases returned no cases"
    homes = [(p, i) for p, i, eid in EXERCISE_CELLS if eid == exercise.id]
    assert len(homes) == 1, (
        f"{exercise.id} must appear in exactly one solution notebook, found {[(p.name, i) for p, i in homes]}"
    )
    path, index = homes[0]
    points = solution(path).cells[index].metadata["course"].get("points")
    assert points == exercise.points, f"{exercise.id}: notebook says {points} points, utils.exercises {exercise.points}"


# --------------------------------------------------------------------------------------------------
# Chapter shape: check cells, explorer, quiz
# --------------------------------------------------------------------------------------------------

QUIZ_FACTORY = re.compile(r"ch\d+_quiz")
WIDGET_NAMES = {  # what the widget modules export (their __all__)
    name: getattr(module, name)
    for module in (importlib.import_module(info.name)
                   for info in pkgutil.iter_modules(utils.widgets.__path__, prefix="utils.widgets."))
    for name in module.__all__
}
EXPLORERS = {
    name for name, value in WIDGET_NAMES.items()
    if callable(value) and not QUIZ_FACTORY.fullmatch(name) and name not in {"Quiz", "Choice", "Numeric"}
}


def _calls(source: str) -> set[str]:
    """Names of the functions a code cell calls (IPython magics and shell lines skipped)."""
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                names.add(func.id)
            elif isinstance(func, ast.Attribute):
                names.add(func.attr)
    return names


@pytest.mark.parametrize("path", SOLUTIONS, ids=nb_id)
def test_check_cell_follows_each_exercise(path):
    nb = solution(path)
    for index, exercise_id in exercise_cells(nb):
        name = exercise_id.split(".", 1)[1]
        following = nb.cells[index + 1] if index + 1 < len(nb.cells) else None
        assert following is not None and following.cell_type == "code", f"cell {index}: no check cell after it"
        assert following.source.strip() == f"check.{name}({name})", (
            f"cell {index + 1}: the check cell after {exercise_id} must be `check.{name}({name})`"
        )
        stored = "".join(o.get("text", "") for o in following.get("outputs", []) if o.output_type == "stream")
        assert stored.startswith(PASS), f"cell {index + 1}: its stored output must be the ✅ line, got {stored!r}"


@pytest.mark.parametrize("path", SOLUTIONS, ids=nb_id)
def test_chapter_has_an_explorer(path):
    explorers = [
        index for index, cell in enumerate(solution(path).cells)
        if cell.cell_type == "code" and cell.source.lstrip().startswith("# NBVAL_IGNORE_OUTPUT")
        and _calls(cell.source) & EXPLORERS
    ]
    assert explorers, (
        "no explorer: a code cell starting with `# NBVAL_IGNORE_OUTPUT` that calls a utils.widgets explorer"
    )


@pytest.mark.parametrize("path", SOLUTIONS, ids=nb_id)
def test_chapter_ends_with_its_quiz(path):
    number = chapter_number(path)
    factory = f"ch{number}_quiz"
    cells = [i for i, c in enumerate(solution(path).cells) if c.cell_type == "code" and factory in _calls(c.source)]
    assert cells, f"no quiz: a code cell calling {factory}()"
    assert factory in WIDGET_NAMES, f"no utils.widgets module defines {factory}"
    quiz = WIDGET_NAMES[factory]()
    assert isinstance(quiz, Quiz)
    assert len(quiz.questions) >= 3, f"{factory}() has {len(quiz.questions)} questions; at least 3"
    for number, question in enumerate(quiz.questions, 1):
        if isinstance(question, Choice):
            for option in range(len(question.options)):
                correct, feedback = question.grade(option)
                assert correct is (option == question.answer), f"question {number}, option {option}"
                assert feedback, f"question {number}, option {option}: no feedback"
        else:
            assert isinstance(question, Numeric)
            assert question.grade(question.answer)[0] is True, f"question {number}: the answer grades False"
            assert question.grade(str(question.answer))[0] is True
            off = max(1.0, 10 * question.tolerance, abs(question.answer))
            assert question.grade(question.answer + off)[0] is False, f"question {number}: a wrong number grades True"
            assert question.grade("not a number")[0] is False
