"""The grader's rows: one :class:`Row` per student × exercise, one :class:`PartRow` per named part, made
from a judged exercise (:func:`graded_row`) or from one verdict about the whole of it
(:func:`whole_exercise_parts`). Every report (``results.csv``, ``feedback/``, Canvas, nbgrader, Gradescope)
reads these.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from utils.exercises import credit
from utils.exercises.common import Status, one_line
from utils.exercises.definition import Exercise, plain_points

__all__ = ["PartRow", "Row", "graded_row", "hidden_only_parts", "whole_exercise_parts"]


@dataclass(frozen=True)
class PartRow:
    """One named part of an exercise: its credit and the reason (already in the batch's feedback mode).

    ``hidden_cases`` counts the hidden cases it ran; ``public_status`` and ``public_feedback`` say what its
    public cases alone gave (what the learner's own check shows), so that a report may show those at once
    and the credit, which the hidden cases decide too, later (Gradescope's hidden visibility).
    ``public_status`` is None when the part has no public case: nothing but its hidden cases judges it.
    ``hidden_only``: the exercise gives this part no public case at all (whatever ran), so no report shows
    anything of it before the hidden cases' results may be shown."""

    part: str
    points: int | Fraction
    max_points: int | Fraction
    status: Status
    feedback: str
    hidden_cases: int = 0
    public_status: Status | None = None
    public_feedback: str = ""
    hidden_only: bool = False


@dataclass(frozen=True)
class Row:
    """One student × exercise. ``points`` is the exact total of ``parts`` (an ``int`` when whole, else a
    :class:`~fractions.Fraction` in hundredths: :func:`~utils.exercises.definition.points_text` prints it).
    ``ran`` is False when none of the student's code for it ran because the batch's budget was spent first."""

    student: str
    exercise: str
    points: int | Fraction
    max_points: int
    status: Status
    feedback: str
    parts: tuple[PartRow, ...] = ()
    ran: bool = True


def hidden_only_parts(exercise: Exercise) -> frozenset[str]:
    """The names of ``exercise``'s parts that none of its public cases belongs to."""
    public = {exercise.part_of(case) for case in exercise.public_cases()}
    return frozenset(p.name for p in exercise.part_list() if p.name not in public)


def whole_exercise_parts(exercise: Exercise, status: Status, feedback: str) -> tuple[PartRow, ...]:
    """Every part at 0 points with one reason: a verdict about the whole exercise (missing, forbidden,
    timeout, a crash, ...)."""
    only = hidden_only_parts(exercise)
    return tuple(PartRow(p.name, 0, plain_points(p.points), status, one_line(feedback), hidden_only=p.name in only)
                 for p in exercise.part_list())


def graded_row(student: str, exercise_id: str, max_points: int, graded: credit.Graded, mode: str,
               exercise: Exercise | None = None) -> Row:
    """The row of a judged exercise, its parts' reasons in feedback ``mode``. ``exercise`` names the parts
    without a public case (:func:`hidden_only_parts`); without it, those whose run had none."""
    decided = graded.decided
    only = hidden_only_parts(exercise) if exercise is not None else \
        frozenset(p.name for p in graded.parts if decided is None and p.public[1] == 0 and p.hidden[1] > 0)
    parts = tuple(PartRow(p.name, plain_points(p.points), plain_points(p.max_points),
                          graded.status if decided is not None else p.status,
                          one_line(decided.message if decided is not None else p.reason(mode)),
                          0 if decided is not None else p.hidden[1],
                          None if p.public[1] == 0 else Status.PASSED if p.public_passed else Status.FAILED,
                          one_line(p.public_reason()) if p.public[1] else "", p.name in only)
                  for p in graded.parts)
    return Row(student, exercise_id, plain_points(graded.points), max_points, graded.status,
               one_line(graded.reason(mode)), parts)


NOT_RUN = "not run"
"""The third item of a verdict whose exercise never ran: the budget was spent before its turn."""


def unit_rows(student: str, tasks: list,
              verdicts: Mapping[int, tuple[Status, str] | tuple[Status, str, str] | Row], reason: str) -> list[Row]:
    """A row per task: its judged :class:`Row`, or a whole-exercise ``(status, reason)`` (0 points: a
    timeout, a crash, ...; ``(status, reason, NOT_RUN)``: never run, ``Row.ran`` False), or ``(error,
    reason)`` where there is neither."""
    rows = []
    for index, task in enumerate(tasks):
        verdict = verdicts.get(index, (Status.ERROR, reason))
        if isinstance(verdict, Row):
            rows.append(verdict)
            continue
        status, feedback, *never = verdict  # a third item, NOT_RUN: the budget ran out before its turn
        parts = whole_exercise_parts(task.course.exercise, status, feedback)
        rows.append(Row(student, task.course.id, 0, task.course.points, status, one_line(feedback), parts,
                        ran=NOT_RUN not in never))
    return rows
