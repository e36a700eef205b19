"""Running one unit (all of one student's exercise cells) in sandboxed workers, and judging each result.

For each exercise, when it is due: write its cell and the inputs of its cases into ``in/i`` (never
earlier; the public cases, then the hidden ones drawn here for this student, with no label saying
which is which), send
``run i``, wait for the worker's answer (see *Timeouts* below), **stop the sandbox** (``SIGSTOP``
on the worker, ``SIGKILL`` on every other process in it), read its files through descriptors
(:mod:`utils.grading.files`) and judge them here, then let the worker go on. When an exercise kills
its worker or times out, a fresh worker starts at the next exercise. A :class:`Guard` carries the
unit's verdicts and the deadline of its current phase, for the batch's watchdog.

**Timeouts.** ``--timeout`` is CPU time: the exercise's process gets ``SIGXCPU`` once it has used
that many CPU seconds (``RLIMIT_CPU``, rounded up to a whole second, set by the worker), and the verdict
is ``timeout``. CPU time does not grow when the machine is busy, so an honest exercise is not timed out
because other processes share the cores. Code that waits without computing (a ``sleep``) is caught by a
wall-clock backstop, :func:`wall_limit`: :data:`WALL_FACTOR` times the timeout, at least
:data:`WALL_MARGIN` seconds more than it, long enough for a machine five times slower than idle.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from utils.exercises import credit
from utils.exercises.common import Status, one_line
from utils.exercises.definition import Exercise, plain_points
from utils.exercises.probes import Evidence, probe_inputs
from utils.grading import course as course_mod
from utils.grading import files, sandbox, serialize
from utils.i18n.messages import tr

WALL_FACTOR = 5.0
"""The wall-clock backstop is at least this many times the exercise's CPU-time limit ..."""
WALL_MARGIN = 60.0
"""... and at least this many seconds above it (:func:`wall_limit`)."""
COLLECT_SECONDS = 120.0
"""The watchdog's bound on reading and judging one exercise's results."""
CLEANUP_SECONDS = 600.0
"""The watchdog's bound on removing one unit's work folder."""
MEMORY_MARKERS = ("can't allocate memory", "not enough memory", "bad_alloc", "out of memory")


@dataclass(frozen=True)
class PartRow:
    """One named part of an exercise: its credit and the reason (already in the batch's feedback mode).

    ``hidden_cases`` counts the hidden cases it ran; ``public_status`` and ``public_feedback`` say what its
    public cases alone gave (what the learner's own check shows), so that a report may show those at once
    and the credit, which the hidden cases decide too, later (Gradescope's hidden visibility)."""

    part: str
    points: int | Fraction
    max_points: int | Fraction
    status: Status
    feedback: str
    hidden_cases: int = 0
    public_status: Status | None = None
    public_feedback: str = ""


@dataclass(frozen=True)
class Row:
    """One student × exercise. ``points`` is the exact total of ``parts`` (an ``int`` when whole, else a
    :class:`~fractions.Fraction` in hundredths: :func:`~utils.exercises.definition.points_text` prints it)."""

    student: str
    exercise: str
    points: int | Fraction
    max_points: int
    status: Status
    feedback: str
    parts: tuple[PartRow, ...] = ()


@dataclass(frozen=True)
class Settings:
    timeout: float
    seed: int
    memory_mb: int = 2048
    startup_timeout: float = 180.0
    hidden: tuple[str, ...] = ()  # folders the sandbox covers where it has private mounts
    feedback: str = credit.DEFAULT_FEEDBACK  # full | public | score: what rows may say about hidden cases


def whole_exercise_parts(exercise: Exercise, status: Status, feedback: str) -> tuple[PartRow, ...]:
    """Every part at 0 points with one reason: a verdict about the whole exercise (missing, forbidden,
    timeout, a crash, ...)."""
    return tuple(PartRow(p.name, 0, plain_points(p.points), status, one_line(feedback)) for p in exercise.part_list())


def graded_row(student: str, exercise_id: str, max_points: int, graded: credit.Graded, mode: str) -> Row:
    """The row of a judged exercise, its parts' reasons in feedback ``mode``."""
    decided = graded.decided
    parts = tuple(PartRow(p.name, plain_points(p.points), plain_points(p.max_points),
                          graded.status if decided is not None else p.status,
                          one_line(decided.message if decided is not None else p.reason(mode)),
                          0 if decided is not None else p.hidden[1],
                          Status.PASSED if p.public_passed else Status.FAILED, one_line(p.public_reason()))
                  for p in graded.parts)
    return Row(student, exercise_id, plain_points(graded.points), max_points, graded.status,
               one_line(graded.reason(mode)), parts)


@dataclass
class Task:
    """One exercise to run in a unit."""

    course: course_mod.CourseExercise
    source: str


def case_seed(seed: int, exercise_id: str, student: str) -> int:
    digest = hashlib.sha256(f"grade:{seed}:{exercise_id}:{student}".encode()).digest()
    return int.from_bytes(digest[:6], "big")


def wall_limit(timeout: float) -> float:
    """Wall-clock seconds an exercise with CPU-time limit ``timeout`` may take before the grader kills it:
    the backstop for code that waits instead of computing, far above what a busy machine adds."""
    return max(WALL_FACTOR * timeout, timeout + WALL_MARGIN)


def _limits(settings: Settings) -> dict[str, int]:
    return {
        "memory": settings.memory_mb * 2**20,
        "cpu": math.ceil(settings.timeout),  # CPU seconds per exercise: each runs in its own forked process
        "fsize": 64 * 2**20,
        "nproc": 64,
    }


class Guard:
    """The parent's watchdog over one unit. The unit's thread announces each phase with a deadline
    (:meth:`enter`) and the worker it runs (:meth:`attach`); the batch loop calls :meth:`abandon` when a
    deadline passes: it kills the worker, and the unit's rows are decided without it."""

    def __init__(self) -> None:
        self.phase = "waiting"
        self.deadline = math.inf
        self.worker: sandbox.Worker | None = None
        self.verdicts: dict[int, tuple[Status, str] | Row] = {}
        self.abandoned = False
        self._lock = threading.Lock()

    def enter(self, phase: str, seconds: float) -> None:
        with self._lock:
            self.phase, self.deadline = phase, time.monotonic() + seconds

    def attach(self, worker: sandbox.Worker | None) -> None:
        with self._lock:
            self.worker = worker
            abandoned = self.abandoned
        if abandoned and worker is not None:
            worker.terminate()

    def overdue(self, now: float) -> bool:
        with self._lock:
            return now > self.deadline

    def abandon(self) -> None:
        with self._lock:
            self.abandoned = True
            worker = self.worker
        if worker is not None:
            worker.terminate()


def run_unit(student: str, tasks: list[Task], settings: Settings, tmp_root: Path, slot: int,
             iso: sandbox.Isolation, guard: Guard | None = None) -> list[Row]:
    guard = guard or Guard()
    jobdir = Path(tempfile.mkdtemp(prefix="unit-", dir=tmp_root))
    try:
        _run_unit(student, tasks, settings, jobdir, slot, iso, guard)
    finally:
        guard.enter("removing its work folder", CLEANUP_SECONDS)
        try:
            files.remove_tree(jobdir)
        except Exception as exc:  # noqa: BLE001  (the rows are decided; the batch's own cleanup retries)
            print(f"grader: could not remove {jobdir}: {type(exc).__name__}", file=sys.stderr)
    return unit_rows(student, tasks, guard.verdicts, "the grader lost track of this exercise")


def unit_rows(student: str, tasks: list[Task], verdicts: Mapping[int, tuple[Status, str] | Row],
              reason: str) -> list[Row]:
    """A row per task: its judged :class:`Row`, or a whole-exercise ``(status, reason)`` (0 points: a
    timeout, a crash, ...), or ``(error, reason)`` where there is neither."""
    rows = []
    for index, task in enumerate(tasks):
        verdict = verdicts.get(index, (Status.ERROR, reason))
        if isinstance(verdict, Row):
            rows.append(verdict)
            continue
        status, feedback = verdict
        parts = whole_exercise_parts(task.course.exercise, status, feedback)
        rows.append(Row(student, task.course.id, 0, task.course.points, status, one_line(feedback), parts))
    return rows


def _prepare(jobdir: Path, settings: Settings, slot: int, iso: sandbox.Isolation) -> Path:
    """The unit's folders. With a uid of its own, the sandbox owns ``work`` and ``out`` only: ``in`` (the
    cells and inputs, written here when each exercise is due) and the job folder stay the grader's, so
    learner code cannot swap them for links into places the grader would then write."""
    (jobdir / "job.json").write_text(json.dumps({"limits": _limits(settings)}), encoding="utf-8")
    workdir = jobdir / "work"
    for name in ("in", "out", "work"):
        (jobdir / name).mkdir()
    if iso.uid:
        uid = sandbox.UID_BASE + slot
        os.chown(jobdir, 0, uid)
        os.chmod(jobdir, 0o710)
        for name, owner, mode in (("in", 0, 0o750), ("out", uid, 0o700), ("work", uid, 0o700)):
            os.chown(jobdir / name, owner, uid)
            os.chmod(jobdir / name, mode)
        os.chown(jobdir / "job.json", 0, uid)
        os.chmod(jobdir / "job.json", 0o640)
    return workdir


def _write_due(jobdir: Path, index: int, task: Task, cases: list[dict[str, Any]], iso: sandbox.Isolation,
               slot: int) -> None:
    """Exercise ``index``'s cell and inputs, written only now that it is due."""
    folder = jobdir / "in" / str(index)
    serialize.dump(cases, folder)
    (folder / "cell.json").write_text(json.dumps({
        "id": task.course.id, "func_name": task.course.exercise.func_name, "source": task.source,
        "forbidden": list(task.course.exercise.forbidden),
        "gradients": bool(task.course.exercise.gradients)}), encoding="utf-8")
    if iso.uid:
        gid = sandbox.UID_BASE + slot
        for path in (folder, *folder.iterdir()):
            os.chown(path, 0, gid)
            os.chmod(path, 0o750 if path.is_dir() else 0o640)


def _run_unit(student: str, tasks: list[Task], settings: Settings, jobdir: Path, slot: int,
              iso: sandbox.Isolation, guard: Guard) -> None:
    workdir = _prepare(jobdir, settings, slot, iso)
    verdicts = guard.verdicts
    index = 0
    while index < len(tasks) and not guard.abandoned:
        guard.enter("starting its sandbox", settings.startup_timeout + 30)
        worker = sandbox.Worker.start(jobdir, workdir, slot, iso, settings.hidden)
        guard.attach(worker)
        try:
            if worker.next_line(time.monotonic() + settings.startup_timeout) != "ready":
                worker.kill()
                tail = one_line(worker.output.decode("utf-8", "replace")[-300:])
                for later in range(index, len(tasks)):
                    verdicts[later] = (Status.ERROR, tr("the grader could not start its sandbox: {tail}", tail=tail))
                return
            while index < len(tasks) and not guard.abandoned:
                task = tasks[index]
                wall = wall_limit(settings.timeout)
                guard.enter(f"running {task.course.id}", 2 * wall + 60)
                public = task.course.exercise.public_cases()
                cases = public + task.course.exercise.hidden_cases(case_seed(settings.seed, task.course.id, student))
                probes = probe_inputs(task.course.exercise)  # run after the cases; never counted
                _write_due(jobdir, index, task, cases + probes, iso, slot)
                worker.send(f"run {index}")
                line = worker.next_line(time.monotonic() + wall)
                if line == f"start {index}":
                    line = worker.next_line(time.monotonic() + wall)
                if line is None:
                    worker.kill()
                    verdicts[index] = (Status.TIMEOUT, tr("your code ran longer than {seconds:g} s; look for an "
                                                          "endless loop or needless work", seconds=wall))
                    index += 1
                    break
                words = line.split()
                if len(words) < 2 or words[0] not in ("done", "exit", "died") or words[1] != str(index):
                    worker.kill()
                    verdicts[index] = _death(worker, line)
                    index += 1
                    break
                guard.enter(f"reading the results of {task.course.id}", COLLECT_SECONDS)
                frozen = worker.freeze()
                if not frozen:
                    worker.kill()  # read only from a stopped sandbox: a dead one will do
                if words[0] == "died":
                    verdicts[index] = _crash(words[2] if len(words) > 2 else "a signal", math.ceil(settings.timeout))
                elif words[0] == "exit":
                    verdicts[index] = (Status.ERROR, tr("your code ended the process that runs it (exit status "
                                                        "{code}); do not call os._exit, sys.exit or kill processes "
                                                        "in an exercise", code=" ".join(words[2:3])))
                else:
                    verdicts[index] = _collect(task, cases, jobdir, index, len(public), student, settings.feedback,
                                               probes)
                index += 1
                if not frozen:
                    break
                worker.thaw()
        finally:
            worker.kill()
            guard.attach(None)


def _crash(signal_name: str, cpu_seconds: int) -> tuple[Status, str]:
    if signal_name == "SIGXCPU":
        return (Status.TIMEOUT, tr("your code used more than {seconds} s of CPU time; look for an endless loop or "
                                   "needless work", seconds=cpu_seconds))
    if signal_name in ("SIGKILL", "SIGSEGV", "SIGABRT", "SIGBUS"):
        return (Status.MEMORY, tr("the process running your code crashed ({how}), most likely out of memory; use "
                                  "smaller intermediate tensors", how=signal_name))
    return (Status.ERROR, tr("the process running your code was killed by {signal}; do not send signals or "
                             "kill processes in an exercise", signal=signal_name))


def _death(worker: sandbox.Worker, line: str | None = "") -> tuple[Status, str]:
    """The verdict when the worker itself stopped answering as agreed (``line`` is what it said)."""
    if line:
        return (Status.ERROR, tr("the grader stopped your sandbox because it sent an unexpected status line "
                                 "({line!r}): your code wrote to the grader's status pipe or interfered with the "
                                 "process that runs it", line=one_line(line, 60)))
    how = worker.exit_description()
    if worker.killed_by_grader:
        return (Status.ERROR, tr("the grader stopped the process running your code because it stopped answering"))
    if "SIGXCPU" in how:
        return (Status.TIMEOUT, tr("your code used too much CPU time; look for an endless loop"))
    if "SIGKILL" in how or "SIGSEGV" in how or "SIGABRT" in how or "SIGBUS" in how:
        return (Status.MEMORY, tr("the process running your code crashed ({how}), most likely out of memory; use "
                                  "smaller intermediate tensors", how=how))
    return (Status.ERROR, tr("your code ended the process that runs it ({how}); do not call os._exit, sys.exit "
                         "or kill processes in an exercise", how=how))


def _is_memory(kind: str, message: str) -> bool:
    return kind == "MemoryError" or any(marker in message for marker in MEMORY_MARKERS)


def _collect(task: Task, cases: list[dict[str, Any]], jobdir: Path, index: int, n_public: int = 0,
             student: str = "", mode: str = credit.DEFAULT_FEEDBACK,
             probes: Sequence[dict[str, Any]] = ()) -> tuple[Status, str] | Row:
    """Read the (stopped) worker's raw outcomes and judge them here, treating every file as hostile."""
    try:
        with files.open_dir(jobdir, "out", str(index)) as out:
            return _judge_folder(task, cases, out, n_public, student, mode, probes)
    except files.Refused as exc:
        return (Status.ERROR, tr("your code left no results for the grader to read ({problem}): it may have "
                                 "ended, or used up the file descriptors or disk space of, the process that runs it",
                                 problem=exc))


def _judge_folder(task: Task, cases: list[dict[str, Any]], out: int | Path, n_public: int = 0, student: str = "",
                  mode: str = credit.DEFAULT_FEEDBACK,
                  probes: Sequence[dict[str, Any]] = ()) -> tuple[Status, str] | Row:
    """The judged :class:`Row` (per-part credit, ``cases[:n_public]`` public), or a whole-exercise
    ``(status, reason)`` when the outcomes cannot be judged. The worker ran ``probes`` (probe inputs,
    :mod:`utils.exercises.probes`) after ``cases``: their outcomes, split off by count, only inform the
    diagnosis; they never count and may be missing."""
    try:
        record = serialize.read_json(out, "load_error.json")
    except serialize.DecodeError as exc:
        record = None if "missing" in str(exc) else {"load_error": ["Error", "unreadable"]}
    if record is not None:
        try:
            kind, message = (str(x)[:300] for x in record["load_error"][:2])
        except (KeyError, TypeError, ValueError):
            kind, message = "Error", "unreadable"
        if _is_memory(kind, message):
            return (Status.MEMORY, tr("your code ran out of memory; use smaller intermediate tensors"))
        if kind == "SystemExit":
            return (Status.ERROR, tr("your code called sys.exit ({message}); return a value instead", message=message))
        return (Status.ERROR, tr("your cell raised {kind} when it ran: {message}", kind=kind, message=message))
    keys = sorted({key for case in [*cases, *probes] for key in case})
    try:
        outcomes = serialize.load_outcomes(out, keys, max_records=len(cases) + len(probes))
    except serialize.DecodeError as exc:
        if "outcomes.json is missing" in str(exc):
            return (Status.ERROR, tr("your function's results were never written (outcomes.json is missing): "
                                     "your code may have ended, or used up the file descriptors of, the process "
                                     "that runs it"))
        return (Status.ERROR, tr("the grader could not read what your function returned ({problem})", problem=exc))
    exercise = task.course.exercise
    outcomes, probe_outcomes = outcomes[:len(cases)], outcomes[len(cases):]
    for outcome in outcomes:
        if outcome.error and _is_memory(*outcome.error):
            return (Status.MEMORY, tr("your function ran out of memory; use smaller intermediate tensors"))
    if len(outcomes) != len(cases):  # the runner stops early only on MemoryError (handled above)
        return (Status.ERROR, tr("your function ran on {ran} of {total} cases; the rest never returned (did "
                            "it exit or tamper with the grader?)", ran=len(outcomes), total=len(cases)))
    try:
        graded = credit.credit_for(exercise, cases, outcomes, n_public, diagnose_hidden=mode == "full",
                                   evidence=Evidence(list(probes), probe_outcomes))
    except Exception as exc:  # a hostile output must never stop the batch
        return (Status.ERROR, tr("your output could not be compared with the reference ({kind})",
                              kind=type(exc).__name__))
    return graded_row(student, task.course.id, task.course.points, graded, mode)
