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


# --------------------------------------------------------------------------------------------------
# Red team R14 (issue 35): a hidden run that ends abnormally. The hidden inputs are the same at each
# resubmission, so a status shown at once that said "error" (or "timeout", "memory") only when a hidden
# input made the code exit would let a student search the hidden inputs' sizes, one submission at a time.
# --------------------------------------------------------------------------------------------------

ABNORMAL = {  # what the code does on an input that is neither a public case nor a probe input
    "exits": "raise SystemExit(3)",  # os._exit(3) is refused before anything runs (a private name of os's)
    "aborts": "import os\n        os.abort()",
    "kills": "import os\n        os.kill(os.getpid(), 9)",
    "loops": "while True:\n            pass",
    "allocates": "return x.new_ones(2 ** 31).sum() + x",  # 8 GiB, past the student's memory bound
    "raises": "raise ValueError('a hidden input')",  # held back already: the control
}


def _known_inputs_cell(action: str) -> str:
    """ch1.add_one, right on the public cases and probe inputs, ``action`` on any other (a hidden case)."""
    import grader_fixtures as gf

    from utils.exercises.probes import probe_inputs

    known = sorted({round(float(c["x"].flatten()[0]), 5)
                    for c in [*gf.ADD_ONE.public_cases(), *probe_inputs(gf.ADD_ONE)]})
    return (f"def add_one(x):\n    if round(float(x.flatten()[0]), 5) not in {known!r}:\n        {action}\n"
            "    return x + 1\n")


@pytest.fixture(scope="module")
def abnormal_rows(tmp_path_factory):
    import grader_fixtures as gf

    from utils.grading import batch

    tmp = tmp_path_factory.mktemp("hidden_abnormal")
    subs = tmp / "subs"
    for name, action in ABNORMAL.items():
        gf.student(subs, name, {"01_toy.ipynb": gf.toy_submission({"ch1.add_one": _known_inputs_cell(action)})})
    with gf.static_check_off():  # os.abort and os.kill meet the sandbox, not the static check
        summary = batch.grade(subs, tmp / "out", jobs=1, timeout=2, seed=3,
                              course_root=gf.make_toy_course(tmp / "c"), registry=gf.TOY_REGISTRY, memory_mb=512,
                              progress=False)
    return {name: [r for r in summary["rows"] if r.student == name] for name in ABNORMAL}


@pytest.mark.sandbox
@pytest.mark.parametrize("name", sorted(ABNORMAL))
def test_a_hidden_run_that_ends_abnormally_shows_the_public_result_until_publication(abnormal_rows, name):
    rows = abnormal_rows[name]
    add_one = next(r for r in rows if r.exercise == "ch1.add_one")
    assert add_one.points == 0 and add_one.status != Status.PASSED, add_one  # the hidden run decides the points
    data = gradescope_results(rows, 1.0)
    shown = [t for t in data["tests"] if t["visibility"] == "visible" and t["name"].startswith("ch1.add_one")]
    assert [(t["name"], t["status"]) for t in shown] == [("ch1.add_one · public cases", "passed")], shown
    assert shown[0]["output"].startswith("passed: every public case passes"), shown
    held = [t for t in data["tests"] if t["name"] == "ch1.add_one"]
    assert len(held) == 1 and held[0]["visibility"] == "after_published" and held[0]["score"] == 0
    expected = {"loops": ("timeout",), "allocates": ("memory",)}.get(name, ("error", "memory"))  # a crash: memory?
    assert held[0]["output"].split(":")[0] in expected, held  # after publication: how it ended
    assert data["output"].startswith("3 of 3 checks shown now pass."), data["output"]
