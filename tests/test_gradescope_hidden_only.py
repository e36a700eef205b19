"""A part that no public case checks (chapter 7's rotate_half_rope ``float16``) is graded on hidden cases
alone: before grades are published, Gradescope must show nothing about it, neither a "public cases" companion
that passes vacuously nor a status, and the text above the tests says once which parts these are and when
their result shows. The local grader's and the nbgrader judge's feedback for such a part is its hidden
count, never a vacuous pass. Pure: the grader's rows are made from real credit, no sandbox runs.
"""

from __future__ import annotations

import pytest

from utils.exercises import all_exercises, credit
from utils.exercises.common import Outcome, Status
from utils.grading.gradescope_results import gradescope_results
from utils.grading.unit import graded_row, whole_exercise_parts
from utils.i18n.messages import using_language

EXERCISE = "ch7.rotate_half_rope"
PART = "float16"


def raising_row(mode: str = "public"):
    """The grader's row of a ``rotate_half_rope`` that always raises ValueError, public and hidden cases."""
    exercise = all_exercises()[EXERCISE]
    public, hidden = exercise.public_cases(), exercise.hidden_cases(7)
    assert PART not in {exercise.part_of(case) for case in public}  # what this file is about
    assert PART in {exercise.part_of(case) for case in hidden}
    cases = [*public, *hidden]
    outcomes = [Outcome(error=("ValueError", "always")) for _ in cases]
    graded = credit.credit_for(exercise, cases, outcomes, len(public), diagnose_hidden=mode == "full")
    return graded_row("ann", EXERCISE, 2, graded, mode, exercise)


def part_of(row, name):
    return next(p for p in row.parts if p.part == name)


@pytest.mark.parametrize("visibility", ["after_published", "after_due_date"])
def test_a_part_without_public_cases_shows_nothing_before_publication(visibility):
    data = gradescope_results([raising_row()], 1.0, visibility)
    shown = [t for t in data["tests"] if t["visibility"] == "visible"]
    assert [t["name"] for t in shown] == [f"{EXERCISE} · all other cases · public cases"]
    assert shown[0]["status"] == "failed"
    held = [t for t in data["tests"] if PART in t["name"]]
    assert [(t["name"], t["visibility"], t["status"]) for t in held] == [(f"{EXERCISE} · {PART}", visibility,
                                                                          "failed")]
    assert "passes" not in " ".join(t["output"] for t in shown)
    when = "when your instructor publishes the grades" if visibility == "after_published" else "after the due date"
    lines = [line for line in data["output"].splitlines() if f"{EXERCISE} · {PART}" in line]
    assert len(lines) == 1 and "hidden cases only" in lines[0] and when in lines[0], data["output"]
    assert data["output"].startswith("0 of 1 checks shown now pass.")


def test_the_part_says_it_has_no_public_status():
    row = raising_row()
    assert part_of(row, PART).public_status is None and part_of(row, PART).hidden_only
    other = part_of(row, "all other cases")
    assert other.public_status == Status.FAILED
    assert not other.hidden_only


def test_a_whole_exercise_verdict_shows_no_companion_for_it_either():
    exercise = all_exercises()[EXERCISE]
    parts = whole_exercise_parts(exercise, Status.TIMEOUT, "too slow")
    assert [p.hidden_only for p in parts] == [p.name == PART for p in exercise.part_list()]
    from utils.grading.unit import Row

    data = gradescope_results([Row("ann", EXERCISE, 0, 2, Status.TIMEOUT, "too slow", parts)], 1.0)
    shown = [t["name"] for t in data["tests"] if t["visibility"] == "visible"]
    assert shown == [f"{EXERCISE} · all other cases · status"]
    assert f"{EXERCISE} · {PART}" in data["output"]


def test_shown_at_once_it_is_one_test_and_the_output_names_no_part():
    data = gradescope_results([raising_row()], 1.0, "visible")
    assert [t["name"] for t in data["tests"]] == [f"{EXERCISE} · {PART}", f"{EXERCISE} · all other cases"]
    assert "hidden cases only" not in data["output"]


def test_the_output_line_is_in_chinese_too():
    with using_language("zh"):
        data = gradescope_results([raising_row()], 1.0)
    line = next(line for line in data["output"].splitlines() if PART in line)
    assert "隐藏" in line and "hidden" not in line


@pytest.mark.parametrize("mode", credit.FEEDBACK_MODES)
def test_the_local_grader_and_nbgrader_say_its_hidden_count_not_a_vacuous_pass(mode):
    """``python -m utils.grade`` (``feedback/``, results.csv) and the nbgrader judge report a part's
    ``status`` and ``feedback``: for this part they come from its hidden cases."""
    row = raising_row(mode)
    part = part_of(row, PART)
    assert part.status != Status.PASSED and part.points == 0
    assert "0 of 1" in part.feedback or mode == "score", part.feedback
    assert "passed" not in part.feedback or mode == "score"
    assert PART in row.feedback or mode == "score"
