"""Gradescope's ``results.json`` for one submission's grader rows: what students see, and when.

Gradescope's autograder specification decides what a student sees:

- a test's ``visibility``: ``visible`` (at once), ``after_due_date``, ``after_published`` or ``hidden``
  ("test case will never be shown to students");
- the top-level ``output`` has no visibility of its own: students read it at once;
- "If test cases are hidden, students will not be able to see their total score. Test cases with visibility
  set to ``hidden`` don't affect this, since they should only be used for tests which don't contribute
  points to the total."

So, unless the bundle's hidden visibility is ``visible`` (the instructor shows everything at once):

- every test that carries points, or says anything a run of the student's code produced, is held back
  under the hidden visibility (``after_published`` by default, or ``after_due_date``): its points depend on
  the hidden cases, and its feedback was written in a process that could read them;
- a held-back test has a companion shown at once, worth 0 points: its status and a fixed message
  (:func:`now_text`), never a diagnosis, an exception text or anything the student's code printed or
  wrote. The learner's check cell shows the public cases' diagnosis in their own notebook;
- a part that no public case checks (``hidden_only``: chapter 7's ``rotate_half_rope`` float16) has no
  companion: any status shown at once would be its hidden cases'. The top-level ``output`` names these
  tests once and says when their result shows (:func:`hidden_only_names`);
- only a verdict decided before any code ran (``missing``, ``invalid``: nothing was run) is shown at once
  with its points (0) and reason;
- the top-level ``output`` counts only the tests shown at once, and names no points;
- ``execution_time`` is left out (the spec makes it optional): code could time itself on a hidden case;
- the top-level ``score`` is the sum of the tests' scores (the spec: it "overrides total of tests if
  specified", so it says nothing the tests do not), which Gradescope keeps from students while any test
  is held back. ``hidden`` is refused as the hidden visibility (:func:`check_visibility`): tests that carry
  points under it would leave the total shown at once;
- notes for the instructor (the isolation level, why grading failed) are tests with visibility
  ``hidden`` and 0 points (:func:`instructor_test`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from utils.exercises.common import Status
from utils.i18n.messages import tr

__all__ = [
    "GRADESCOPE_VISIBILITIES",
    "HIDDEN_VISIBILITIES",
    "check_visibility",
    "gradescope_results",
    "gradescope_test",
    "hidden_only_names",
    "instructor_test",
    "now_text",
]

GRADESCOPE_VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")
"""The values Gradescope accepts for a test's ``visibility``."""
HIDDEN_VISIBILITIES = ("after_published", "after_due_date", "visible")
"""The visibilities a bundle may give the tests that carry points (``hidden`` would show their total)."""
SHOWN_BEFORE_RUNNING = (Status.MISSING, Status.INVALID)
"""Verdicts decided before any of the student's code ran: shown at once, reason and all."""


def check_visibility(value: str) -> None:
    """Refuse (``ValueError``) a hidden visibility that Gradescope does not know, or ``hidden``."""
    if value == "hidden":
        raise ValueError(
            "hidden_visibility 'hidden' would show students their total score at once: Gradescope "
            "counts tests with visibility 'hidden' in the total it shows (its specification keeps "
            "'hidden' for tests worth no points); use after_published or after_due_date"
        )
    if value not in HIDDEN_VISIBILITIES:
        raise ValueError(f"hidden_visibility must be one of {', '.join(HIDDEN_VISIBILITIES)}, got {value!r}")


def gradescope_test(row: Any, hidden_visibility: str = "after_published") -> dict[str, Any]:
    """One grader row (:class:`utils.grading.unit.Row`) as one entry of ``results.json``'s ``tests``.

    Args:
        row: has ``exercise``, ``points``, ``max_points``, ``status``, ``feedback``, and optionally
            ``part`` (a named part of the exercise) and ``hidden`` (true: held back).
        hidden_visibility: the visibility of held-back rows. Default: ``"after_published"``.

    >>> from utils.grading.unit import Row
    >>> gradescope_test(Row("ann", "ch2.causal_mask", 2, 2, Status.PASSED, "✅ causal_mask"))["status"]
    'passed'
    """
    part = getattr(row, "part", None)
    hidden = bool(getattr(row, "hidden", False))
    return {
        "name": f"{row.exercise} · {part}" if part else str(row.exercise),
        "score": float(row.points),
        "max_score": float(row.max_points),
        "status": "passed" if row.status == Status.PASSED else "failed",
        "output": f"{row.status}: {row.feedback}" if row.feedback else str(row.status),
        "visibility": hidden_visibility if hidden else "visible",
    }


def instructor_test(name: str, passed: bool, text: str) -> dict[str, Any]:
    """A note only instructors see (visibility ``hidden``, worth nothing), e.g. the isolation level."""
    return {
        "name": name,
        "score": 0.0,
        "max_score": 0.0,
        "status": "passed" if passed else "failed",
        "output": text,
        "visibility": "hidden",
    }


def now_text(status: Any, public_cases: bool, ran: bool = True) -> str:
    """The fixed message of a test shown at once (after its status): what ``status`` means, nothing the run
    produced. ``public_cases``: the status is the part's public cases' alone (else the whole exercise's).
    ``ran`` False: the submission's budget ran out before the exercise's turn, so none of it ran."""
    if not ran:
        return tr("not run: the grading time of this submission ran out before its turn")
    if public_cases:
        if status == Status.PASSED:
            return tr("every public case passes (the check cell in your notebook runs the same cases)")
        return tr("a public case fails; run this exercise's check cell in your notebook to see which and why")
    texts = {
        Status.PASSED: "",
        Status.FAILED: tr("run this exercise's check cell in your notebook to see why"),
        Status.ERROR: tr(
            "your code raised an error or could not run; run this exercise's check cell in your notebook to see it"
        ),
        Status.NOT_ATTEMPTED: tr("your function still raises NotImplementedError"),
        Status.TIMEOUT: tr("your code ran too long"),
        Status.MEMORY: tr("your code ran out of memory"),
        Status.FORBIDDEN: tr(
            "your code uses something this exercise does not allow; the check cell in your notebook names it"
        ),
    }
    return texts.get(status, str(status))


class _Entry:
    """One Gradescope test, shaped like a row for :func:`gradescope_test`."""

    def __init__(
        self, exercise: str, part: str | None, points: Any, max_points: Any, status: Any, feedback: str, hidden: bool
    ) -> None:
        self.exercise, self.part, self.points, self.max_points = exercise, part, points, max_points
        self.status, self.feedback, self.hidden = status, feedback, hidden


def _pieces(row: Any) -> list[tuple[str | None, Any]]:
    """``(part name or None, source)``: one per named part when the row has two or more, else the row."""
    parts = getattr(row, "parts", ())
    if len(parts) > 1:
        return [(part.part, part) for part in parts]
    return [(None, row)]


def _entries(row: Any, held_back: bool) -> list[Any]:
    """The tests of one row: one per named part when it has two or more (partial credit, each with its
    reason), else one. With ``held_back``, a test decided by running the student's code is held back and
    preceded by its companion shown at once (see the module docstring)."""
    parts = getattr(row, "parts", ())
    entries: list[Any] = []
    for name, source in _pieces(row):
        if not held_back or row.status in SHOWN_BEFORE_RUNNING:
            entries.append(
                _Entry(row.exercise, name, source.points, source.max_points, source.status, source.feedback, False)
            )
            continue
        part = source if name is not None else (parts[0] if parts else None)
        if getattr(part, "hidden_only", False):  # no public case: any status now would be the hidden cases'
            entries.append(
                _Entry(row.exercise, name, source.points, source.max_points, source.status, source.feedback, True)
            )
            continue
        public = getattr(part, "public_status", None)
        judged = public is not None and getattr(part, "hidden_cases", 0) > 0
        if judged:
            label = tr("{name} · public cases", name=name) if name else tr("public cases")
            entries.append(_Entry(row.exercise, label, 0, 0, public, now_text(public, True), False))
        else:
            label = tr("{name} · status", name=name) if name else tr("status")
            entries.append(_Entry(row.exercise, label, 0, 0, source.status,
                                 now_text(source.status, False, getattr(row, "ran", True)), False))
        entries.append(
            _Entry(row.exercise, name, source.points, source.max_points, source.status, source.feedback, True)
        )
    return entries


def hidden_only_names(rows: Sequence[Any]) -> list[str]:
    """The tests of ``rows`` graded on hidden cases alone (a part, or an exercise, that no public case checks)
    whose result is held back: nothing about them is shown before it."""
    names = []
    for row in rows:
        if row.status in SHOWN_BEFORE_RUNNING:
            continue
        parts = getattr(row, "parts", ())
        for name, source in _pieces(row):
            part = source if name is not None else (parts[0] if parts else None)
            if getattr(part, "hidden_only", False):
                names.append(f"{row.exercise} · {name}" if name else str(row.exercise))
    return names


def gradescope_results(
    rows: Sequence[Any],
    seconds: float,
    hidden_visibility: str = "after_published",
    output: str = "",
    instructor: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """The whole ``results.json`` for one submission's rows.

    Args:
        rows: the grader's rows for one student.
        seconds: how long grading took (``execution_time``, whole seconds, written only when nothing is
            held back).
        hidden_visibility: one of :data:`HIDDEN_VISIBILITIES`. Default: ``"after_published"``.
        output: text students read at once above the tests (e.g. files that were not graded): never
            anything the student's code produced. Default: ``""``.
        instructor: tests only instructors see (:func:`instructor_test`), appended. Default: none.

    >>> from utils.grading.unit import Row
    >>> gradescope_results([Row("ann", "ch1.f", 0, 3, Status.MISSING, "no cell")], 2.4)["score"]
    0.0
    """
    check_visibility(hidden_visibility)
    held_back = hidden_visibility != "visible"
    tests = [gradescope_test(entry, hidden_visibility) for row in rows for entry in _entries(row, held_back)]
    score = sum(t["score"] for t in tests)
    if not tests:
        summary = ""  # nothing graded: the output says why
    elif held_back:
        shown = [t for t in tests if t["visibility"] == "visible"]
        passed = sum(t["status"] == "passed" for t in shown)
        when = (
            tr("when your instructor publishes the grades")
            if hidden_visibility == "after_published"
            else tr("after the due date")
        )
        summary = tr(
            "{passed} of {total} checks shown now pass. Your points and the full feedback are shown {when}.",
            passed=passed,
            total=len(shown),
            when=when,
        )
        only = hidden_only_names(rows)
        if only:
            summary += "\n" + tr(
                "Graded on hidden cases only (no public case checks them, so nothing about them is shown now): "
                "{tests}. Their result is shown {when}.",
                tests=tr(", ").join(only),
                when=when,
            )
    else:
        maximum = sum(t["max_score"] for t in tests)
        passed = sum(t["status"] == "passed" for t in tests)
        summary = tr(
            "{score:g} / {maximum:g} points; {passed} of {total} tests passed.",
            score=score,
            maximum=maximum,
            passed=passed,
            total=len(tests),
        )
    data: dict[str, Any] = {"score": score}
    if not held_back:
        data["execution_time"] = int(round(seconds))
    data |= {
        "output": "\n".join(line for line in (summary, output) if line),
        "stdout_visibility": "hidden",
        "tests": tests + list(instructor),
    }
    return data
