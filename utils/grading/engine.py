"""Grade a class: find the exercise cells, run them in sandboxed workers, judge in this process.

**Design for speed.** One sandboxed worker per student: it imports torch once, then, for each of that
student's exercise cells (every notebook, in course order), forks a fresh process that runs that cell
alone, under its own CPU-time limit and a wall-clock backstop watched from here
(:mod:`utils.grading.unit`, *Timeouts*). A cell's source reaches the worker only when it is due, and
what a cell does to its process (patched modules, threads, open files) dies with it. When an exercise
kills its worker (a timeout, a crash), a fresh worker starts at the next exercise, so one bad exercise
costs only itself. After each exercise the sandbox is stopped and every process in it but the worker is
killed before this process reads its files. A fork costs milliseconds; the torch import (about 1.5 s)
is paid once per student.

**One student is one unit of failure.** Units run ``--jobs`` at a time, each in a thread watched by
:func:`run_plan`'s watchdog: an exception, a ``MemoryError`` or a hang in one unit becomes rows for
that student with a reason, and the batch goes on.

**Trust.** The worker writes only raw outputs; :func:`utils.exercises.judging.judge` compares them with the
reference in this process (which never imports :mod:`utils.exercises.runner`), and
:func:`utils.exercises.credit.credit_for` turns the verdicts into points per named part. The cases are the
public ones (what the check cell runs) and hidden ones drawn here from a seed derived from ``--seed``,
the exercise and the student (so no two students share hidden cases and answers hard-coded for the
public cases cannot pass); only their inputs reach the sandbox.
"""

from __future__ import annotations

import os
import queue
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from utils.exercises.common import Status, one_line
from utils.exercises.forbidden import forbidden_in_source, unsafe_in_source
from utils.grading import course as course_mod
from utils.grading import files, sandbox
from utils.grading.unit import Guard, PartRow, Row, Settings, Task, case_seed, run_unit, unit_rows, whole_exercise_parts
from utils.i18n.messages import tr

TMP_PARENT: str | None = None
"""Where the batch's work folder goes (None: the system's temporary folder)."""


# --------------------------------------------------------------------------------------------------
# Planning: which cells run, which rows are decided without running anything
# --------------------------------------------------------------------------------------------------


def plan_student(submission: course_mod.Submission, exercises: list[course_mod.CourseExercise]
                 ) -> tuple[dict[str, Row], dict[str, list[Task]]]:
    """Rows decided statically (missing, invalid, syntax, forbidden) and units to run (file -> tasks)."""
    decided: dict[str, Row] = {}
    units: dict[str, list[Task]] = {}
    for ex in exercises:
        def row(status: Status, feedback: str, _ex: course_mod.CourseExercise = ex) -> Row:
            return Row(submission.student, _ex.id, 0, _ex.points, status, one_line(feedback),
                       whole_exercise_parts(_ex.exercise, status, feedback))

        cells = submission.cells.get(ex.id, [])
        if len(cells) > 1:
            files = ", ".join(sorted({f for f, _ in cells}))
            decided[ex.id] = row(Status.MISSING, tr("found {count} cells for exercise {id} (in {files}); keep "
                                               "exactly one", count=len(cells), id=ex.id, files=files))
            continue
        if not cells:
            if submission.invalid:
                name, reason = submission.invalid[0]
                decided[ex.id] = row(Status.INVALID, tr("{name} {reason}, so {id} could not be graded; submit the "
                                                   "notebook as saved by Jupyter", name=name, reason=reason,
                                                   id=ex.id))
            else:
                decided[ex.id] = row(Status.MISSING, tr("no cell for exercise {id} found; keep the exercise cell from "
                                                   "the chapter notebook (its metadata carries the id)", id=ex.id))
            continue
        file, source = cells[0]
        problem = course_mod.syntax_problem(source)
        if problem:
            decided[ex.id] = row(Status.ERROR, tr("your cell for {id} cannot run: {problem}", id=ex.id,
                                                  problem=problem))
            continue
        name = forbidden_in_source(source, list(ex.exercise.forbidden))
        if name:
            decided[ex.id] = row(Status.FORBIDDEN, tr("your code uses {name}; this exercise asks you to implement it "
                                                 "yourself", name=name))
            continue
        unsafe = unsafe_in_source(source)
        if unsafe:
            decided[ex.id] = row(Status.FORBIDDEN, tr("your code uses {name}, which no exercise cell may use (it can "
                                                      "reach code without naming it); write it with math, torch, nn "
                                                      "and F only, or ask your instructor to review this",
                                                      name=unsafe))
            continue
        units.setdefault(file, []).append(Task(ex, source))
    return decided, units


# --------------------------------------------------------------------------------------------------
# The batch
# --------------------------------------------------------------------------------------------------


@dataclass
class Plan:
    students: list[str]
    exercises: list[course_mod.CourseExercise]
    decided: dict[tuple[str, str], Row]
    units: list[tuple[str, str, list[Task]]]  # (student, files, tasks): one unit per student


def plan(submissions_dir: Path, course_root: Path, registry: Mapping[str, Any],
         chapters: frozenset[int] | None = None) -> Plan:
    """Who runs what: ``chapters`` (None: all) selects the course's exercises that are graded."""
    exercises = course_mod.select_chapters(course_mod.load_course(course_root, registry), chapters)
    students = course_mod.find_students(submissions_dir)
    decided: dict[tuple[str, str], Row] = {}
    units = []
    for folder in students:
        submission = course_mod.read_submission(folder)
        rows, student_units = plan_student(submission, exercises)
        decided.update({(folder.name, exercise_id): row for exercise_id, row in rows.items()})
        if student_units:  # one worker per student: one torch import, whatever the number of notebooks
            files = sorted(student_units)
            units.append((folder.name, ", ".join(files), [t for f in files for t in student_units[f]]))
    return Plan([f.name for f in students], exercises, decided, units)


def run_plan(the_plan: Plan, settings: Settings, jobs: int,
             progress: Callable[[], None] | None = None) -> list[Row]:
    """Run every unit, ``jobs`` at a time, and return all rows in (student, course) order.

    Each unit runs in a daemon thread under a :class:`Guard`. Whatever happens in it (an exception, a
    ``MemoryError``, a hang past its phase's deadline) becomes rows for that student with a reason, and
    the batch goes on. A slot whose unit was abandoned is retired: its uid is never given to another.
    """
    iso = sandbox.isolation()
    tmp_root = Path(tempfile.mkdtemp(prefix="grader-", dir=TMP_PARENT))
    os.chmod(tmp_root, 0o711)  # sandbox uids may enter their own unit folder, not list the others
    finished: queue.Queue[tuple[int, list[Row]]] = queue.Queue()
    pending = list(enumerate(the_plan.units))[::-1]
    free = list(range(jobs))
    next_slot = jobs
    running: dict[int, tuple[Guard, int]] = {}
    results: dict[int, list[Row]] = {}
    try:
        while pending or running:
            while pending and free:
                number, unit = pending.pop()
                guard, slot = Guard(), free.pop(0)
                running[number] = (guard, slot)
                threading.Thread(target=_unit_thread, args=(number, unit, settings, tmp_root, slot, iso, guard,
                                                            finished), daemon=True, name=f"grade-{number}").start()
            try:
                number, rows = finished.get(timeout=0.5)
            except queue.Empty:
                now = time.monotonic()
                for number, (guard, _slot) in list(running.items()):
                    if guard.overdue(now):
                        guard.abandon()
                        student, _files, tasks = the_plan.units[number]
                        results[number] = unit_rows(student, tasks, dict(guard.verdicts), (
                            f"the grader's watchdog gave up on this student while {guard.phase}; the rest of "
                            f"the class was graded; ask your instructor to look at this notebook"))
                        del running[number]
                        free.append(next_slot)
                        next_slot += 1
                        if progress:
                            progress()
                continue
            if number in running:
                free.append(running.pop(number)[1])
                results[number] = rows
                if progress:
                    progress()
    finally:
        for guard, _slot in running.values():
            guard.abandon()
        try:
            files.remove_tree(tmp_root)
        except Exception as exc:  # noqa: BLE001  (the grades matter more than the cleanup)
            print(f"grader: could not remove {tmp_root}: {type(exc).__name__}", file=sys.stderr)
    by_key = dict(the_plan.decided)
    for rows in results.values():
        by_key.update({(row.student, row.exercise): row for row in rows})
    return [by_key[(student, ex.id)] for student in the_plan.students for ex in the_plan.exercises]


def _unit_thread(number: int, unit: tuple[str, str, list[Task]], settings: Settings, tmp_root: Path, slot: int,
                 iso: sandbox.Isolation, guard: Guard, finished: queue.Queue) -> None:
    student, _files, tasks = unit
    try:
        rows = run_unit(student, tasks, settings, tmp_root, slot, iso, guard)
    except BaseException as exc:  # noqa: BLE001  (one student is one unit of failure)
        try:
            reason = (f"the grader failed while grading this student ({type(exc).__name__}: "
                      f"{one_line(exc, 120)}); the rest of the class was graded")
        except BaseException:  # noqa: BLE001  (e.g. no memory left to format the message)
            reason = "the grader failed while grading this student; the rest of the class was graded"
        rows = unit_rows(student, tasks, dict(guard.verdicts), reason)
    finished.put((number, rows))


__all__ = ["PartRow", "Plan", "Row", "Settings", "Task", "case_seed", "plan", "plan_student", "run_plan"]
