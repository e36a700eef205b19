"""Batch grading: a folder of submissions -> rows, ``results.csv``, ``grades.csv``, ``feedback/`` (and
``canvas.csv``), as :func:`grade`. What the command line (:mod:`utils.grading.cli`), the Gradescope runner
(:mod:`utils.grading.gradescope`) and ``utils.benchmark`` share.

Intake (:mod:`~utils.grading.intake`) finds the students, the engine (:mod:`~utils.grading.engine`)
plans and runs their units in the sandbox and judges them, the reports (:mod:`~utils.grading.report`,
:mod:`~utils.grading.lms`) are written. One student is one unit of failure: the batch always completes.
"""

from __future__ import annotations

import math
import os
import re
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from utils.exercises.common import Status
from utils.grading import engine, intake, lms, lms_previous, report, sandbox
from utils.grading.unit import Row
from utils.i18n.messages import using_language
from utils.paths import REPO_ROOT as COURSE_ROOT

__all__ = ["EARLIER_RUN", "MAX_LISTED", "NoExercises", "NoSubmissions", "NothingToGrade", "OutputExists",
           "check_out", "default_course", "default_jobs", "grade", "previous_canvas", "unplaced_rows", "write_canvas"]

MAX_LISTED = 20
"""Unplaced entries printed one by one on stderr; every one is in ``results.csv``."""


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


class NoSubmissions(ValueError):
    pass


class NoExercises(ValueError):
    pass


class NothingToGrade(ValueError):
    """No submission holds an exercise of the graded chapters (nothing is written)."""


class OutputExists(ValueError):
    """``--out`` holds an earlier run and ``--overwrite`` was not given."""


EARLIER_RUN = ("results.csv", "grades.csv", "canvas.csv", "feedback/index.csv")
"""The files that show a folder holds an earlier run of the grader."""


def check_out(out_dir: str | Path) -> None:
    """Raise :class:`OutputExists` when ``out_dir`` holds an earlier run (:data:`EARLIER_RUN`)."""
    found = [name for name in EARLIER_RUN if (Path(out_dir) / name).exists()]
    if found:
        raise OutputExists(f"--out {out_dir} holds an earlier run ({', '.join(found)}): pass --overwrite to replace "
                           f"it (hand edits there are lost), or choose another --out")


def default_course() -> Path | None:
    """This checkout when it has ``solutions/`` notebooks, else None: the exercise list shipped with the
    package (:mod:`utils.grading.manifest`), which is what a pip-installed grader uses."""
    return COURSE_ROOT if any((COURSE_ROOT / "solutions").glob("*.ipynb")) else None


def grade(submissions_dir: str | Path, out_dir: str | Path, *, jobs: int | None = None, timeout: float = 10.0,
          seed: int = 0, course_root: str | Path | None = None, registry: Mapping[str, Any] | None = None,
          memory_mb: int = 2048, progress: bool = True, layout: str = "auto", roster: str | Path | None = None,
          lms_format: str | None = None, columns: str = "chapter",
          feedback: str = "public", lang: str = "en", chapters: frozenset[int] | None = None,
          allow_weak_isolation: bool | None = None, overwrite: bool | None = None, refuse_empty: bool = False,
          zero_missing: bool = False, keep_existing: bool = False, budget: float | None = None,
          budget_from: float | None = None, wall: float | None = None) -> dict[str, Any]:
    """Grade every student in ``submissions_dir`` and write the reports into ``out_dir``.

    Args:
        registry: exercise id -> :class:`~utils.exercises.definition.Exercise`; default
            :func:`utils.exercises.all_exercises` (tests inject their own).
        course_root: where ``solutions/`` lives (points and the exercise list come from there).
            Default: :func:`default_course`.
        layout: how submissions are laid out, one of :data:`utils.grading.intake.LAYOUTS`. Default: ``"auto"``.
        roster, lms_format, columns: ``lms_format="canvas"`` also writes ``canvas.csv``
            (:mod:`utils.grading.lms`), with identities from ``roster`` and one column per ``columns``.
        feedback: ``full``, ``public`` or ``score``: what the reports say about hidden cases
            (:mod:`utils.exercises.credit`).
        chapters: grade only these chapters' exercises (None: every chapter), out of their own points: the
            other chapters' exercises are neither graded nor reported. Parse ``--chapters`` text with
            :func:`utils.grading.course.parse_chapters`; a chapter without exercises raises
            :class:`~utils.grading.course.ChapterError`.
        allow_weak_isolation: grade even where only a weak sandbox works here (student code as root, or
            not contained: ``--allow-weak-isolation``); False: such a machine raises
            :class:`~utils.grading.isolation.WeakIsolation` before any submission is read. None (the
            default): as :func:`~utils.grading.isolation.allow_weak_isolation` last set it in this process
            (refused unless a caller allowed it, as the Gradescope runner does for its bundle's setting).
        overwrite: False: refuse (:class:`OutputExists`, before reading anything) an ``out_dir`` that holds an
            earlier run; True: replace it, removing the earlier run's ``canvas.csv`` when this run writes none;
            None (the default, for callers with a fresh folder): write as False would, without the check. Either
            way the feedback files of an earlier run's students who are not in this run are removed
            (:func:`~utils.grading.report.write_all`), so no stale feedback stays beside the new.
        refuse_empty: raise :class:`NothingToGrade`, before anything is written, when no submission holds an
            exercise of the graded chapters (``--chapters`` naming the wrong chapter, the wrong folder).
        zero_missing: in ``canvas.csv``, write 0 where a roster student has no graded submission for a column
            (none at all, or one holding none of its exercises) and the roster's cell is empty; a cell holding
            anything (a grade, ``EX``) keeps it. Default False: copy the roster's value of the cell (an empty
            cell would remove the grade Canvas holds on import).
        keep_existing: in ``canvas.csv``, where the roster's cell holds a grade (or ``EX``) other than this
            run's, keep the roster's value, unless it still holds the grade the previous run's ``canvas.csv`` in
            ``out_dir`` gave it (read before it is replaced, kept as ``canvas.previous.csv``: see
            :mod:`~utils.grading.lms_previous`): then this run's grade is written, listed apart as updated.
            Default False: write this run's grade. Either way each such cell is printed (``Name, column: old → new``)
            with their count. When the roster's Points Possible differ
            from the course's for a graded column, :class:`~utils.grading.lms.RosterError` is raised before
            anyone is graded, and nothing is written (the command line exits 2).
        budget: wall-clock seconds for the whole batch, counted from ``budget_from`` (a ``time.monotonic()``;
            None, the default: from this call). None, the default: no limit.
            Once spent, no exercise starts, one still running is stopped, and every exercise left is a
            ``timeout`` row that says why; the reports are written all the same (the Gradescope runner's
            ``--budget``). The summary's ``budget_spent`` says whether it ran out.
        wall: the wall-clock backstop of one run of one exercise, in seconds (None, the default:
            :func:`~utils.grading.unit.wall_limit` of ``timeout``, sized for a busy machine).
        lang: the language of the feedback (``feedback/*.md`` and the CSVs' feedback column): ``"en"`` or
            ``"zh"`` (:mod:`utils.i18n.messages`). Ids, statuses and points in the CSVs stay the same.

    Returns a summary: ``students``, ``exercises``, ``rows`` (list of :class:`engine.Row`),
    ``totals`` (student -> points), ``max_total``, ``seconds``, ``isolation``, ``seed``, ``layout``,
    ``layout_reason``, ``unplaced`` (:class:`~utils.grading.intake.Unplaced` entries, also rows of
    ``results.csv`` and printed on stderr), ``skipped`` (the same as ``"path (reason)"`` lines) and
    ``canvas`` (the :class:`~utils.grading.lms.CanvasSheet`, or None), ``chapters`` (the graded
    chapters, sorted), ``elsewhere`` (student -> the files and chapters of exercise cells the submission holds
    outside the graded chapters, for students that hold any: :func:`~utils.grading.engine.other_chapters`)
    and ``isolation_summary`` (:meth:`~utils.grading.isolation.Isolation.summary`: the
    level reached, shown to the instructor in every run).
    Raises :class:`NoSubmissions` when there is no student, :class:`NoExercises` when the course has no
    exercise and :class:`~utils.grading.lms.RosterError` for an unusable roster, before grading anyone.
    """
    with using_language(lang):  # the grader's threads judge in this process: every diagnosis is in ``lang``
        return _grade(submissions_dir, out_dir, jobs=jobs, timeout=timeout, seed=seed, course_root=course_root,
                      registry=registry, memory_mb=memory_mb, progress=progress, layout=layout, roster=roster,
                      lms_format=lms_format, columns=columns, feedback=feedback, chapters=chapters,
                      allow_weak_isolation=allow_weak_isolation, overwrite=overwrite, refuse_empty=refuse_empty,
                      zero_missing=zero_missing, keep_existing=keep_existing, budget=budget, budget_from=budget_from,
                      wall=wall)


def _grade(submissions_dir, out_dir, *, jobs, timeout, seed, course_root, registry, memory_mb, progress, layout,
           roster, lms_format, columns, feedback, chapters, allow_weak_isolation, overwrite, refuse_empty,
           zero_missing, keep_existing, budget, budget_from, wall) -> dict[str, Any]:
    started = time.perf_counter()
    deadline = math.inf if budget is None else \
        (time.monotonic() if budget_from is None else budget_from) + _seconds("budget", budget)
    if wall is not None:
        _seconds("wall", wall)
    from utils.exercises.credit import check_mode

    check_mode(feedback)
    if overwrite is False:
        check_out(out_dir)
    if allow_weak_isolation is not None:
        sandbox.allow_weak_isolation(allow_weak_isolation)
    submissions = Path(submissions_dir)
    if not submissions.is_dir():
        unzip = (f": a zip file (a Canvas download?); unzip it into an empty folder of its own, `mkdir DIR && unzip "
                 f"-q {submissions} -d DIR`, and grade DIR" if submissions.suffix.lower() == ".zip" else "")
        raise NoSubmissions(f"no student folders found in {submissions}: it is not a folder{unzip}")
    sandbox.isolation()  # a weak sandbox is refused here, before any submission is read
    found = intake.collect(submissions, layout, read=False)  # each student's notebooks are read in their unit
    _report_intake(found, layout)
    if not found.students:
        raise NoSubmissions(f"no student folders found in {submissions} (nor notebooks or zips in --layout "
                            f"{found.layout})")
    the_roster = lms.read_roster(roster) if roster is not None else None
    if lms_format == "canvas":
        lms.check_identities(the_roster, found.canvas_ids)
    if registry is None:
        from utils.exercises import all_exercises

        registry = all_exercises()
    root = Path(course_root) if course_root is not None else default_course()
    the_plan = engine.plan(found, root, registry, None if chapters is None else frozenset(chapters))
    if not the_plan.exercises:
        where = f"{root / 'solutions'}" if root is not None else "the exercise list shipped with the package"
        raise NoExercises(f"found no exercises to grade in {where}; pass --course with the folder of a course "
                          f"checkout (the one holding solutions/), or reinstall the course package")
    previous = None
    if lms_format == "canvas":  # an unusable roster stops us before grading, and before anything is written
        layout, _left_out, _new = lms.canvas_columns(the_plan.exercises, columns, the_roster)
        _refuse_points(lms.points_mismatches(layout, the_roster), the_roster)
        previous = previous_canvas(out_dir, keep_existing, roster)  # what was imported last time, before it is replaced
    settings = engine.Settings(timeout=float(timeout), seed=int(seed), memory_mb=int(memory_mb),
                               hidden=(str(submissions.resolve()), str(Path(out_dir).resolve())),
                               feedback=feedback, wall=None if wall is None else float(wall), deadline=deadline,
                               budget=None if budget is None else float(budget))
    jobs = jobs or default_jobs()
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(the_plan.students), desc="grading", unit="student", file=sys.stderr)
    try:
        results = engine.run_plan(the_plan, settings, jobs, progress=bar.update if bar else None)
    finally:
        if bar is not None:
            bar.close()
    ran_until, rows = time.monotonic(), results.rows
    if refuse_empty and rows and all(r.status == Status.MISSING for r in rows):
        raise NothingToGrade(_nothing_to_grade(the_plan, chapters, out_dir))
    unplaced = [*found.unplaced, *results.unplaced]
    _report_reading(results, len(unplaced))
    ids = [e.id for e in the_plan.exercises]
    report.write_all(Path(out_dir), [*rows, *unplaced_rows(unplaced)], the_plan.students, ids, found.canvas_ids)
    sheet = None
    if lms_format == "canvas":
        sheet = lms.canvas_csv(rows, the_plan.students, the_plan.exercises, roster=the_roster,
                               canvas_ids=found.canvas_ids, columns=columns, zero_missing=zero_missing,
                               keep_existing=keep_existing, previous=previous.value if previous else None)
        write_canvas(out_dir, sheet, previous)  # Points Possible were checked before grading
        _report_canvas(sheet)
    elif overwrite:
        for name in ("canvas.csv", lms_previous.GRADED):  # the earlier run's, not this one's
            (Path(out_dir) / name).unlink(missing_ok=True)
    totals = {s: sum(r.points for r in rows if r.student == s) for s in the_plan.students}
    return {
        "students": the_plan.students, "exercises": ids, "rows": rows, "totals": totals,
        "max_total": sum(e.points for e in the_plan.exercises), "seconds": time.perf_counter() - started,
        "isolation": sandbox.isolation().level, "seed": settings.seed, "units": results.ran,
        "budget_spent": ran_until >= deadline and any(r.status == Status.TIMEOUT for r in rows),
        "isolation_summary": sandbox.isolation(check=False).summary(),
        "layout": found.layout, "layout_reason": found.reason, "unplaced": unplaced,
        "skipped": [u.line() for u in unplaced], "canvas": sheet, "notes": results.notes,
        "chapters": sorted({e.chapter for e in the_plan.exercises} - {None}),
        "elsewhere": {s.student: found for s in the_plan.submissions
                      if (found := engine.other_chapters(s, {e.chapter for e in the_plan.exercises},
                                                         the_plan.chapter_of_id))[1]},
    }


def _seconds(name: str, value: Any) -> float:
    """``value`` as a positive, finite number of seconds, else ``ValueError`` naming the argument."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
    return float(value)


def _nothing_to_grade(the_plan: engine.Plan, chapters: frozenset[int] | None, out_dir: str | Path) -> str:
    """One line: no submission holds a graded exercise, and which chapters the submissions do hold."""
    held = sorted({int(m[1]) for submission in the_plan.submissions for exercise_id in submission.cells
                   if (m := re.match(r"ch(\d+)\.", exercise_id))})
    graded = sorted({e.chapter for e in the_plan.exercises} - {None})
    what = (f"chapter{'s' if len(graded) > 1 else ''} {', '.join(map(str, graded))} (--chapters)"
            if chapters is not None else "this course")
    found = (f"exercises of chapter{'s' if len(held) > 1 else ''} {', '.join(map(str, held))} only" if held
             else "no exercise cell at all")
    who = "the submission holds" if len(the_plan.students) == 1 else f"the {len(the_plan.students)} submissions hold"
    return (f"no submission holds an exercise of {what}: {who} {found}. Nothing was written to {out_dir}; check "
            f"--chapters and the submissions folder")


def unplaced_rows(unplaced: list[intake.Unplaced]) -> list[Row]:
    """One ``results.csv`` row per unplaced entry: status ``unplaced``, the path and reason as feedback."""
    return [Row(u.student, "", 0, 0, intake.UNPLACED, f"{u.path}: {u.reason}") for u in unplaced]


def _say(text: str) -> None:
    """One line on stderr, its control characters escaped: a file name cannot forge a line."""
    print(report.console(text), file=sys.stderr)


def _report_intake(found: intake.Intake, asked: str) -> None:
    why = f" (--layout auto: {found.reason})" if asked == "auto" else ""
    _say(f"grader: reading the submissions as layout {found.layout}{why}")
    for entry in found.errors():
        _say(f"grader: error: {entry.path} is {entry.reason}")
    _list_unplaced([u for u in found.unplaced if u not in found.errors()])


def _list_unplaced(entries: list[intake.Unplaced]) -> None:
    for entry in entries[:MAX_LISTED]:
        whose = f"{entry.student}: " if entry.student and not entry.path.startswith(entry.student) else ""
        _say(f"grader: not graded: {whose}{entry.line()}")
    if len(entries) > MAX_LISTED:
        _say(f"grader: ... and {len(entries) - MAX_LISTED} more not graded")


def _report_reading(results: engine.Results, unplaced: int) -> None:
    """What reading the students' notebooks found: entries not graded, and notes (one line per notebook)."""
    _list_unplaced(results.unplaced)
    for note in results.notes[:MAX_LISTED]:
        _say(f"grader: warning: {note}")
    if len(results.notes) > MAX_LISTED:
        _say(f"grader: ... and {len(results.notes) - MAX_LISTED} more warnings")
    if unplaced:
        _say(f"grader: {report.plural(unplaced, 'entry', 'entries')} not graded, each a row with status "
             f"{intake.UNPLACED} in results.csv")


def _no_grade(sheet: lms.CanvasSheet, row: bool = False) -> str:
    """What canvas.csv holds where this run has no grade: for a whole student (``row``) or one cell."""
    if sheet.zero_missing:
        if not sheet.from_roster:
            return "--zero-missing: 0 in each (no --roster says what Canvas holds there)"
        return "--zero-missing: 0 where the roster's cell is empty; a cell holding anything, a grade or EX, keeps it"
    if row:
        return "no row in canvas.csv, so Canvas keeps what it has; --zero-missing writes 0 where their cell is empty"
    if not sheet.from_roster:
        return ("no --roster, so each is EMPTY and importing canvas.csv removes a grade Canvas holds there; pass "
                "Canvas's gradebook export as --roster to keep it, or --zero-missing to write 0")
    return ("each cell holds the roster's current grade, since an empty cell would remove it on import; "
            "--zero-missing writes 0")


def _refuse_points(mismatched: list[tuple[str, str, str]], roster: lms.Roster | None) -> None:
    """One line per column whose Points Possible in the roster differ from the course's, then
    :class:`~utils.grading.lms.RosterError`: full marks would read as part marks in Canvas, which does not
    change an existing assignment's points on import."""
    if not mismatched:
        return
    for column, theirs, ours in mismatched:
        _say(f"grader: canvas.csv NOT written: the roster's Points Possible for {column} is {theirs or '(empty)'}, "
             f"but the course gives it {ours} points; set the assignment's points in Canvas to {ours}, export the "
             f"gradebook again and pass it as --roster")
    raise lms.RosterError(
        f"the roster {roster.path if roster else ''} gives {report.plural(len(mismatched), 'graded column')} other "
        f"points than the course ({', '.join(column for column, _theirs, _ours in mismatched)}), and Canvas keeps "
        f"an assignment's points on import, so full marks would read as part marks: nothing was graded or written")


def write_canvas(out_dir: str | Path, sheet: lms.CanvasSheet, previous: lms_previous.Previous | None) -> None:
    """``canvas.csv``, its record ``canvas.graded.csv`` and, when ``previous`` was read, the previous
    ``canvas.csv`` kept as ``canvas.previous.csv`` (:mod:`~utils.grading.lms_previous`)."""
    if previous is not None:  # kept beside the new one: what the last import wrote
        report.atomic_write(Path(out_dir) / lms_previous.PREVIOUS, previous.data.decode("utf-8"))
    report.atomic_write(Path(out_dir) / "canvas.csv", sheet.text)
    report.atomic_write(Path(out_dir) / lms_previous.GRADED, lms_previous.graded_text(sheet.given))


def previous_canvas(out_dir: str | Path, keep_existing: bool, roster: str | Path | None = None
                  ) -> lms_previous.Previous | None:
    """The previous run's ``canvas.csv`` in ``out_dir`` (:mod:`~utils.grading.lms_previous`), or None; one
    that cannot be read is named on stderr and ignored. A ``roster`` saved before it is refused with
    :class:`~utils.grading.lms.RosterError`, before anything is graded or written: its canvas.csv would undo the
    last import (W15), and a run that only warned still replaced the record of that import (W23)."""
    previous, why = lms_previous.read_previous(out_dir)
    if previous is not None and roster is not None and Path(roster).stat().st_mtime < previous.path.stat().st_mtime:
        raise lms.RosterError(
            f"the roster {roster} was saved before the previous canvas.csv in {out_dir} was written, so it may be an "
            f"export from before your last import, and its canvas.csv would undo the grades that import set; nothing "
            f"was graded or written. Export the gradebook again (Grades > Export) and run again (if you never "
            f"imported that canvas.csv, grade into a new --out instead)")
    if why:
        _say(f"grader: canvas.csv: the previous run's canvas.csv is IGNORED: {why}; so --keep-existing updates no "
             f"grade this time (each cell that differs keeps the roster's value and is listed)" if keep_existing
             else f"grader: canvas.csv: the previous run's canvas.csv is ignored (not kept as canvas.previous.csv): "
                  f"{why}")
    elif previous is not None:
        _say(f"grader: canvas.csv: read the previous run's canvas.csv (what was imported last time): kept as "
             f"{Path(out_dir) / lms_previous.PREVIOUS}")
    return previous


def _report_canvas(sheet: lms.CanvasSheet) -> None:
    for student, why in sheet.unmatched:
        _say(f"grader: canvas.csv: {student!r} is left out: {why}")
    if sheet.absent:
        _say(f"grader: canvas.csv: {report.plural(len(sheet.absent), 'roster student')} without a notebook to grade "
             f"({_no_grade(sheet, row=True)}): {'; '.join(sheet.absent[:MAX_LISTED])}")  # names hold commas
    if sheet.elsewhere:  # the absent are listed above: each student in one list only
        who = "roster student" if sheet.from_roster else "student"
        _say(f"grader: canvas.csv: {report.plural(len(sheet.elsewhere), who)} who handed in only another chapter "
             f"(none of the graded exercises), left out of canvas.csv so that Canvas keeps what it has, edits made "
             f"there since the export too: {'; '.join(sheet.elsewhere)}")
    if sheet.test_student:
        _say(f"grader: canvas.csv: Canvas's Test Student (the student view, not a student) is left out: "
             f"{'; '.join(sheet.test_student)}")
    if sheet.kept:
        _say(f"grader: canvas.csv: {report.plural(len(sheet.kept), 'grade cell')} where the submission holds none "
             f"of the column's exercises ({_no_grade(sheet)}): "
             f"{'; '.join(f'{student} ({column})' for student, column in sheet.kept[:MAX_LISTED])}")
    if sheet.changed:
        one = len(sheet.changed) == 1
        what = ("kept: canvas.csv carries the roster's value, --keep-existing" if sheet.keep_existing else
                f"canvas.csv carries this run's grade, so importing it replaces {'it' if one else 'them'}; "
                f"--keep-existing keeps the roster's")
        _say(f"grader: canvas.csv: {report.plural(len(sheet.changed), 'grade')} Canvas already holds "
             f"differ{'s' if one else ''} from this run's ({what}):")
        for student, column, held, grade in sheet.changed:  # every one: a grade changed is never silent
            _say(f"grader: canvas.csv:   {student}, {column}: {held} → {grade}")
    if sheet.updated:
        _say(f"grader: canvas.csv: updated {report.plural(len(sheet.updated), 'grade')} that Canvas holds as the "
             f"previous canvas.csv gave it (unchanged in Canvas since the last import: a resubmission or a late "
             f"submission), so canvas.csv carries this run's grade there:")
        for student, column, held, grade in sheet.updated:
            _say(f"grader: canvas.csv:   {student}, {column}: {held} → {grade}")
    if sheet.left_out:
        _say(f"grader: canvas.csv: left out {report.plural(len(sheet.left_out), 'graded column')} that the roster "
             f"has no Canvas assignment for: {', '.join(sheet.left_out)}; create the assignment in Canvas, export the "
             f"gradebook again and pass it as --roster")
    if sheet.new:
        _say(f"grader: canvas.csv: the roster has no Canvas assignment ids, so importing canvas.csv makes "
             f"{report.plural(len(sheet.new), 'new assignment')} ({', '.join(sheet.new)}); to update existing "
             f"assignments instead, pass Canvas's own gradebook export (Grades > Export) as --roster")
