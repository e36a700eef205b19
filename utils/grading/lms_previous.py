"""The previous run's ``canvas.csv``: what the instructor imported last time, for ``--keep-existing``.

A rerun (late work, resubmissions) meets a roster whose cells may differ from this run's grade for two
reasons that the roster alone cannot tell apart: the grader's own grade from the last import (a student
who resubmitted since: update it) or a grade changed in Canvas by hand (a late penalty: keep it). A rerun
with ``--overwrite`` into the same ``--out`` reads the ``canvas.csv`` there first (:func:`read_previous`)
and keeps its bytes as ``canvas.previous.csv``. Under ``keep_existing``, a roster cell that still holds
the grade the grader gave it in the previous ``canvas.csv`` (:meth:`Previous.value`; the student matched by
Canvas ``ID``, else by ``Student``; numbers compared as numbers, ``4.00`` is ``4``) was not edited in
Canvas since, so this run's grade is written there (:attr:`~utils.grading.lms.CanvasSheet.updated`);
any other cell keeps the roster's value, as before.

``canvas.csv`` also carries cells that are not the grader's grade (the roster's value kept under
``--keep-existing``, or copied where the student handed in none of a column's exercises), and an
instructor may edit it before importing. So every canvas run also writes ``canvas.graded.csv``
(:func:`graded_text`): one line per cell that holds this run's own grade (or ``--zero-missing``'s 0), and
per cell of an earlier record that the roster still holds as given (a student this run writes no row for
keeps the record: W13's late work after a ``--zero-missing`` 0, one run later). Only a previous cell that
this record confirms is the grader's counts; a hand edit kept on one run is kept on every later one. (A
``canvas.csv`` without the record, from an older grader, counts as it is.) The record's header names no
Canvas identity column, so importing it by mistake matches no student.

A previous file that cannot be read is reported and ignored (:func:`read_previous` returns why): nothing
is updated then, which is what ``--keep-existing`` did before.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from utils.grading import files
from utils.grading.report import escape_cell

CANVAS = "canvas.csv"
PREVIOUS = "canvas.previous.csv"
GRADED = "canvas.graded.csv"
GRADED_HEADER = ("canvas user id", "student name", "column", "grade given by the grader")
MAX_BYTES = 20 * 2**20
_IDENTITY = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")


@dataclass
class Previous:
    """The previous ``canvas.csv`` as read: its bytes, and per student the cells the grader gave."""

    path: Path
    data: bytes
    by_id: dict[str, dict[str, str]] = field(default_factory=dict)
    by_name: dict[str, dict[str, str] | None] = field(default_factory=dict)  # None: two rows share the name

    def value(self, identity: Mapping[str, str], column: str) -> str | None:
        """The grade the previous ``canvas.csv`` gave the student of roster row ``identity`` in ``column``,
        or ``None`` when it gave none there (no such row or column, a kept or copied cell, a name shared)."""
        found = self.by_id.get(identity.get("ID", "")) if identity.get("ID") else None
        if found is None and identity.get("Student"):
            found = self.by_name.get(escape_cell(identity["Student"]))  # as canvas.csv writes the name
        return None if found is None else found.get(column)


def same_number(a: str, b: str) -> bool:
    """Whether two cells hold the same number (``4.00`` and ``4``); ``EX`` or an empty cell is none."""
    try:
        return Fraction(a.strip()) == Fraction(b.strip())
    except (ValueError, ZeroDivisionError):
        return False


def _table(data: bytes) -> list[list[str]]:
    try:
        return list(csv.reader(io.StringIO(data.decode("utf-8-sig"))))
    except UnicodeDecodeError:
        raise ValueError("is not UTF-8 text") from None
    except csv.Error as exc:
        raise ValueError(f"is not CSV ({exc})") from None


def read_previous(out_dir: str | Path) -> tuple[Previous | None, str]:
    """The previous run's ``OUT/canvas.csv`` (with ``OUT/canvas.graded.csv`` when there) and ``""``, or
    ``None`` and why it cannot be used (``""`` too when there is no ``canvas.csv``)."""
    path = Path(out_dir) / CANVAS
    if not path.exists() and not path.is_symlink():
        return None, ""
    try:
        data = files.read_regular(path, MAX_BYTES)
        table = _table(data)
    except (files.Refused, ValueError) as exc:
        return None, f"{path} {exc}"
    if len(table) < 2 or tuple(cell.strip() for cell in table[0][:5]) != _IDENTITY:
        return None, f"{path} is not a canvas.csv the grader wrote (its first row is not {', '.join(_IDENTITY)}, ...)"
    given = _given(Path(out_dir) / GRADED)
    if isinstance(given, str):
        return None, given
    header = table[0]
    previous = Previous(path, data)
    for line in table[1:]:
        if not line or line[0].strip() == "Points Possible":
            continue
        row = dict(zip(header, line))
        student, user = row.get("Student", ""), row.get("ID", "")
        cells = {column: value for column, value in zip(header[5:], line[5:])
                 if given is None or any(same_number(value, grade) for grade in given.get((user, student, column), []))}
        if user:
            previous.by_id[user] = cells
        if student:
            previous.by_name[student] = None if student in previous.by_name else cells
    rows = (set(previous.by_id), set(previous.by_name))
    for (user, student, column), grades in (given or {}).items():  # a student canvas.csv wrote no row for
        if user and user not in rows[0]:  # (nothing graded that run) keeps what the record carried on
            previous.by_id.setdefault(user, {})[column] = grades[-1]
        elif not user and student and student not in rows[1]:
            previous.by_name.setdefault(student, {})[column] = grades[-1]
    return previous, ""


def _given(path: Path) -> dict[tuple[str, str, str], list[str]] | None | str:
    """The record ``canvas.graded.csv``: (user id, name, column) -> grades; ``None`` when there is none, or
    why it cannot be read."""
    if not path.exists() and not path.is_symlink():
        return None
    try:
        table = _table(files.read_regular(path, MAX_BYTES))
    except (files.Refused, ValueError) as exc:
        return f"{path} {exc}"
    if not table or tuple(table[0]) != GRADED_HEADER:
        return f"{path} is not the record the grader writes (its first row is not {', '.join(GRADED_HEADER)})"
    given: dict[tuple[str, str, str], list[str]] = {}
    for line in table[1:]:
        if len(line) == 4:
            given.setdefault((line[0], line[1], line[2]), []).append(line[3])
    return given


def graded_text(given: list[tuple[str, str, str, str]]) -> str:
    """``canvas.graded.csv``'s text: one line per (Canvas user id, name, column, grade) this run gave."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows([GRADED_HEADER, *given])
    return buffer.getvalue()


__all__ = ["CANVAS", "GRADED", "PREVIOUS", "Previous", "graded_text", "read_previous", "same_number"]
