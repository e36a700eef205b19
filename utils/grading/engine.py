"""Grade a class: find the exercise cells, run them in sandboxed workers, judge in this process.

**Design for speed.** One sandboxed worker per student: it imports torch once, then runs all of that
student's exercise cells (every notebook, in course order) one after the other, each under its own
wall-clock timeout watched from here. When an exercise kills its worker (timeout, ``os._exit``, a crash), the worker is
restarted from the next exercise, so one bad exercise costs only itself. Between exercises this
process kills every other process in the worker's PID namespace, so no learner process outlives its
exercise. Units run ``--jobs`` at a time (default: the number of cores), each worker on one thread.
We chose this over a pre-imported template that forks per exercise: it is simpler (no fork of a
threaded process, no shared memory between students) and costs one torch import (about 1.5 s)
per student, not per notebook or exercise. Students run ``--jobs`` at a time.

**Trust.** The worker writes only raw outputs; :func:`utils.exercises.judging.judge` compares them with the
reference in this process (which never imports :mod:`utils.exercises.runner`), on inputs drawn here from a
seed derived from ``--seed``, the exercise and the student (so no two students share cases and hard-coded
answers cannot pass).
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from utils.exercises.common import Status, one_line
from utils.exercises.forbidden import forbidden_in_source
from utils.exercises.judging import judge
from utils.grading import course as course_mod
from utils.grading import sandbox, serialize

MEMORY_MARKERS = ("can't allocate memory", "not enough memory", "bad_alloc", "out of memory")


@dataclass(frozen=True)
class Row:
    student: str
    exercise: str
    points: int
    max_points: int
    status: Status
    feedback: str


@dataclass(frozen=True)
class Settings:
    timeout: float
    seed: int
    memory_mb: int = 2048
    startup_timeout: float = 180.0


@dataclass
class Task:
    """One exercise to run in a unit."""

    course: course_mod.CourseExercise
    source: str


def case_seed(seed: int, exercise_id: str, student: str) -> int:
    digest = hashlib.sha256(f"grade:{seed}:{exercise_id}:{student}".encode()).digest()
    return int.from_bytes(digest[:6], "big")


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
            return Row(submission.student, _ex.id, 0, _ex.points, status, one_line(feedback))

        cells = submission.cells.get(ex.id, [])
        if len(cells) > 1:
            files = ", ".join(sorted({f for f, _ in cells}))
            decided[ex.id] = row(Status.MISSING, f"found {len(cells)} cells for exercise {ex.id} (in {files}); "
                                            f"keep exactly one")
            continue
        if not cells:
            if submission.invalid:
                name, reason = submission.invalid[0]
                decided[ex.id] = row(Status.INVALID, f"{name} {reason}, so {ex.id} could not be graded; "
                                                f"submit the notebook as saved by Jupyter")
            else:
                decided[ex.id] = row(Status.MISSING, f"no cell for exercise {ex.id} found; keep the exercise "
                                                f"cell from the chapter notebook (its metadata carries the id)")
            continue
        file, source = cells[0]
        problem = course_mod.syntax_problem(source)
        if problem:
            decided[ex.id] = row(Status.ERROR, f"your cell for {ex.id} cannot run: {problem}")
            continue
        name = forbidden_in_source(source, list(ex.exercise.forbidden))
        if name:
            decided[ex.id] = row(Status.FORBIDDEN, f"your code uses {name}; this exercise asks you to "
                                              f"implement it yourself")
            continue
        units.setdefault(file, []).append(Task(ex, source))
    return decided, units


# --------------------------------------------------------------------------------------------------
# Running one unit (all of a student's exercise cells) in sandboxed workers
# --------------------------------------------------------------------------------------------------


def _limits(settings: Settings, count: int) -> dict[str, int]:
    return {
        "memory": settings.memory_mb * 2**20,
        "cpu": int(settings.timeout * count + 10),
        "fsize": 64 * 2**20,
        "nproc": 64,
    }


def run_unit(student: str, tasks: list[Task], settings: Settings, tmp_root: Path, slot: int,
             iso: sandbox.Isolation) -> list[Row]:
    jobdir = Path(tempfile.mkdtemp(prefix="unit-", dir=tmp_root))
    try:
        return _run_unit(student, tasks, settings, jobdir, slot, iso)
    finally:
        shutil.rmtree(jobdir, ignore_errors=True)


def _run_unit(student: str, tasks: list[Task], settings: Settings, jobdir: Path, slot: int,
              iso: sandbox.Isolation) -> list[Row]:
    all_cases = []
    job = {"exercises": [], "limits": _limits(settings, len(tasks))}
    for index, task in enumerate(tasks):
        cases = task.course.exercise.cases(case_seed(settings.seed, task.course.id, student))
        all_cases.append(cases)
        serialize.dump(cases, jobdir / "in" / str(index))
        job["exercises"].append({"id": task.course.id, "func_name": task.course.exercise.func_name,
                                 "source": task.source, "forbidden": list(task.course.exercise.forbidden)})
    (jobdir / "job.json").write_text(json.dumps(job), encoding="utf-8")
    workdir = jobdir / "work"
    workdir.mkdir()
    if iso.uid:
        uid = sandbox.UID_BASE + slot
        for path in (jobdir, workdir):
            os.chown(path, uid, uid)
        os.chmod(jobdir, 0o700)

    verdicts: dict[int, tuple[Status, str]] = {}
    start = 0
    while start < len(tasks):
        worker = sandbox.Worker.start(jobdir, workdir, start, slot, iso)
        index = start
        try:
            if worker.next_line(time.monotonic() + settings.startup_timeout) != "ready":
                worker.kill()
                tail = one_line(worker.output.decode("utf-8", "replace")[-300:])
                for later in range(start, len(tasks)):
                    verdicts[later] = (Status.ERROR, f"the grader could not start its sandbox: {tail}")
                index = len(tasks)
            while index < len(tasks):
                line = worker.next_line(time.monotonic() + settings.timeout + 5)
                if line == f"start {index}":
                    line = worker.next_line(time.monotonic() + settings.timeout)
                if line is None:
                    verdicts[index] = (Status.TIMEOUT, f"your code ran longer than {settings.timeout:g} s; "
                                                  f"look for an endless loop or needless work")
                    break
                if line != f"done {index}":
                    worker.kill()
                    verdicts[index] = _death(worker)
                    break
                sandbox.sweep(worker)
                verdicts[index] = _collect(tasks[index], all_cases[index], jobdir / "out" / str(index))
                index += 1
        finally:
            worker.kill()
        start = index + 1
    rows = []
    for index, task in enumerate(tasks):
        status, feedback = verdicts.get(index, (Status.ERROR, "the grader lost track of this exercise"))
        points = task.course.points if status == Status.PASSED else 0
        rows.append(Row(student, task.course.id, points, task.course.points, status, one_line(feedback)))
    return rows


def _death(worker: sandbox.Worker) -> tuple[Status, str]:
    how = worker.exit_description()
    if "SIGXCPU" in how:
        return (Status.TIMEOUT, "your code used too much CPU time; look for an endless loop")
    if "SIGKILL" in how or "SIGSEGV" in how or "SIGABRT" in how or "SIGBUS" in how:
        return (Status.MEMORY, f"the process running your code crashed ({how}), most likely out of memory; "
                          f"use smaller intermediate tensors")
    return (Status.ERROR, f"your code ended the process that runs it ({how}); do not call os._exit, sys.exit "
                     f"or kill processes in an exercise")


def _is_memory(kind: str, message: str) -> bool:
    return kind == "MemoryError" or any(marker in message for marker in MEMORY_MARKERS)


def _collect(task: Task, cases: list[dict[str, Any]], out: Path) -> tuple[Status, str]:
    """Read the worker's raw outcomes and judge them here, treating every file as hostile."""
    exercise = task.course.exercise
    load_error = out / "load_error.json"
    if load_error.exists():
        try:
            record = serialize._read_json(load_error)
            kind, message = (str(x)[:300] for x in record["load_error"][:2])
        except (serialize.DecodeError, KeyError, TypeError, ValueError):
            kind, message = "Error", "unreadable"
        if _is_memory(kind, message):
            return (Status.MEMORY, "your code ran out of memory; use smaller intermediate tensors")
        if kind == "SystemExit":
            return (Status.ERROR, f"your code called sys.exit ({message}); return a value instead")
        return (Status.ERROR, f"your cell raised {kind} when it ran: {message}")
    keys = sorted({key for case in cases for key in case})
    try:
        outcomes = serialize.load_outcomes(out, keys)
    except serialize.DecodeError as exc:
        return (Status.ERROR, f"the grader could not read what your function returned ({exc})")
    stopped = outcomes and outcomes[-1].error and outcomes[-1].error[0] == "NotImplementedError"
    if not outcomes or len(outcomes) > len(cases) or (len(outcomes) < len(cases) and not stopped):
        return (Status.ERROR, f"your function ran on {len(outcomes)} of {len(cases)} cases; the rest never "
                         f"returned (did it exit or tamper with the grader?)")
    for outcome in outcomes:
        if outcome.error and _is_memory(*outcome.error):
            return (Status.MEMORY, "your function ran out of memory; use smaller intermediate tensors")
    try:
        verdict = judge(exercise, cases[: len(outcomes)], outcomes)
    except Exception as exc:  # a hostile output must never stop the batch
        return (Status.ERROR, f"your output could not be compared with the reference ({type(exc).__name__})")
    return (verdict.status, verdict.message)


# --------------------------------------------------------------------------------------------------
# The batch
# --------------------------------------------------------------------------------------------------


@dataclass
class Plan:
    students: list[str]
    exercises: list[course_mod.CourseExercise]
    decided: dict[tuple[str, str], Row]
    units: list[tuple[str, str, list[Task]]]  # (student, files, tasks): one unit per student


def plan(submissions_dir: Path, course_root: Path, registry: Mapping[str, Any]) -> Plan:
    exercises = course_mod.load_course(course_root, registry)
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
    """Run every unit, ``jobs`` at a time, and return all rows in (student, course) order."""
    iso = sandbox.isolation()
    slots: queue.Queue[int] = queue.Queue()
    for slot in range(jobs):
        slots.put(slot)
    tmp_root = Path(tempfile.mkdtemp(prefix="grader-"))
    os.chmod(tmp_root, 0o711)  # sandbox uids may enter their own unit folder, not list the others

    def run(unit: tuple[str, str, list[Task]]) -> list[Row]:
        slot = slots.get()
        try:
            return run_unit(unit[0], unit[2], settings, tmp_root, slot, iso)
        finally:
            slots.put(slot)
            if progress:
                progress()

    try:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            results = list(pool.map(run, the_plan.units))
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)
    by_key = dict(the_plan.decided)
    for rows in results:
        by_key.update({(row.student, row.exercise): row for row in rows})
    return [by_key[(student, ex.id)] for student in the_plan.students for ex in the_plan.exercises]
