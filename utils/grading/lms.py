"""Grades for an LMS: a roster that maps submissions to LMS identities, and Canvas's gradebook CSV.

**The roster** (``--roster roster.csv``) is a CSV with a header row. Canvas's own gradebook export
(Grades > Export) works as it is: its columns ``Student``, ``ID``, ``SIS User ID``, ``SIS Login ID``
and ``Section`` are the identity columns, and its ``Points Possible`` and ``Manual Posting`` rows are skipped
(as is any row whose identity columns are all empty: it names no student). Any other roster
needs at least one of these columns (names match ignoring case and surrounding spaces). A submission
is matched to a row, in this order:

1. by a ``submission`` column, when the roster has one: its value is the submission's name exactly (the
   folder, the zip or notebook name without its suffix, or the ``<name>`` part of a Canvas file name);
2. in the Canvas layout, by ``ID``, the Canvas user id in the file name;
3. by ``ID``, then ``SIS Login ID``, then ``SIS User ID``, equal to the submission's name.

The first rule that finds exactly one row decides; a name two rows share is reported as ambiguous.

**The Canvas CSV** (``--format canvas``, written to ``OUT/canvas.csv``) follows the layout Canvas
exports and imports: the identity columns ``Student, ID, SIS User ID, SIS Login ID, Section`` first
(from the roster; without one, in the Canvas layout, ``Student`` is the name in the file names and
``ID`` the user id), then one column per graded chapter (``--columns chapter``, the default: the sum of
its exercises, named after the notebook without ``.ipynb``) or per graded exercise (``--columns
exercise``, named by its id). Only what this run graded gets a column (``--chapters``): importing the
file never touches another assignment. The second row is ``Points Possible`` with each column's maximum;
points are decimals (``2.5``).

Canvas matches a column to an assignment by the ``(<assignment id>)`` at the end of its header, and
makes every column without one into a new assignment. So when the roster is Canvas's own export and has
assignment columns, each column is headed exactly as the roster heads the assignment of the same name
(compared ignoring case, spaces, ``_`` and ``-``), and a graded column with no such assignment is left
out and reported (create the assignment in Canvas, export the gradebook again); when none has one, or
two assignments are named like one graded column (``01_toy (11)`` and ``01 Toy (12)``), the grader refuses
before grading, naming them. When the roster has no assignment column at all (or there is no roster),
the columns are headed by their names and Canvas will offer to create one assignment per column on
import (:attr:`CanvasSheet.new`, printed): right for a first import, wrong for a second, so import the
later ones with the export that has the ids.

A row is written only for a student this run gives at least one grade (or, with ``zero_missing``, a 0),
in roster order; a submission without a roster row is left out and reported. Canvas's import leaves a
student who is not in the file as they are, so a student with nothing graded (no submission, or a
submission holding none of the graded exercises) gets no row at all (:attr:`CanvasSheet.untouched`;
stderr names each once: :attr:`CanvasSheet.absent` without a submission, :attr:`CanvasSheet.elsewhere` who
handed in only another chapter): an edit made in Canvas since the roster was exported survives the import. Canvas
reads an empty cell against a grade it holds as "remove this grade", so within a row ``canvas.csv``
never leaves a cell empty where the grader has no grade for it: a column whose exercises the submission
holds none of (every one ``missing``: a student who handed in chapter 1 only, graded for chapters 1 and
2) gets the roster's own value of that cell (:attr:`CanvasSheet.kept`, printed), and a cell empty in the
roster stays empty (without a roster every such cell is empty: :attr:`CanvasSheet.from_roster`).
``zero_missing`` (``--zero-missing``, for the run after the deadline) writes 0 into those cells that are
empty in the roster, for roster students without a submission too; a cell holding anything (a grade from
an earlier import, Canvas's excused mark ``EX``, a late penalty entered by hand) keeps it.
Canvas's Test Student (its student view, ``Student, Test`` in the export: :func:`is_test_student`) is not a
student: its row is never written, not even a 0 (:attr:`CanvasSheet.test_student`, printed).
Where the roster's cell holds a grade other than this run's (a rerun after a regrade, a hand-entered
``4.00`` that the grader makes ``5``, an ``EX`` for a student who handed in), ``canvas.csv`` carries this
run's grade and :attr:`CanvasSheet.changed` lists the cell (printed, each one); ``keep_existing``
(``--keep-existing``) writes the roster's value there instead, unless the cell still holds the grade the
previous run's ``canvas.csv`` gave it (``previous``, :mod:`utils.grading.lms_previous`): not edited in Canvas
since the last import, it gets this run's grade (a resubmission), listed apart (:attr:`CanvasSheet.updated`).
When the roster's ``Points Possible`` row gives a graded column other points than the course does
(:func:`points_mismatches`, :attr:`CanvasSheet.mismatched`), the grader refuses before grading anyone and
writes nothing (Canvas does not change an existing assignment's points on import, so full marks would read as
part marks).
The display columns (``Student``, ``Section``) are escaped against formula injection; identity columns
are written exactly as they are, so that Canvas can match them.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from utils.exercises.common import Status
from utils.exercises.definition import points_text
from utils.grading import files
from utils.grading.report import escape_cell

IDENTITY = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
MATCH_COLUMNS = ("ID", "SIS Login ID", "SIS User ID")
COLUMNS = ("chapter", "exercise")
MAX_ROSTER_BYTES = 20 * 2**20
_ASSIGNMENT = re.compile(r"^(?P<name>.*\S)\s+\((?P<id>\d+)\)$")


class RosterError(ValueError):
    """A roster that cannot be used; ``str()`` is one sentence naming the file and the problem."""


@dataclass
class Roster:
    """The rows of a roster (each a mapping from its canonical column name to its value), in file order."""

    path: Path
    rows: list[dict[str, str]]
    assignment_headers: dict[str, str] = field(default_factory=dict)  # "ch2.causal_mask" -> "ch2.causal_mask (17)"
    grades: list[dict[str, str]] = field(default_factory=list)  # per row: assignment header -> its cell, as exported
    points_possible: dict[str, str] = field(default_factory=dict)  # assignment header -> its Points Possible cell
    assignments: list[str] = field(default_factory=list)  # every assignment header, in file order, alike ones too

    def match(self, student: str, canvas_id: str | None = None) -> tuple[int | None, str]:
        """The index of ``student``'s row and ``""``, or ``None`` and why no row matches."""
        rules: list[tuple[str, str]] = []
        if any("submission" in row for row in self.rows):
            rules.append(("submission", student))
        if canvas_id is not None:
            rules.append(("ID", canvas_id))
        rules += [(column, student) for column in MATCH_COLUMNS]
        for column, value in rules:
            hits = [i for i, row in enumerate(self.rows) if row.get(column, "") == value and value]
            if len(hits) == 1:
                return hits[0], ""
            if len(hits) > 1:
                return None, f"rows {', '.join(str(i + 2) for i in hits)} of the roster all have {column} {value!r}"
        return None, "no roster row has this submission's name" + (" or Canvas user id" if canvas_id else "")


def read_roster(path: str | Path) -> Roster:
    """Read a roster CSV (see the module's docstring). Raises :class:`RosterError` saying what is wrong."""
    path = Path(path)
    try:
        data = files.read_regular(path, MAX_ROSTER_BYTES)
    except files.Refused as exc:
        raise RosterError(f"the roster {path} {exc}") from None
    try:
        text = data.decode("utf-8-sig")  # Excel writes a byte-order mark
    except UnicodeDecodeError:
        raise RosterError(f"the roster {path} is not UTF-8 text; save it as CSV UTF-8") from None
    table = list(csv.reader(io.StringIO(text)))
    if not table:
        raise RosterError(f"the roster {path} is empty")
    canonical = {name.lower(): name for name in (*IDENTITY, "submission")}
    header = [canonical.get(cell.strip().lower(), cell.strip()) for cell in table[0]]
    if not set(header) & {*IDENTITY, "submission"}:
        raise RosterError(f"the roster {path} has none of the columns {', '.join(IDENTITY)} or submission "
                          f"in its first row")
    headers = {m["name"]: cell for cell in header if (m := _ASSIGNMENT.match(cell))}
    assignments = {cell for cell in header if _ASSIGNMENT.match(cell)}  # two alike are both kept: see canvas_columns
    rows, grades, possible = [], [], {}
    for line in table[1:]:
        if line and line[0].strip() == "Points Possible":
            possible = {name: value.strip() for name, value in zip(header, line) if name in assignments}
            continue
        named = [value.strip() for name, value in zip(header, line) if name in IDENTITY or name == "submission"]
        if not any(named) or line[0].strip().lower() == "manual posting":
            continue  # Canvas's "Manual Posting" row (assignments posted by hand), or any row naming nobody
        rows.append({name: value.strip() for name, value in zip(header, line)
                     if name in IDENTITY or name == "submission"})
        grades.append({name: value.strip() for name, value in zip(header, line) if name in assignments})
    return Roster(path, rows, headers, grades, possible, [cell for cell in header if cell in assignments])


@dataclass
class CanvasSheet:
    """``canvas.csv``'s text and what did not fit: submissions without a row, students without a submission,
    graded columns left out (no assignment id in the roster) and columns Canvas will make new assignments of."""

    text: str
    unmatched: list[tuple[str, str]]  # (submission, why)
    absent: list[str]  # roster students (their Student or ID) with no submission
    left_out: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    kept: list[tuple[str, str]] = field(default_factory=list)  # (student, column): none of its exercises handed in
    mismatched: list[tuple[str, str, str]] = field(default_factory=list)  # (column, roster's points, course's points)
    zero_missing: bool = False  # 0 written where there is no grade and the roster's cell is empty
    changed: list[tuple[str, str, str, str]] = field(default_factory=list)  # (student, column, roster's, this run's)
    keep_existing: bool = False  # the roster's value written where it differs from this run's grade
    untouched: list[str] = field(default_factory=list)  # students given no row: nothing of theirs graded or zeroed
    from_roster: bool = True  # False: no roster, so a cell without a grade is empty (and clears Canvas's)
    test_student: list[str] = field(default_factory=list)  # Canvas's Test Student rows, never written
    elsewhere: list[str] = field(default_factory=list)  # untouched, though they handed in (another chapter only)
    updated: list[tuple[str, str, str, str]] = field(default_factory=list)  # like changed: unedited since last import
    given: list[tuple[str, str, str, str]] = field(default_factory=list)  # (ID, Student, column, grade) graded now


def check_identities(roster: Roster | None, canvas_ids: Mapping[str, str]) -> None:
    """Raise :class:`RosterError` when neither a roster nor Canvas file names say who the students are."""
    if roster is None and not canvas_ids:
        raise RosterError("--format canvas needs --roster (a CSV with the students' Canvas identities), unless the "
                          "submissions are a Canvas download, whose file names carry the Canvas user ids")


def grade_columns(exercises: Sequence, columns: str) -> list[tuple[str, list[str], int]]:
    """``(header, exercise ids, max points)`` per gradebook column, in course order."""
    if columns not in COLUMNS:
        raise ValueError(f"columns must be one of {', '.join(COLUMNS)}, got {columns!r}")
    if columns == "exercise":
        return [(e.id, [e.id], e.points) for e in exercises]
    chapters: dict[str, tuple[list[str], int]] = {}
    for e in exercises:
        ids, points = chapters.get(Path(e.notebook).stem, ([], 0))
        chapters[Path(e.notebook).stem] = ([*ids, e.id], points + e.points)
    return [(name, ids, points) for name, (ids, points) in chapters.items()]


def _key(name: str) -> str:
    return " ".join(re.sub(r"[\s_\-]+", " ", name).lower().split())


def canvas_columns(exercises: Sequence, columns: str, roster: Roster | None
                   ) -> tuple[list[tuple[str, list[str], int]], list[str], list[str]]:
    """``(header, exercise ids, max points)`` per column ``canvas.csv`` writes, the graded columns left
    out (the roster has assignment ids, none for them) and the columns Canvas will create (it has none at
    all). Raises :class:`RosterError` when the roster has assignment ids but none for a graded column, or
    two assignments named like one graded column (canvas.csv could update only one of them)."""
    layout = grade_columns(exercises, columns)
    if roster is None or not roster.assignment_headers:
        return layout, [], [name for name, _ids, _max in layout]
    alike: dict[str, list[str]] = {}
    for header in roster.assignments or roster.assignment_headers.values():
        alike.setdefault(_key(_ASSIGNMENT.match(header)["name"]), []).append(header)
    for name, _ids, _max in layout:
        if len(found := alike.get(_key(name), [])) > 1:
            raise RosterError(
                f"the roster {roster.path} has {len(found)} Canvas assignments named like the graded column {name} "
                f"({' and '.join(repr(h) for h in found)}; names are compared ignoring case, spaces, _ and -), so "
                f"canvas.csv cannot tell which one to update; rename or delete the others in Canvas, export the "
                f"gradebook again and pass it as --roster")
    by_key = {key: found[0] for key, found in alike.items()}
    kept = [(by_key[_key(name)], ids, maximum) for name, ids, maximum in layout if _key(name) in by_key]
    left_out = [name for name, _ids, _max in layout if _key(name) not in by_key]
    if not kept:
        raise RosterError(
            f"the roster {roster.path} has Canvas assignments ({_few(roster.assignment_headers.values())}) but none "
            f"named like a graded column ({_few(left_out)}); name each Canvas assignment after its chapter notebook "
            f"(--columns chapter) or exercise id (--columns exercise) and export the gradebook again")
    return kept, left_out, []


def _few(names: Iterable[str], most: int = 5) -> str:
    names = list(names)
    return ", ".join(names[:most]) + (", ..." if len(names) > most else "")


def points_cell(value: object) -> str:
    """Points as a decimal, as Canvas reads them: ``2.5``, never ``5/2``.

    >>> from fractions import Fraction
    >>> points_cell(Fraction(5, 2)), points_cell(3), points_cell(Fraction(1, 3))
    ('2.5', '3', '0.3333')
    """
    text = points_text(value)
    if "/" in text:  # not in hundredths: never a grade, but never a fraction either
        text = f"{float(Fraction(text)):.4f}".rstrip("0").rstrip(".")
    return text


def canvas_csv(rows: Sequence, students: Sequence[str], exercises: Sequence, *, roster: Roster | None = None,
               canvas_ids: Mapping[str, str] | None = None, columns: str = "chapter",
               zero_missing: bool = False, keep_existing: bool = False,
               previous: Callable[[Mapping[str, str], str], str | None] | None = None) -> CanvasSheet:
    """The Canvas gradebook CSV for graded ``rows`` (see the module's docstring for every rule).

    Args:
        rows: the grader's rows (``student``, ``exercise``, ``points``).
        students: the graded students, in order.
        exercises: the course's exercises (``id``, ``points``, ``notebook``), in course order.
        roster: the LMS identities; ``None`` needs ``canvas_ids`` (the Canvas layout).
        canvas_ids: student -> Canvas user id, from Canvas file names.
        columns: ``"chapter"`` or ``"exercise"``. Default: ``"chapter"``.
        zero_missing: write 0 where a roster student has no graded submission for a column (no submission,
            or one holding none of the column's exercises) and the roster's cell is empty; a cell holding
            anything (a grade, ``EX``) keeps it. Default: False: a student with nothing graded gets no row,
            and in a written row the roster's value of that cell is copied (an empty cell would remove the
            grade Canvas holds on import).
        keep_existing: where the roster's cell holds a grade (or ``EX``) other than this run's, write the
            roster's. Default: False: write this run's grade. Either way the sheet's ``changed`` lists them.
        previous: (roster row, column) -> the grade the previous ``canvas.csv`` gave there, or None
            (:meth:`utils.grading.lms_previous.Previous.value`). With ``keep_existing``, a roster cell that
            still holds it was not edited in Canvas since: this run's grade is written and ``updated`` lists it.
    """
    canvas_ids = dict(canvas_ids or {})
    check_identities(roster, canvas_ids)
    points = {(r.student, r.exercise): r.points for r in rows}
    missing = {(r.student, r.exercise) for r in rows if r.status == Status.MISSING}
    kept: list[tuple[str, str]] = []
    changed: list[tuple[str, str, str, str]] = []
    updated: list[tuple[str, str, str, str]] = []
    given: list[tuple[str, str, str, str]] = []
    layout, left_out, new = canvas_columns(exercises, columns, roster)
    headers = [header for header, _ids, _max in layout]
    if roster is None:
        identities = [{"Student": s, "ID": canvas_ids.get(s, "")} for s in students]
        owner: dict[int, str] = {i: s for i, s in enumerate(students)}
        unmatched: list[tuple[str, str]] = []
    else:
        identities, owner, unmatched = roster.rows, {}, []
        for student in students:
            index, why = roster.match(student, canvas_ids.get(student))
            if index is None:
                unmatched.append((student, why))
            elif index in owner:
                unmatched.append((student, f"the roster row of {student!r} is already matched to {owner[index]!r}"))
            else:
                owner[index] = student
    table: list[list[object]] = [[*IDENTITY, *headers], ["Points Possible", "", "", "", "",
                                                          *(points_cell(maximum) for _n, _i, maximum in layout)]]
    absent, untouched, elsewhere = [], [], []
    test_student = []
    for index, identity in enumerate(identities):
        if roster is not None and is_test_student(identity):  # Canvas's student view: no grade, not even a 0
            test_student.append(identity.get("Student", ""))
            continue
        cells: list[object] = [escape_cell(identity.get("Student", "")), identity.get("ID", ""),
                               identity.get("SIS User ID", ""), identity.get("SIS Login ID", ""),
                               escape_cell(identity.get("Section", ""))]
        student, written, mine, ours = owner.get(index), False, [], []  # written: a grade of this run (or a 0)
        now = roster.grades[index] if roster is not None and index < len(roster.grades) else {}
        if student is None:
            absent.append(identity.get("Student") or identity.get("ID") or f"row {index + 2}")
        for name, ids, _max in layout:
            if student is not None and not all((student, e) in missing for e in ids):
                own = grade = points_cell(sum(points.get((student, e), 0) for e in ids))
                held = now.get(name, "")
                if held and not _same(held, grade):  # Canvas holds another grade: a regrade, never a silent one
                    cell = (identity.get("Student") or identity.get("ID") or student, name, held, grade)
                    before = previous(identity, name) if keep_existing and previous is not None else None
                    if before is not None and _same(held, before):  # the last import's grade, not edited since
                        updated.append(cell)
                    else:
                        changed.append(cell)
                        grade = held if keep_existing else grade
                if grade == own:
                    ours.append((name, grade))  # the grader's own grade: canvas.graded.csv records it
                cells.append(grade)
                written = True
                continue
            if student is not None:
                mine.append((_who(identity, student) if roster is not None else student, name))
            # no grade here: an empty cell would remove the grade Canvas holds, so the roster's is copied; a cell
            # holding anything (a grade, EX, a late penalty entered by hand) keeps it, even with zero_missing
            cells.append(now.get(name, "") or ("0" if zero_missing else ""))
            written = written or zero_missing and not now.get(name, "")
            if zero_missing and not now.get(name, ""):
                ours.append((name, "0"))
            before = previous(identity, name) if previous is not None else None
            if before is not None and _same(now.get(name, ""), before):  # still the grader's own (W13: a 0 from
                given.append((identity.get("ID", ""), str(cells[0]), name, before))  # --zero-missing, then late work)
        if written:
            table.append(cells)
            kept += mine
            given += [(identity.get("ID", ""), str(cells[0]), name, grade) for name, grade in ours]
        else:  # no row: Canvas's import leaves a student not in the file as it is, edits made since the export too
            untouched.append(_who(identity, student or f"row {index + 2}"))
            if student is not None:  # handed in, but none of the graded exercises: another chapter only
                elsewhere.append(untouched[-1])
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(table)
    return CanvasSheet(buffer.getvalue(), unmatched, absent, left_out, new, kept, points_mismatches(layout, roster),
                       zero_missing, changed, keep_existing, untouched, roster is not None, test_student, elsewhere,
                       updated, given)


def is_test_student(identity: Mapping[str, str]) -> bool:
    """Whether a roster row is Canvas's Test Student, the student view every course has (exported as
    ``Student, Test`` or ``Test Student``), not a student.

    >>> is_test_student({"Student": " student,  TEST "}), is_test_student({"Student": "Test, Anna"})
    (True, False)
    """
    name = " ".join(identity.get("Student", "").replace(",", ", ").lower().split())
    return name in ("student, test", "test student")


def _who(identity: Mapping[str, str], fallback: str) -> str:
    """A roster student as the instructor knows them: ``Davis, Dave (ddavis)``, the login or SIS id in brackets."""
    name = identity.get("Student", "")
    login = identity.get("SIS Login ID") or identity.get("SIS User ID") or identity.get("ID") or ""
    return f"{name} ({login})" if name and login and login != name else name or login or fallback


def _same(held: str, grade: str) -> bool:
    """Whether the roster's cell ``held`` is the grade ``grade`` (``4.00`` is ``4``; ``EX`` is no number)."""
    try:
        return Fraction(held) == Fraction(grade)
    except (ValueError, ZeroDivisionError):
        return False


def points_mismatches(layout: Sequence[tuple[str, list[str], int]], roster: Roster | None
                      ) -> list[tuple[str, str, str]]:
    """``(column, the roster's Points Possible, the course's points)`` for each column of ``layout`` whose
    points in the roster's ``Points Possible`` row differ from the course's (a cell empty there is not
    compared)."""
    found = []
    for header, _ids, maximum in layout:
        value = (roster.points_possible.get(header, "") if roster is not None else "").strip()
        try:
            same = not value or Fraction(value) == Fraction(maximum)
        except (ValueError, ZeroDivisionError):
            same = False
        if not same:
            found.append((header, value, points_cell(maximum)))
    return found


__all__ = ["COLUMNS", "IDENTITY", "MATCH_COLUMNS", "CanvasSheet", "Roster", "RosterError", "canvas_columns",
           "canvas_csv", "check_identities", "grade_columns", "is_test_student", "points_cell", "points_mismatches",
           "read_roster"]
