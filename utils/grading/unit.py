"""Running one unit (all of one student's exercise cells) in sandboxed workers, and judging each result.

Each exercise runs up to three times, in forked processes of the student's worker (:mod:`utils.grading.worker`):

1. its **public run**, when it is due (never earlier): the grader writes its cell and the inputs of its
   public cases into ``in/i``, sends ``run i`` and waits for the worker's answer (see *Timeouts* below);
   then its **probe run** (``probe i``, inputs in ``in/pi``), once every public run is over: the probe
   inputs, which only inform the diagnosis, in a process and under a CPU limit of their own, so that a run
   that ends abnormally there drops the probes' outcomes and costs the exercise nothing (red team R24);
2. its **hidden run**, once *every* public run of the unit is over: the hidden cases drawn here for this
   student are written into ``in/hi``, the worker reads them (``hide i``, ``loaded i``), the grader
   removes them, and only then does the worker fork the process that runs the learner's code on them
   (``go i``). No learner code ever runs while a hidden input is on disk, nothing the learner's code saw
   of a hidden case can reach a public run, and a hidden run's own words reach ``public`` or ``score``
   feedback only as a category and a fixed message (:mod:`utils.grading.verdicts`).

After each run the grader **stops the sandbox** (``SIGSTOP`` on the worker, ``SIGKILL`` on every other
process in it), reads its files through descriptors (:mod:`utils.grading.files`), and lets the worker
go on; the exercise is judged here once both runs are read. When a run kills its worker, times out or
goes over the student's one memory bound (:mod:`utils.grading.memory`), a fresh worker starts at the next
run; a worker that dies with its fork server (:mod:`utils.grading.forkserver`) is started again, once.
A :class:`Guard` carries the unit's verdicts and the deadline of its current phase, for the batch's
watchdog.

**Timeouts.** ``--timeout`` is CPU time: a run's process gets ``SIGXCPU`` once it has used that many
CPU seconds (``RLIMIT_CPU``, rounded up to a whole second, set by the worker), and the verdict is
``timeout``. The public and the hidden run each get that much. CPU time does not grow when the machine
is busy, so an honest exercise is not timed out because other processes share the cores. Code that
waits without computing (a ``sleep``) is caught by a wall-clock backstop, :func:`wall_limit`:
:data:`WALL_FACTOR` times the timeout, at least :data:`WALL_MARGIN` seconds more than it, long enough
for a machine five times slower than idle (``Settings.wall`` sets another, as the Gradescope runner does).
A batch may also have a wall-clock **budget** (``Settings.deadline``): no run starts past it, a run still
going is stopped at it, and every exercise left is a ``timeout`` row that says so, without running.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from utils.exercises import credit
from utils.exercises.common import Outcome, Status, one_line
from utils.exercises.probes import Evidence, probe_inputs
from utils.grading import course as course_mod
from utils.grading import files, memory, sandbox, serialize, verdicts
from utils.grading.guard import Guard as Guard  # re-exported: the batch and the tests use it here
from utils.grading.rows import NOT_RUN, Row, graded_row, unit_rows, whole_exercise_parts
from utils.grading.rows import PartRow as PartRow  # re-exported: the rows' old home
from utils.i18n.messages import tr

WALL_FACTOR = 5.0
"""The wall-clock backstop is at least this many times the exercise's CPU-time limit ..."""
WALL_MARGIN = 60.0
"""... and at least this many seconds above it (:func:`wall_limit`)."""
COLLECT_SECONDS = 120.0
"""The watchdog's bound on reading and judging one exercise's results."""
CLEANUP_SECONDS = 600.0
"""The watchdog's bound on removing one unit's work folder."""
PROBE_CPU, PROBE_WALL = 10, 30.0
"""A probe run's CPU-time limit and wall-clock backstop (seconds; less when the exercise's own are less): its
inputs are tiny and never count, so a wait or a loop there costs little of a submission's budget (R25)."""


@dataclass(frozen=True)
class Settings:
    timeout: float
    seed: int
    memory_mb: int = 2048
    startup_timeout: float = 180.0
    hidden: tuple[str, ...] = ()  # folders the sandbox covers where it has private mounts
    feedback: str = credit.DEFAULT_FEEDBACK  # full | public | score: what rows may say about hidden cases
    wall: float | None = None  # the wall-clock backstop of one run (None: wall_limit(timeout))
    deadline: float = math.inf  # time.monotonic() past which nothing more runs: the batch's budget ...
    budget: float | None = None  # ... of this many seconds (None: none), named in the reasons


def run_wall(settings: Settings) -> float:
    """The wall-clock seconds one run may take: ``settings.wall``, else :func:`wall_limit` of the timeout."""
    return settings.wall if settings.wall is not None else wall_limit(settings.timeout)


def _out_of_budget(tasks: list[Task], settings: Settings, guard: Guard) -> bool:
    """Past the batch's deadline, every exercise without a verdict becomes ``timeout``, not run."""
    if time.monotonic() < settings.deadline:
        return False
    for index in range(len(tasks)):
        guard.verdicts.setdefault(index, (Status.TIMEOUT, tr(
            "not run: the grading time of this submission ({budget:g} s for all its exercises) ran out before this "
            "exercise's turn; code that waits or loops (a sleep, an endless loop) in an exercise uses it up",
            budget=settings.budget or 0), NOT_RUN))
    return True


def _wait(worker: sandbox.Worker, seconds: float, settings: Settings) -> str | None:
    """The worker's next line within ``seconds``, or before the batch's deadline if that is sooner."""
    return worker.next_line(min(time.monotonic() + seconds, settings.deadline))


@dataclass
class Task:
    """One exercise to run in a unit."""

    course: course_mod.CourseExercise
    source: str


@dataclass
class _Runs:
    """One exercise's cases and what its public run and its probe run gave."""

    public: list[dict[str, Any]]
    probes: list[dict[str, Any]]
    hidden: list[dict[str, Any]]
    outcomes: list[Outcome] | None = None
    probe_outcomes: list[Outcome] = field(default_factory=list)  # [] until the probe run, or when it failed


def case_seed(seed: int, exercise_id: str, student: str) -> int:
    # surrogatepass: a folder name that is not UTF-8 (GBK) has surrogates; a UTF-8 name's bytes are as they were
    digest = hashlib.sha256(f"grade:{seed}:{exercise_id}:{student}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:6], "big")


def wall_limit(timeout: float) -> float:
    """Wall-clock seconds an exercise with CPU-time limit ``timeout`` may take before the grader kills it:
    the backstop for code that waits instead of computing, far above what a busy machine adds."""
    return max(WALL_FACTOR * timeout, timeout + WALL_MARGIN)


def _limits(settings: Settings) -> dict[str, int]:  # "cpu": seconds per exercise, each in its own forked process
    return {"memory": settings.memory_mb * 2**20, "cpu": math.ceil(settings.timeout), "fsize": 64 * 2**20, "nproc": 64,
            "probe_cpu": min(math.ceil(settings.timeout), PROBE_CPU)}


def run_unit(student: str, tasks: list[Task], settings: Settings, tmp_root: Path, slot: int,
             iso: sandbox.Isolation, guard: Guard | None = None) -> list[Row]:
    guard = guard or Guard()
    jobdir = Path(tempfile.mkdtemp(prefix="unit-", dir=tmp_root))
    bound = memory.Bound(iso.memory or None,  # the unit folder in RAM: a student cannot fill the grader's disk
                         ram=(jobdir, settings.memory_mb * 2**20) if "mounts" in iso.extras else None)
    try:
        _run_unit(student, tasks, settings, jobdir, slot, iso, guard, bound)
    finally:
        guard.enter("removing its work folder", CLEANUP_SECONDS)
        bound.close()
        if iso.uid and "mounts" not in iso.extras:
            sandbox.remove_leftovers(sandbox.sandbox_uid(slot))
        try:
            files.remove_tree(jobdir)
        except Exception as exc:  # noqa: BLE001  (the rows are decided; the batch's own cleanup retries)
            print(f"grader: could not remove {jobdir}: {type(exc).__name__}", file=sys.stderr)
    return unit_rows(student, tasks, guard.verdicts, "the grader lost track of this exercise")


def _prepare(jobdir: Path, settings: Settings, slot: int, iso: sandbox.Isolation) -> Path:
    """The unit's folders. With a uid of its own, the sandbox owns ``work`` and ``out`` only: ``in`` (the
    cells and inputs, written here when each run is due) and the job folder stay the grader's, so
    learner code cannot swap them for links into places the grader would then write."""
    (jobdir / "job.json").write_text(json.dumps({"limits": _limits(settings)}), encoding="utf-8")
    workdir = jobdir / "work"
    for name in ("in", "out", "work"):
        (jobdir / name).mkdir()
    if iso.uid:
        uid = sandbox.sandbox_uid(slot)
        os.chown(jobdir, 0, uid)
        os.chmod(jobdir, 0o710)
        for name, owner, mode in (("in", 0, 0o750), ("out", uid, 0o700), ("work", uid, 0o700)):
            os.chown(jobdir / name, owner, uid)
            os.chmod(jobdir / name, mode)
        os.chown(jobdir / "job.json", 0, uid)
        os.chmod(jobdir / "job.json", 0o640)
    return workdir


def _write_inputs(folder: Path, cases: list[dict[str, Any]], iso: sandbox.Isolation, slot: int) -> None:
    """``cases`` into ``folder`` (under the grader's ``in``), readable by the sandbox's group only."""
    serialize.dump(cases, folder)
    if iso.uid:
        gid = sandbox.sandbox_uid(slot)
        for path in (folder, *folder.iterdir()):
            os.chown(path, 0, gid)
            os.chmod(path, 0o750 if path.is_dir() else 0o640)


def _write_due(jobdir: Path, index: int, task: Task, cases: list[dict[str, Any]], iso: sandbox.Isolation,
               slot: int) -> None:
    """Exercise ``index``'s cell and the inputs of its public run, written only now that it is due."""
    folder = jobdir / "in" / str(index)
    _write_inputs(folder, cases, iso, slot)
    (folder / "cell.json").write_text(json.dumps({
        "id": task.course.id, "func_name": task.course.exercise.func_name, "source": task.source,
        "forbidden": list(task.course.exercise.forbidden),
        "gradients": bool(task.course.exercise.gradients)}), encoding="utf-8")
    if iso.uid:
        os.chown(folder / "cell.json", 0, sandbox.sandbox_uid(slot))
        os.chmod(folder / "cell.json", 0o640)


def _run_unit(student: str, tasks: list[Task], settings: Settings, jobdir: Path, slot: int,
              iso: sandbox.Isolation, guard: Guard, bound: memory.Bound) -> None:
    workdir = _prepare(jobdir, settings, slot, iso)
    runs: dict[int, _Runs] = {}
    plan = [(i, kind) for kind in ("run", "probe", "hide") for i in range(len(tasks))]
    step, retried = 0, False
    while step < len(plan) and not guard.abandoned and not _out_of_budget(tasks, settings, guard):
        guard.enter("starting its sandbox", settings.startup_timeout + 30)
        worker = sandbox.Worker.start(jobdir, workdir, slot, iso, settings.hidden, bound)
        guard.attach(worker)
        try:
            if _wait(worker, settings.startup_timeout, settings) != "ready":
                worker.kill()
                if _out_of_budget(tasks, settings, guard):
                    return
                if worker.lost and not retried:  # its fork server died under it, not the student's doing: again
                    retried = True
                    continue
                tail = one_line(worker.output.decode("utf-8", "replace")[-300:])
                print(f"grader: {student}: the sandbox did not start: {tail}", file=sys.stderr)
                for later in range(len(tasks)):
                    guard.verdicts.setdefault(later, (Status.ERROR, tr("the grader could not start its sandbox: "
                                                                       "{tail}", tail=tail)))
                return
            bound.arm(settings.memory_mb * 2**20, lambda w=worker: sandbox.members(w), worker.terminate)
            while step < len(plan) and not guard.abandoned and not _out_of_budget(tasks, settings, guard):
                index, kind = plan[step]
                step += 1
                if index in guard.verdicts or (kind == "probe" and not runs[index].probes):
                    continue
                if kind == "probe" and time.monotonic() + (settings.budget or 0) / 2 > settings.deadline:
                    _probed(tasks[index], runs[index], [], guard, index, student, settings.feedback)
                    continue  # past half the budget: the hidden runs come first, the probes only inform
                if not _run(student, tasks[index], index, kind, worker, settings, jobdir, slot, iso, guard,
                            runs, bound):
                    if worker.lost and not retried and kind != "probe":  # as above: this run again, in a fresh worker
                        retried = True
                        guard.verdicts.pop(index, None)
                        step -= 1
                    break
        finally:
            worker.kill()
            guard.attach(None)


def _run(student: str, task: Task, index: int, kind: str, worker: sandbox.Worker, settings: Settings,
         jobdir: Path, slot: int, iso: sandbox.Isolation, guard: Guard, runs: dict[int, _Runs],
         bound: memory.Bound) -> bool:
    """One run of exercise ``index``: ``kind`` ``run`` (its public cases), ``probe`` (its probe inputs) or
    ``hide`` (its hidden cases). Records a verdict in ``guard`` when it decides the exercise; False when the
    worker is gone and a fresh one is needed. A probe run that ends abnormally decides nothing: its outcomes
    are dropped (they only inform the diagnosis; red team R24: they cost the whole exercise)."""
    exercise, mode, wall, hidden = task.course.exercise, settings.feedback, run_wall(settings), kind == "hide"
    wall = min(wall, PROBE_WALL) if kind == "probe" else wall
    guard.enter(f"running {'the hidden cases of ' if hidden else ''}{task.course.id}", 3 * wall + 60)
    hide = (lambda verdict: _held(task, run, verdicts.hidden(verdict, mode), student)) if hidden else (lambda v: v)
    if kind == "run":
        seed = case_seed(settings.seed, task.course.id, student)
        runs[index] = run = _Runs(exercise.public_cases(), probe_inputs(exercise), exercise.hidden_cases(seed))
        _write_due(jobdir, index, task, run.public, iso, slot)
        worker.send(f"run {index}")
    elif kind == "probe":
        run = runs[index]
        _write_inputs(jobdir / "in" / f"p{index}", run.probes, iso, slot)
        worker.send(f"probe {index}")
    else:
        run = runs[index]
        _write_inputs(jobdir / "in" / f"h{index}", run.hidden, iso, slot)
        worker.send(f"hide {index}")
        line = _wait(worker, wall, settings)
        files.remove_tree(jobdir / "in" / f"h{index}")  # before any learner code runs on them
        if line != f"loaded {index}" or not worker.send(f"go {index}"):
            worker.kill()
            guard.verdicts[index] = hide(verdicts.death(worker.exit_description(), worker.stopped_by_grader, line))
            return False
    line = _wait(worker, wall, settings)
    if line == f"start {index}":
        line = _wait(worker, wall, settings)
    words = (line or "").split()
    if line is None or len(words) < 2 or words[0] not in ("done", "exit", "died") or words[1] != str(index):
        worker.kill()
        verdict = verdicts.death(worker.exit_description(), worker.stopped_by_grader, line) if line is not None \
            else verdicts.timeout(wall) if time.monotonic() < settings.deadline else (Status.TIMEOUT, tr(
                "stopped: the grading time of this submission ({budget:g} s for all its exercises) ran out while "
                "this exercise ran", budget=settings.budget or 0))
        verdict = verdicts.over_bound(settings.memory_mb) if bound.tripped() else verdict
        if kind == "probe":
            _probed(task, run, [], guard, index, student, mode)
        else:
            guard.verdicts[index] = hide(verdict)
        return False
    guard.enter(f"reading the results of {task.course.id}", COLLECT_SECONDS)
    frozen = worker.freeze()
    if not frozen:
        worker.kill()  # read only from a stopped sandbox: a dead one will do
    verdict: tuple[Status, str] | Row | None = None
    tripped = bound.tripped()
    if tripped:
        verdict = verdicts.over_bound(settings.memory_mb)
    elif words[0] == "died":
        verdict = verdicts.crash(words[2] if len(words) > 2 else "a signal", math.ceil(settings.timeout))
    elif words[0] == "exit":
        verdict = verdicts.exited(" ".join(words[2:3]))
    else:
        keys = sorted({key for case in [*run.public, *run.probes, *run.hidden] for key in case})
        name, cases = {"run": (str(index), run.public), "probe": (f"p{index}", run.probes),
                       "hide": (f"h{index}", run.hidden)}[kind]
        got = _collect(task, jobdir, name, keys, len(cases))
        if isinstance(got, tuple):
            verdict = got
        else:
            got = verdicts.checked(got, exercise.forbidden)
            if hidden:
                verdict = _judge(task, run, [*(run.outcomes or []), *run.probe_outcomes], got, student, mode)
            elif kind == "probe":
                run.probe_outcomes, verdict = got, None
            else:
                run.outcomes = got
                if (not run.hidden and not run.probes) or any(o.forbidden for o in got):
                    verdict = _judge(task, run, got, [], student, mode)  # decided without a hidden run
    if kind == "probe":  # whatever it gave: the exercise is judged on its cases, the probes' outcomes kept or not
        _probed(task, run, run.probe_outcomes if verdict is None else [], guard, index, student, mode)
    elif verdict is not None:
        guard.verdicts[index] = hide(verdict) if isinstance(verdict, tuple) else verdict
    if frozen and not tripped:
        worker.thaw()
        return True
    # Over the bound, the kernel may still end the worker itself (its cgroup is full): a fresh worker for the
    # next exercise, whose bound is armed anew, so that such a late kill is not counted against that exercise.
    worker.kill()
    return False


def _probed(task: Task, run: _Runs, outcomes: list[Outcome], guard: Guard, index: int, student: str,
            mode: str) -> None:
    """After the probe run: keep its ``outcomes`` ([] when it ended abnormally) and, when the exercise has no
    hidden cases, judge it now."""
    run.probe_outcomes = outcomes
    if not run.hidden:
        guard.verdicts[index] = _judge(task, run, [*(run.outcomes or []), *outcomes], [], student, mode)


def _held(task: Task, run: _Runs, verdict: tuple[Status, str], student: str) -> tuple[Status, str] | Row:
    """A hidden run's abnormal ending (exit, crash, timeout, memory) after the public run: the verdict, each part
    keeping its public cases' status, all Gradescope shows before publication (else a student could search the
    hidden inputs, the same at each resubmission, by how the run ended)."""
    exercise, n = task.course.exercise, len(run.public)
    try:
        graded = credit.credit_for(exercise, run.public, run.outcomes[:n], n) if run.outcomes is not None else None
    except Exception:  # noqa: BLE001  (a hostile output: the verdict alone)
        graded = None
    if graded is None:
        return verdict
    public = {p.name: graded.status if graded.decided else None if p.public[1] == 0 else
              Status.PASSED if p.public_passed else Status.FAILED for p in graded.parts}
    parts = tuple(replace(p, hidden_cases=sum(exercise.part_of(c) == p.part for c in run.hidden),
                          public_status=None if p.hidden_only else public.get(p.part))
                  for p in whole_exercise_parts(exercise, *verdict))
    return Row(student, task.course.id, 0, task.course.points, verdict[0], one_line(verdict[1]), parts)


def _collect(task: Task, jobdir: Path, name: str, keys: list[str], n_cases: int,
             n_extra: int = 0) -> list[Outcome] | tuple[Status, str]:
    """Read the (stopped) worker's raw outcomes in ``out/name``, treating every file as hostile."""
    try:
        with files.open_dir(jobdir, "out", name) as out:
            return verdicts.read(out, keys, n_cases, n_extra)
    except files.Refused as exc:
        return (Status.ERROR, tr("your code left no results for the grader to read ({problem}): it may have "
                                 "ended, or used up the file descriptors or disk space of, the process that runs it",
                                 problem=exc))


def _judge(task: Task, run: _Runs, public: Sequence[Outcome], hidden: Sequence[Outcome], student: str,
           mode: str) -> tuple[Status, str] | Row:
    """The judged :class:`Row` (per-part credit) of the public run's outcomes (``public``: its cases',
    then its probe inputs', which only inform the diagnosis and never count) and the hidden run's."""
    n_public = len(run.public)
    cases = [*run.public, *run.hidden]
    outcomes = [*public[:n_public], *hidden]
    exercise = task.course.exercise
    for outcome in hidden:
        if outcome.error and verdicts.is_memory(*outcome.error):
            return verdicts.hidden(verdicts.memory(), mode)
    try:
        graded = credit.credit_for(exercise, cases, outcomes, n_public, diagnose_hidden=mode == "full",
                                   evidence=Evidence(run.probes[:len(public) - n_public], list(public[n_public:])))
    except Exception as exc:  # a hostile output must never stop the batch
        return (Status.ERROR, tr("your output could not be compared with the reference ({kind})",
                                 kind=type(exc).__name__))
    return graded_row(student, task.course.id, task.course.points, graded, mode, exercise)


def _judge_folder(task: Task, cases: list[dict[str, Any]], out: int | Path, n_public: int = 0, student: str = "",
                  mode: str = credit.DEFAULT_FEEDBACK) -> tuple[Status, str] | Row:
    """Judge the outcomes in ``out`` of ``cases`` (the first ``n_public`` public, the rest hidden) in one go."""
    keys = sorted({key for case in cases for key in case})
    got = verdicts.read(out, keys, len(cases))
    if isinstance(got, tuple):
        return got
    run = _Runs(list(cases[:n_public]), [], list(cases[n_public:]))
    got = verdicts.checked(got, task.course.exercise.forbidden)
    return _judge(task, run, got[:n_public], got[n_public:], student, mode)
