"""Grades for an LMS: a roster that maps submissions to LMS identities, and Canvas's gradebook CSV.

**The roster** (``--roster roster.csv``) is a CSV with a header row. Canvas's own gradebook export
(Grades > Export) works as it is: its columns ``Student``, ``ID``, ``SIS User ID``, ``SIS Login ID``
and ``Section`` are the identity columns, and its ``Points Possible`` row is skipped. Any other roster
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
``ID`` the user id), then one column per chapter (``--columns chapter``, the default: the sum of its
exercises, headed by the notebook's name without ``.ipynb``) or per exercise (``--columns
exercise``, headed by its id). When the roster (a Canvas export) has a column ``<that header>
(<assignment id>)``, that exact header is used, so Canvas updates that assignment instead of creating
one. The second row is ``Points Possible`` with each column's maximum. There is one row per roster
student, in roster order; a student without a submission gets empty grade cells (Canvas then keeps the
grade it has), and a submission without a roster row is left out and reported. The display columns
(``Student``, ``Section``) are escaped against formula injection; identity columns are written exactly
as they are, so that Canvas can match them.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

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
    rows = []
    for line in table[1:]:
        if not any(cell.strip() for cell in line) or (line and line[0].strip() == "Points Possible"):
            continue
        rows.append({name: value.strip() for name, value in zip(header, line)
                     if name in IDENTITY or name == "submission"})
    headers = {m["name"]: cell for cell in header if (m := _ASSIGNMENT.match(cell))}
    return Roster(path, rows, headers)


@dataclass
class CanvasSheet:
    """``canvas.csv``'s text and what did not fit: submissions without a row, and students without a submission."""

    text: str
    unmatched: list[tuple[str, str]]  # (submission, why)
    absent: list[str]  # roster students (their Student or ID) with no submission


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


def canvas_csv(rows: Sequence, students: Sequence[str], exercises: Sequence, *, roster: Roster | None = None,
               canvas_ids: Mapping[str, str] | None = None, columns: str = "chapter") -> CanvasSheet:
    """The Canvas gradebook CSV for graded ``rows`` (see the module's docstring for every rule).

    Args:
        rows: the grader's rows (``student``, ``exercise``, ``points``).
        students: the graded students, in order.
        exercises: the course's exercises (``id``, ``points``, ``notebook``), in course order.
        roster: the LMS identities; ``None`` needs ``canvas_ids`` (the Canvas layout).
        canvas_ids: student -> Canvas user id, from Canvas file names.
        columns: ``"chapter"`` or ``"exercise"``. Default: ``"chapter"``.
    """
    canvas_ids = dict(canvas_ids or {})
    check_identities(roster, canvas_ids)
    points = {(r.student, r.exercise): r.points for r in rows}
    layout = grade_columns(exercises, columns)
    headers = [roster.assignment_headers.get(name, name) if roster else name for name, _ids, _max in layout]
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
                                                          *(maximum for _n, _i, maximum in layout)]]
    absent = []
    for index, identity in enumerate(identities):
        cells: list[object] = [escape_cell(identity.get("Student", "")), identity.get("ID", ""),
                               identity.get("SIS User ID", ""), identity.get("SIS Login ID", ""),
                               escape_cell(identity.get("Section", ""))]
        student = owner.get(index)
        if student is None:
            absent.append(identity.get("Student") or identity.get("ID") or f"row {index + 2}")
            cells += [""] * len(layout)
        else:
            cells += [sum(points.get((student, e), 0) for e in ids) for _name, ids, _max in layout]
        table.append(cells)
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(table)
    return CanvasSheet(buffer.getvalue(), unmatched, absent)


__all__ = ["COLUMNS", "IDENTITY", "MATCH_COLUMNS", "CanvasSheet", "Roster", "RosterError", "canvas_csv",
           "check_identities",
           "grade_columns", "read_roster"]
