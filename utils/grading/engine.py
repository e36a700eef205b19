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
that student with a reason, and the batch goes on. Reading and checking the student's notebooks is the
unit's first phase (checking costs about 5 s per MB), so one huge submission costs only itself.

**Copies and broken notebooks.** An exercise handed in twice is graded from the newer copy, by the tie
rule of :mod:`utils.grading.copies`; the other is reported as not graded. A notebook that cannot be read is blamed
only for its own chapter's exercises when its name says the chapter; the others are ``missing``. Every
notebook that cannot be read (not valid JSON, over the size limit, not unpackable) is reported, never
dropped: a row names it, or it gets a line of its own (``results.csv``, the feedback file, Gradescope's
output). When it is the newest copy of a chapter, the chapter is graded from the older copy that could
be read, and its line names that copy (:func:`_unreadable`): the student sees which work was graded.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from utils.exercises.common import Status, one_line
from utils.exercises.forbidden import forbidden_in_source, unsafe_in_source
from utils.exercises.magics import python_of
from utils.grading import course as course_mod
from utils.grading import files, sandbox
from utils.grading.copies import base_name as _base_name
from utils.grading.copies import choose_copy, chosen_file
from utils.grading.intake import Unplaced
from utils.grading.unit import (
    Guard,
    PartRow,
    Row,
    Settings,
    Task,
    case_seed,
    run_unit,
    unit_rows,
    wall_limit,
    whole_exercise_parts,
)
from utils.i18n.messages import tr

TMP_PARENT: str | None = None
"""Where the batch's work folder goes (None: the system's temporary folder)."""
READ_CPU_SECONDS = 120.0
"""CPU seconds one student's notebooks may take to read and check (about 5 s per MB: 24 MB), checked
before each notebook; a notebook is at most :data:`~utils.grading.course.MAX_NOTEBOOK_BYTES`."""
READ_WALL_SECONDS = wall_limit(READ_CPU_SECONDS)
"""The watchdog's wall-clock backstop on reading one student's notebooks (a read that blocks)."""


# --------------------------------------------------------------------------------------------------
# Planning: which cells run, which rows are decided without running anything
# --------------------------------------------------------------------------------------------------


def plan_student(submission: course_mod.Submission, exercises: list[course_mod.CourseExercise],
                 chapters: frozenset[int] = frozenset(), chapter_of_id: Mapping[str, int] | None = None
                 ) -> tuple[dict[str, Row], list[Task], list[Unplaced]]:
    """Rows decided statically (missing, invalid, syntax, forbidden), the tasks to run (course order), and
    the copies of exercises that are not graded (see :func:`choose_copy`). ``chapters`` are the course's
    chapters: a notebook that cannot be read is blamed only for its own chapter's exercises, when its name
    says which chapter it is (``02_...ipynb``). ``chapter_of_id`` (every course exercise's chapter) lets a
    submission that holds only chapters not graded be told so (:func:`other_chapters`)."""
    decided: dict[str, Row] = {}
    tasks: list[Task] = []
    skipped: dict[tuple[str, str], list[str]] = {}  # (file, why) -> exercise ids not graded from it
    submitted = {ex.chapter for ex in exercises if submission.cells.get(ex.id)}
    blamed: set[str] = set()  # unreadable notebooks a row already names
    files, held = other_chapters(submission, {ex.chapter for ex in exercises}, chapter_of_id or {})
    graded_from: dict[str, str] = {}  # exercise id -> the file its graded copy is in
    for ex in exercises:
        def row(status: Status, feedback: str, _ex: course_mod.CourseExercise = ex) -> Row:
            return Row(submission.student, _ex.id, 0, _ex.points, status, one_line(feedback),
                       whole_exercise_parts(_ex.exercise, status, feedback))

        cells = submission.cells.get(ex.id, [])
        if not cells:
            broken = _broken_notebook(submission, ex, chapters, submitted)
            if broken:
                name, reason = broken
                blamed.add(name)
                decided[ex.id] = row(Status.INVALID, tr("{name} {reason}, so {id} could not be graded; submit the "
                                                   "notebook as saved by Jupyter", name=name, reason=reason,
                                                   id=ex.id))
            elif held and ex.chapter not in submitted:  # chapter 1's notebook handed in for chapter 2
                decided[ex.id] = row(Status.MISSING, tr(
                    "{files}: this is chapter {held}; this assignment grades chapter {chapter}, so {id} has no cell "
                    "here: hand in your chapter {chapter} notebook", files=", ".join(files),
                    held=course_mod.chapters_text(held), chapter=ex.chapter, id=ex.id))
            else:
                decided[ex.id] = row(Status.MISSING, tr("no cell for exercise {id} found; keep the exercise cell from "
                                                   "the chapter notebook (its metadata carries the id)", id=ex.id))
            continue
        source, others = choose_copy(cells, submission.modified, ex)
        graded_from[ex.id] = chosen_file(cells, submission.modified, ex)
        for file, why in others:
            skipped.setdefault((file, why), []).append(ex.id)
        source, _magic_lines = python_of(source)  # %%time, !pip ...: skipped, never run (utils.exercises.magics)
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
                                                      "reach code without naming it); write it without it, with the "
                                                      "modules an exercise cell may import, or ask your instructor to "
                                                      "review this",
                                                      name=unsafe))
            continue
        tasks.append(Task(ex, source))
    unplaced = [Unplaced(file, tr("not graded for {ids}: {why}", ids=", ".join(ids), why=why), submission.student)
                for (file, why), ids in skipped.items()]
    if held and submitted:  # another chapter's notebook beside this assignment's: named, never dropped silently (W27)
        graded_files = {file for ex in exercises for file, _source in submission.cells.get(ex.id, [])}
        unplaced += [Unplaced(file, tr("chapter {held}, which this assignment does not grade: it grades chapter "
                                       "{graded}", held=course_mod.chapters_text(held),
                                       graded=course_mod.chapters_text({ex.chapter for ex in exercises} - {None})),
                              submission.student) for file in files if file not in graded_files]
    return decided, tasks, [*unplaced, *_unreadable(submission, exercises, graded_from, blamed)]


def _unreadable(submission: course_mod.Submission, exercises: list[course_mod.CourseExercise],
                graded_from: Mapping[str, str], blamed: set[str]) -> list[Unplaced]:
    """An entry for each notebook that could not be read (not valid JSON, too large, not unpackable),
    so that none is dropped silently: every one a row does not already name, and always one that is
    newer than the copy its chapter's exercises were graded from. That chapter is graded from the older
    copy that could be read, and the entry says so: the student sees which copy gave the grade and can
    hand in the newest again."""
    entries = []
    for name, reason in submission.invalid:
        chapter = course_mod.chapter_of(_base_name(name))
        when = submission.modified.get(name, 0.0)
        older: dict[str, list[str]] = {}  # older copy graded -> the exercises graded from it
        for ex in exercises:
            chosen = graded_from.get(ex.id)
            newer = chosen is not None and submission.modified.get(chosen, 0.0) < when
            if newer and chapter is not None and ex.chapter == chapter:
                older.setdefault(chosen, []).append(ex.id)
        if older:
            graded = "; ".join(f"{', '.join(ids)} ({file})" for file, ids in older.items())
            why = tr("this is your newest copy of chapter {chapter}, but it {reason}, so nothing in it was "
                     "graded; graded from an older copy instead: {graded}; hand it in again as saved by Jupyter "
                     "if it holds newer work", chapter=chapter, reason=reason, graded=graded)
        elif name in blamed:
            continue
        else:
            why = tr("this notebook {reason}, so nothing in it was graded; hand it in again as saved by Jupyter",
                     reason=reason)
        entries.append(Unplaced(name, why, submission.student))
    return entries


def other_chapters(submission: course_mod.Submission, graded: set[int | None], chapter_of_id: Mapping[str, int]
                   ) -> tuple[list[str], list[int]]:
    """The files holding exercise cells of chapters not ``graded``, and those chapters (both sorted): what a
    student handed in instead, when a chapter 1 notebook reaches the chapter 2 assignment. ``chapter_of_id``
    is each course exercise's chapter (:attr:`Plan.chapter_of_id`)."""
    files, held = set(), set()
    for exercise_id, cells in submission.cells.items():
        chapter = chapter_of_id.get(exercise_id)
        if cells and chapter is not None and chapter not in graded:
            held.add(chapter)
            files.update(file for file, _source in cells)
    return sorted(files), sorted(held)


def _broken_notebook(submission: course_mod.Submission, ex: course_mod.CourseExercise, chapters: frozenset[int],
                     submitted: set[int | None]) -> tuple[str, str] | None:
    """The unreadable notebook to blame for ``ex`` having no cell, or None (then it is missing): one whose
    name says it is ``ex``'s chapter, or one whose name says no chapter when no notebook that could be
    read holds any of that chapter's exercises."""
    unknown = None
    for name, reason in submission.invalid:
        chapter = course_mod.chapter_of(_base_name(name))
        if chapter == ex.chapter and chapter in chapters:
            return name, reason
        if chapter not in chapters and unknown is None:
            unknown = (name, reason)
    return unknown if ex.chapter not in submitted else None


# --------------------------------------------------------------------------------------------------
# The batch
# --------------------------------------------------------------------------------------------------


@dataclass
class Plan:
    """Who is graded on what: the students (each a :class:`~utils.grading.course.Submission` read only
    when its unit runs), the exercises graded, and every chapter of the course."""

    students: list[str]
    exercises: list[course_mod.CourseExercise]
    submissions: list[course_mod.Submission]
    chapters: frozenset[int] = frozenset()
    chapter_of_id: dict[str, int] = field(default_factory=dict)  # every course exercise's chapter


@dataclass
class Results:
    """What :func:`run_plan` found: a row per student × exercise in (student, course) order, the entries
    that reading left unplaced or that were not graded (second copies), notes for the instructor
    (``"student: file: note"``), and how many students had cells to run."""

    rows: list[Row]
    unplaced: list[Unplaced] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    ran: int = 0


@dataclass
class _Unit:
    submission: course_mod.Submission
    decided: dict[str, Row] = field(default_factory=dict)
    tasks: list[Task] | None = None  # None until the submission is read
    skipped: list[Unplaced] = field(default_factory=list)


def plan(submissions_dir: Any, course_root: Path | None, registry: Mapping[str, Any],
         chapters: frozenset[int] | None = None) -> Plan:
    """Who runs what: ``chapters`` (None: all) selects the course's exercises that are graded. Nothing
    is read here: each submission is read in its own unit (:func:`run_plan`)."""
    everything = course_mod.load_course(course_root, registry)
    exercises = course_mod.select_chapters(everything, chapters)
    submissions = [found if isinstance(found, course_mod.Submission) else course_mod.read_submission(found)
                   for found in course_mod.find_students(submissions_dir)]
    return Plan([s.student for s in submissions], exercises, submissions,
                frozenset(e.chapter for e in everything if e.chapter is not None),
                course_mod.exercise_chapters(course_root, everything))


def run_plan(the_plan: Plan, settings: Settings, jobs: int,
             progress: Callable[[], None] | None = None) -> Results:
    """Read, plan and run every student's unit, ``jobs`` at a time; a row per student × exercise.

    Each unit runs in a daemon thread under a :class:`Guard`: first reading and checking the student's
    notebooks (at most :data:`READ_CPU_SECONDS` of CPU time, with a wall-clock backstop of
    :data:`READ_WALL_SECONDS`), then their cells. Whatever happens in it (an
    exception, a ``MemoryError``, a hang past its phase's deadline) becomes rows for that student with a
    reason, and the batch goes on. A slot whose unit was abandoned is retired: its uid is never given to
    another.
    """
    iso = sandbox.isolation()
    tmp_root = Path(tempfile.mkdtemp(prefix="grader-", dir=TMP_PARENT))
    os.chmod(tmp_root, 0o711)  # sandbox uids may enter their own unit folder, not list the others
    finished: queue.Queue[tuple[int, list[Row]]] = queue.Queue()
    units = [_Unit(submission) for submission in the_plan.submissions]
    pending = list(range(len(units)))[::-1]
    free = list(range(jobs))
    next_slot = jobs
    running: dict[int, tuple[Guard, int]] = {}
    results: dict[int, list[Row]] = {}
    try:
        while pending or running:
            while pending and free:
                number = pending.pop()
                guard, slot = Guard(), free.pop(0)
                running[number] = (guard, slot)
                threading.Thread(target=_unit_thread, args=(units[number], the_plan, settings, tmp_root, slot, iso,
                                                            guard, finished, number),
                                 daemon=True, name=f"grade-{number}").start()
            try:
                number, rows = finished.get(timeout=0.5)
            except queue.Empty:
                now = time.monotonic()
                for number, (guard, _slot) in list(running.items()):
                    if guard.overdue(now):
                        guard.abandon()
                        results[number] = _given_up(units[number], the_plan.exercises, dict(guard.verdicts), (
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
    by_key = {(row.student, row.exercise): row for rows in results.values() for row in rows}
    found = Results([by_key[(student, ex.id)] for student in the_plan.students for ex in the_plan.exercises])
    for unit in units:
        found.unplaced += [*list(unit.submission.unplaced), *unit.skipped]
        found.notes += [f"{unit.submission.student}: {note}" for note in list(unit.submission.notes)]
        found.ran += bool(unit.tasks)
    return found


def _given_up(unit: _Unit, exercises: list[course_mod.CourseExercise], verdicts: Mapping, reason: str) -> list[Row]:
    """Rows for a unit that did not finish: what it decided and judged, ``reason`` for the rest. Before its
    notebooks were read, every exercise is ``invalid``: nothing of it could be graded."""
    student = unit.submission.student
    if unit.tasks is None:
        return [Row(student, ex.id, 0, ex.points, Status.INVALID, one_line(reason),
                    whole_exercise_parts(ex.exercise, Status.INVALID, reason)) for ex in exercises]
    return [*unit.decided.values(), *unit_rows(student, unit.tasks, verdicts, reason)]


def _unit_thread(unit: _Unit, the_plan: Plan, settings: Settings, tmp_root: Path, slot: int,
                 iso: sandbox.Isolation, guard: Guard, finished: queue.Queue, number: int) -> None:
    student = unit.submission.student
    try:
        guard.enter("reading and checking its notebooks", READ_WALL_SECONDS)
        started = time.thread_time()  # CPU time: a busy machine does not make reading look slow
        read = unit.submission.load(stop=lambda: guard.abandoned or time.thread_time() - started > READ_CPU_SECONDS)
        if guard.abandoned:
            return  # the watchdog has written this student's rows
        if not read:
            rows = _given_up(unit, the_plan.exercises, {}, tr(
                "reading and checking this submission's notebooks took more than {seconds:.0f} s of CPU time "
                "(checking costs about 5 s per MB), so it was not graded; the rest of the class was graded; ask "
                "your instructor to look at it", seconds=READ_CPU_SECONDS))
        else:
            decided, tasks, unit.skipped = plan_student(unit.submission, the_plan.exercises, the_plan.chapters,
                                                        the_plan.chapter_of_id)
            unit.decided, unit.tasks = decided, tasks
            ran = run_unit(student, tasks, settings, tmp_root, slot, iso, guard) if tasks else []
            rows = [*decided.values(), *ran]
    except BaseException as exc:  # noqa: BLE001  (one student is one unit of failure)
        try:
            reason = (f"the grader failed while grading this student ({type(exc).__name__}: "
                      f"{one_line(exc, 120)}); the rest of the class was graded")
        except BaseException:  # noqa: BLE001  (e.g. no memory left to format the message)
            reason = "the grader failed while grading this student; the rest of the class was graded"
        rows = _given_up(unit, the_plan.exercises, dict(guard.verdicts), reason)
    finished.put((number, rows))


__all__ = ["READ_CPU_SECONDS", "PartRow", "Plan", "Results", "Row", "Settings", "Task", "case_seed", "choose_copy",
           "other_chapters", "plan", "plan_student", "run_plan"]
