"""What a student sees on Gradescope before grades are published: nothing of the hidden cases.

Gradescope shows the top-level ``output`` and every test with visibility ``visible`` at once; the tests
that carry points wait for the bundle's hidden visibility (``after_published`` by default). Before
publication a student must not learn the points their hidden cases gave, nor anything a run of their
code produced (it could read the hidden cases' inputs and raise or print them): a test shown at once says
a status and a fixed message. The last test attacks this with a real submission in a simulated
``/autograder``: a cell that reads every file it can reach and raises what it read, and prints it.
"""

from __future__ import annotations

import json
import re
from fractions import Fraction

import grader_fixtures as gf
import pytest
import test_gradescope as tg
from test_gradescope import TOY, check_spec, lay_out, run_autograder, scored

from utils.builder.gradescope_bundle import write_gradescope_bundle
from utils.exercises.common import Status
from utils.grade import main as grade_main
from utils.grading.gradescope import check_visibility, gradescope_results
from utils.grading.unit import PartRow, Row

LEAK = "LEAK-7f3a"  # stands for whatever a run of the student's code produced


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return tg.make_bundle(tmp_path_factory)


@pytest.fixture
def autograder_root():
    with tg.temporary_root() as root:
        yield root


def shown(data: dict) -> str:
    """Everything a student reads before publication: the output and the tests shown at once."""
    return data["output"] + "".join(t["name"] + t["output"] for t in data["tests"] if t["visibility"] == "visible")


def run_rows() -> list[Row]:
    """One row per way a run can end, each carrying text that the run produced (``LEAK``)."""
    judged = Row(
        "ann",
        "ch2.mask",
        Fraction(3, 2),
        3,
        Status.FAILED,
        f"shapes: {LEAK}",
        (
            PartRow(
                "shapes",
                Fraction(3, 2),
                Fraction(3, 2),
                Status.PASSED,
                f"all pass {LEAK}",
                3,
                Status.PASSED,
                f"2 of 2 public cases pass {LEAK}",
            ),
            PartRow(
                "rows",
                0,
                Fraction(3, 2),
                Status.ERROR,
                f"your function raised RuntimeError: {LEAK}",
                4,
                Status.FAILED,
                f"your function raised RuntimeError: {LEAK} (1, 7, 9)",
            ),
        ),
    )
    single = Row(
        "ann",
        "ch1.f",
        0,
        2,
        Status.ERROR,
        f"raised {LEAK}",
        (PartRow("", 0, 2, Status.ERROR, f"raised {LEAK}", 3, Status.FAILED, f"raised {LEAK}"),),
    )
    wholes = [
        Row(
            "ann",
            f"ch1.{status.name.lower()}",
            int(status == Status.PASSED),
            1,
            status,
            f"{status} {LEAK}",
            (PartRow("", int(status == Status.PASSED), 1, status, f"because {LEAK}"),),
        )
        for status in (
            Status.ERROR,
            Status.TIMEOUT,
            Status.MEMORY,
            Status.FORBIDDEN,
            Status.NOT_ATTEMPTED,
            Status.FAILED,
            Status.PASSED,
        )
    ]
    return [judged, single, *wholes]


# --------------------------------------------------------------------------------------------------
# results.json (pure)
# --------------------------------------------------------------------------------------------------


def test_the_summary_students_see_counts_only_the_tests_shown_at_once():
    rows = [
        Row("ann", "ch1.f", Fraction(13, 2), 35, Status.FAILED, "hidden cases: 1 of 4 pass"),
        Row("ann", "ch1.g", 0, 3, Status.MISSING, "no cell"),
    ]
    data = gradescope_results(rows, 9.0)
    visible = [t for t in data["tests"] if t["visibility"] == "visible"]
    assert len(visible) == 2 and sum(t["status"] == "passed" for t in visible) == 0
    assert data["output"] == (
        "0 of 2 checks shown now pass. Your points and the full feedback are shown when "
        "your instructor publishes the grades."
    )
    assert not re.search(r"6\.5|38|\bpoints;", data["output"])
    assert data["score"] == 6.5  # Gradescope keeps the total from students while a test is held back
    # shown at once by the instructor's choice, the summary counts points and every test
    assert gradescope_results(rows, 9.0, "visible")["output"] == "6.5 / 38 points; 0 of 2 tests passed."


def test_a_due_date_visibility_says_when():
    data = gradescope_results([Row("ann", "ch1.f", 0, 2, Status.FAILED, "why")], 1.0, "after_due_date")
    assert data["output"].endswith("are shown after the due date.")


@pytest.mark.parametrize("visibility", ["after_published", "after_due_date"])
def test_nothing_a_run_produced_is_shown_before_publication(visibility):
    data = gradescope_results(run_rows(), 5.0, visibility)
    check_spec(data, [t["name"] for t in scored(data)], [t["max_score"] for t in scored(data)])
    assert LEAK not in shown(data)
    assert "RuntimeError" not in shown(data) and "(1, 7, 9)" not in shown(data)
    assert LEAK in json.dumps(data)  # the reasons are there, held back for publication
    now = {t["name"]: (t["status"], t["output"]) for t in data["tests"] if t["visibility"] == "visible"}
    assert now["ch2.mask · rows · public cases"] == (
        "failed",
        "failed: a public case fails; run this exercise's check cell in your notebook to see which and why",
    )
    assert now["ch1.timeout · status"] == ("failed", "timeout: your code ran too long")
    assert now["ch1.passed · status"] == ("passed", "passed")
    assert all(t["max_score"] == 0 for t in data["tests"] if t["visibility"] == "visible")
    assert "execution_time" not in data  # code could time itself on a hidden case


def test_verdicts_decided_before_anything_ran_are_shown_at_once():
    rows = [
        Row("ann", "ch1.f", 0, 2, Status.MISSING, "no cell for exercise ch1.f found"),
        Row("ann", "ch1.g", 0, 3, Status.INVALID, "hw.ipynb is not valid JSON"),
    ]
    data = gradescope_results(rows, 1.0)
    assert [(t["name"], t["max_score"], t["visibility"], t["output"]) for t in data["tests"]] == [
        ("ch1.f", 2.0, "visible", "missing: no cell for exercise ch1.f found"),
        ("ch1.g", 3.0, "visible", "invalid: hw.ipynb is not valid JSON"),
    ]


def test_hidden_is_refused_for_tests_that_carry_points(tmp_path):
    """The spec: tests with visibility ``hidden`` do not keep the total score from students."""
    with pytest.raises(ValueError, match="would show students their total score at once"):
        check_visibility("hidden")
    with pytest.raises(ValueError, match="hidden_visibility 'hidden'"):
        gradescope_results([], 1.0, "hidden")
    with pytest.raises(ValueError, match="hidden_visibility 'hidden'"):
        write_gradescope_bundle(tmp_path / "a.zip", hidden_visibility="hidden")
    with pytest.raises(SystemExit) as exited:
        grade_main(["gradescope-bundle", str(tmp_path / "a.zip"), "--hidden-visibility", "hidden"])
    assert exited.value.code == 2 and not (tmp_path / "a.zip").exists()


# --------------------------------------------------------------------------------------------------
# The attack, in a simulated /autograder
# --------------------------------------------------------------------------------------------------

READER = """import sys
ROOT = {root!r}


def _read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()[:300]
    except Exception as exc:
        return type(exc).__name__


SEEN = {{p: _read(p) for p in (ROOT + "/source/gradescope.json", ROOT + "/submission_metadata.json")}}
for base in ("..", "../in", "../in/0", "../in/1", "../in/2", "."):  # by name: the static check refuses os
    for name in ("job.json", "cell.json", "value.json", "cases.json", "outcomes.json", "gradescope.json"):
        SEEN[base + "/" + name] = _read(base + "/" + name)
print("PRINTED-LEAK", repr(SEEN))
print("STDERR-LEAK", repr(SEEN), file=sys.stderr)
"""


@pytest.mark.sandbox
def test_a_cell_that_raises_or_prints_what_it_read_shows_none_of_it_before_publication(bundle, autograder_root):
    reader = READER.format(root=str(autograder_root))
    raising = reader + "\n\ndef add_one(x):\n    raise RuntimeError('RAISED-LEAK ' + repr(SEEN)[:250])\n"
    printing = reader + "\n\n" + gf.TOY_SOLUTIONS["ch1.total"]
    root = lay_out(
        autograder_root, bundle, {"01_toy.ipynb": gf.toy_submission({"ch1.add_one": raising, "ch1.total": printing})}
    )
    metadata = {"users": [{"id": 4217}], "previous_submissions": [{"results": {"output": "PREVIOUS-RESULT"}}]}
    (root / "submission_metadata.json").write_text(json.dumps(metadata))
    data = run_autograder(root, *TOY)
    by_name = {t["name"]: t for t in scored(data)}
    assert by_name["ch1.add_one"]["score"] == 0 and by_name["ch1.total"]["score"] == 1
    assert data["score"] == 4  # attend 3 + total 1
    before_publication = shown(data)
    for secret in ("LEAK", "PREVIOUS-RESULT", '"seed"', "RuntimeError", "value.json", "cell.json"):
        assert secret not in before_publication, (secret, before_publication)
    assert "PRINTED-LEAK" not in json.dumps(data) and "STDERR-LEAK" not in json.dumps(data)
