"""The Gradescope autograder bundle (utils/builder/gradescope_bundle.py) and runner (utils/grading/gradescope.py).

Gradescope cannot run here, so the bundle is unpacked into a temporary root laid out as Gradescope lays
out ``/autograder`` (``source/`` = the zip, ``submission/``, ``results/``) and its own ``run_autograder``
runs on honest, wrong and broken submissions; ``results.json`` is checked field by field against
Gradescope's autograder specification (top-level ``score``, ``output``, ``stdout_visibility`` and, when
nothing is held back, ``execution_time``; ``tests[]`` with ``name``, ``score``, ``max_score``, ``status``,
``output``, ``visibility``). What students may see before grades are published is attacked in
``test_gradescope_secrets.py``; the runner's isolation in ``test_gradescope_isolation.py``.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import grader_fixtures as gf
import pytest

from utils.builder.gradescope_bundle import write_gradescope_bundle
from utils.exercises.common import Status
from utils.grade import main as grade_main
from utils.grading.gradescope import (
    GRADESCOPE_VISIBILITIES,
    HIDDEN_VISIBILITIES,
    gradescope_results,
    gradescope_test,
    run_gradescope,
)
from utils.grading.unit import PartRow as GraderPart
from utils.grading.unit import Row

pytestmark = pytest.mark.sandbox  # grades batches in sandboxed workers: make unit, not make quick

REPO = gf.REPO
TOP_LEVEL = {"score", "output", "stdout_visibility", "tests"}
TEST_KEYS = {"name", "score", "max_score", "status", "output", "visibility"}
NUMBER = (int, float)
NOW = (" · public cases", " · status")  # a held-back test's companion, shown at once


def check_spec(data: dict, names: list[str], max_scores: list[float]) -> None:
    """``results.json`` as Gradescope's specification describes it, field by field, and what is held back:
    every test shown at once that carries points was decided without running the student's code."""
    held_back = "execution_time" not in data
    assert set(data) == TOP_LEVEL | (set() if held_back else {"execution_time"})
    assert isinstance(data["score"], NUMBER) and not isinstance(data["score"], bool)
    if not held_back:
        assert isinstance(data["execution_time"], int) and data["execution_time"] >= 0
    assert isinstance(data["output"], str) and data["output"]
    assert data["stdout_visibility"] == "hidden"
    assert isinstance(data["tests"], list)
    for test in data["tests"]:
        assert set(test) == TEST_KEYS, test
        assert isinstance(test["name"], str) and test["name"]
        for key in ("score", "max_score"):
            assert isinstance(test[key], NUMBER) and not isinstance(test[key], bool)
        assert 0 <= test["score"] <= test["max_score"]
        assert test["status"] in ("passed", "failed")
        if test["max_score"]:  # a 0-point test (a part's public cases) passes or fails on its own
            assert (test["status"] == "passed") == (test["score"] == test["max_score"])
        assert isinstance(test["output"], str) and test["output"]
        assert test["visibility"] in GRADESCOPE_VISIBILITIES
        if test["visibility"] == "hidden":  # instructors only: worth nothing (the spec)
            assert test["max_score"] == 0 and test["name"].endswith("(instructors only)"), test
        if held_back and test["visibility"] == "visible" and test["max_score"]:
            assert test["output"].split(":")[0] in ("missing", "invalid"), test
    for test, after in zip(data["tests"], data["tests"][1:] + [None]):
        if test["name"].endswith(NOW):  # shown at once, worth nothing; the points follow it, held back
            assert test["max_score"] == 0 and test["visibility"] == "visible", test
            suffix = next(s for s in NOW if test["name"].endswith(s))
            assert after is not None and after["name"] == test["name"].removesuffix(suffix), (test, after)
            assert after["visibility"] != "visible", after
    tests = scored(data)
    assert [t["name"] for t in tests] == names
    assert [t["max_score"] for t in tests] == max_scores
    assert math.isclose(data["score"], sum(t["score"] for t in data["tests"]))


PUBLIC = NOW[0]


def scored(data: dict) -> list[dict]:
    """The tests that carry points (not a companion shown at once, nor an instructor's note)."""
    return [t for t in data["tests"] if not t["name"].endswith(NOW) and t["visibility"] != "hidden"]


def instructor_notes(data: dict) -> dict[str, dict]:
    return {t["name"]: t for t in data["tests"] if t["visibility"] == "hidden"}


# --------------------------------------------------------------------------------------------------
# The mapping from grader rows to tests (pure)
# --------------------------------------------------------------------------------------------------


def mapping_rows():
    from fractions import Fraction

    parted = Row(
        "ann",
        "ch2.causal_mask",
        Fraction(3, 2),
        3,
        Status.FAILED,
        "1.5 of 3",
        (
            GraderPart("shapes", Fraction(3, 2), Fraction(3, 2), Status.PASSED, "all cases pass"),
            GraderPart("fully masked rows", 0, Fraction(3, 2), Status.FAILED, "2 of 4 hidden cases pass (masking)"),
        ),
    )
    one_part = Row("ann", "ch1.h", 1, 1, Status.PASSED, "✅ h", (GraderPart("", 1, 1, Status.PASSED, "✅ h"),))
    return [
        Row("ann", "ch1.f", 2, 2, Status.PASSED, "✅ f"),
        Row("ann", "ch1.g", 0, 3, Status.TIMEOUT, "too slow"),
        parted,
        one_part,
    ]


def test_each_row_is_one_test_and_each_part_its_own_test():
    """Shown at once (the instructor's choice): one test per row, or per named part."""
    data = gradescope_results(mapping_rows(), 3.6, hidden_visibility="visible")
    check_spec(
        data,
        ["ch1.f", "ch1.g", "ch2.causal_mask · shapes", "ch2.causal_mask · fully masked rows", "ch1.h"],
        [2.0, 3.0, 1.5, 1.5, 1.0],
    )
    assert data["score"] == 4.5 and data["execution_time"] == 4
    assert [t["visibility"] for t in data["tests"]] == ["visible"] * 5
    assert data["tests"][3]["output"] == "failed: 2 of 4 hidden cases pass (masking)"
    assert data["tests"][1]["output"] == "timeout: too slow"
    assert data["tests"][1]["status"] == "failed"
    assert data["output"] == "4.5 / 9 points; 3 of 5 tests passed."


def test_held_back_each_test_that_ran_code_has_a_fixed_companion_shown_at_once():
    data = gradescope_results(mapping_rows(), 3.6)
    check_spec(
        data,
        ["ch1.f", "ch1.g", "ch2.causal_mask · shapes", "ch2.causal_mask · fully masked rows", "ch1.h"],
        [2.0, 3.0, 1.5, 1.5, 1.0],
    )
    shown = [(t["name"], t["status"], t["output"]) for t in data["tests"] if t["visibility"] == "visible"]
    assert shown == [
        ("ch1.f · status", "passed", "passed"),
        ("ch1.g · status", "failed", "timeout: your code ran too long"),
        ("ch2.causal_mask · shapes · status", "passed", "passed"),
        (
            "ch2.causal_mask · fully masked rows · status",
            "failed",
            "failed: run this exercise's check cell in your notebook to see why",
        ),
        ("ch1.h · status", "passed", "passed"),
    ]
    assert [t["output"] for t in scored(data)][1] == "timeout: too slow"  # the reason, held back
    assert {t["visibility"] for t in scored(data)} == {"after_published"}
    assert data["score"] == 4.5


def hidden_parted_row(status_public=Status.PASSED):
    from fractions import Fraction

    return Row(
        "ann",
        "ch2.causal_mask",
        Fraction(3, 2),
        3,
        Status.FAILED,
        "1.5 of 3",
        (
            GraderPart(
                "shapes",
                Fraction(3, 2),
                Fraction(3, 2),
                Status.PASSED,
                "all 2 public and 3 hidden cases pass",
                3,
                Status.PASSED,
                "2 of 2 public cases pass",
            ),
            GraderPart(
                "fully masked rows",
                0,
                Fraction(3, 2),
                Status.FAILED,
                "hidden cases: 2 of 4 pass (masking)",
                4,
                status_public,
                "1 of 1 public case pass",
            ),
        ),
    )


def test_a_part_with_hidden_cases_shows_its_public_cases_now_and_its_points_later():
    """Resubmitting must not turn the hidden cases into an oracle: their verdict waits for the visibility."""
    data = gradescope_results([hidden_parted_row(Status.FAILED)], 2.0)
    check_spec(data, ["ch2.causal_mask · shapes", "ch2.causal_mask · fully masked rows"], [1.5, 1.5])
    assert [(t["name"], t["score"], t["status"], t["visibility"]) for t in data["tests"]] == [
        ("ch2.causal_mask · shapes · public cases", 0.0, "passed", "visible"),
        ("ch2.causal_mask · shapes", 1.5, "passed", "after_published"),
        ("ch2.causal_mask · fully masked rows · public cases", 0.0, "failed", "visible"),
        ("ch2.causal_mask · fully masked rows", 0.0, "failed", "after_published"),
    ]
    assert data["tests"][0]["output"] == (
        "passed: every public case passes (the check cell in your notebook runs the same cases)"
    )
    assert data["tests"][2]["output"] == (
        "failed: a public case fails; run this exercise's check cell in your notebook to see which and why"
    )
    one = Row(
        "ann",
        "ch1.f",
        0,
        2,
        Status.FAILED,
        "hidden cases: 0 of 3 pass",
        (
            GraderPart(
                "", 0, 2, Status.FAILED, "hidden cases: 0 of 3 pass", 3, Status.PASSED, "2 of 2 public cases pass"
            ),
        ),
    )
    assert [t["name"] for t in gradescope_results([one], 1.0)["tests"]] == ["ch1.f · public cases", "ch1.f"]


def test_with_visible_hidden_cases_each_part_is_one_test():
    data = gradescope_results([hidden_parted_row()], 2.0, hidden_visibility="visible")
    assert [(t["name"], t["visibility"]) for t in data["tests"]] == [
        ("ch2.causal_mask · shapes", "visible"),
        ("ch2.causal_mask · fully masked rows", "visible"),
    ]


class PartRow:
    """A row marked as running hidden cases only (``hidden``): the bundle's hidden visibility applies."""

    def __init__(self, part, hidden, points, status):
        self.student, self.exercise, self.part, self.hidden = "ann", "ch2.causal_mask", part, hidden
        self.points, self.max_points, self.status, self.feedback = points, 1.5, status, "why"


@pytest.mark.parametrize("visibility", HIDDEN_VISIBILITIES)
def test_hidden_visibility_is_configurable(visibility):
    assert gradescope_test(PartRow("p", True, 0, Status.FAILED), visibility)["visibility"] == visibility
    assert gradescope_test(PartRow("p", False, 0, Status.FAILED), visibility)["visibility"] == "visible"
    held = gradescope_results([Row("ann", "ch1.f", 0, 2, Status.FAILED, "why")], 1.0, visibility)
    assert {t["visibility"] for t in scored(held)} == {visibility}


def test_a_visibility_gradescope_does_not_know_is_refused(tmp_path):
    with pytest.raises(ValueError, match="hidden_visibility must be one of .*got 'later'"):
        gradescope_results([], 1.0, hidden_visibility="later")
    with pytest.raises(ValueError, match="hidden_visibility"):
        write_gradescope_bundle(tmp_path / "a.zip", hidden_visibility="after")
    with pytest.raises(TypeError, match="seed must be an integer"):
        write_gradescope_bundle(tmp_path / "a.zip", seed="7")
    with pytest.raises(TypeError, match="allow_weak_isolation must be True or False"):
        write_gradescope_bundle(tmp_path / "a.zip", allow_weak_isolation="yes")
    assert not (tmp_path / "a.zip").exists()


# --------------------------------------------------------------------------------------------------
# The bundle
# --------------------------------------------------------------------------------------------------


def make_bundle(tmp_path_factory) -> Path:
    """The course's bundle, as the command line writes it (seed 11, hidden tests after the due date)."""
    out = tmp_path_factory.mktemp("bundle") / "autograder.zip"
    assert grade_main(["gradescope-bundle", str(out), "--seed", "11", "--hidden-visibility", "after_due_date"]) == 0
    return out


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    return make_bundle(tmp_path_factory)


def test_the_zip_has_setup_and_run_autograder_at_its_root_executable(bundle):
    with zipfile.ZipFile(bundle) as archive:
        infos = {i.filename: i for i in archive.infolist()}
        for name in ("setup.sh", "run_autograder"):
            assert name in infos, sorted(infos)[:10]
            assert (infos[name].external_attr >> 16) & 0o111, f"{name} is not executable"
            text = archive.read(name).decode()
            assert text.startswith("#!/usr/bin/env bash\n")
            subprocess.run(["bash", "-n"], input=text, text=True, check=True)
        setup = archive.read("setup.sh").decode()
        run = archive.read("run_autograder").decode()
        config = json.loads(archive.read("gradescope.json"))
    # the CPU torch is chosen as make and Binder choose it, and the dependencies install from the pins
    assert 'prereqs.py" torch-index auto' in setup and "postBuild" in setup
    assert '-c "$COURSE/constraints.txt" -r "$COURSE/requirements.txt"' in setup
    assert 'chmod 600 "$ROOT/source/gradescope.json"' in setup
    # the course runs from source/course, not from the venv's site-packages (test_gradescope_isolation.py)
    assert '"$COURSE"\n' not in setup and 'export PYTHONPATH="$ROOT/source/course' in run
    assert config == {
        "seed": 11,
        "timeout": 30.0,
        "budget": 420.0,  # the default: a grade within Gradescope's default 10 minutes (test_gradescope_budget.py)
        "memory_mb": 2048,
        "hidden_visibility": "after_due_date",
        "course": "course",
        "lang": "en",
        "chapters": None,
        "allow_weak_isolation": False,
    }


def test_the_zip_carries_the_whole_package_and_no_solution(bundle):
    with zipfile.ZipFile(bundle) as archive:
        names = set(archive.namelist())
        notebooks = {n: archive.read(n).decode() for n in names
                     if n.startswith("course/solutions/") and n.endswith(".ipynb")}
    package = {
        f"course/{p.relative_to(REPO).as_posix()}"
        for p in (REPO / "utils").rglob("*.py")
        if "__pycache__" not in p.parts
    }
    assert package <= names, sorted(package - names)[:5]
    assert {"course/pyproject.toml", "course/constraints.txt", "course/requirements.txt", "course/README.md"} <= names
    assert sorted(Path(n).name for n in notebooks) == sorted(p.name for p in gf.course_notebooks())
    for name, text in notebooks.items():
        assert "# BEGIN SOLUTION" not in text and '"outputs": []' in text, name
        assert gf.exercise_ids(gf.nbformat.reads(text, as_version=4)), name


def test_the_same_course_and_seed_give_the_same_zip(bundle, tmp_path):
    again = write_gradescope_bundle(tmp_path / "again.zip", seed=11, hidden_visibility="after_due_date")
    assert again.read_bytes() == bundle.read_bytes()


# --------------------------------------------------------------------------------------------------
# run_autograder in a simulated /autograder
# --------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def temporary_root(prefix: str = "autograder-") -> Iterator[Path]:
    """A world-readable temporary folder (the sandbox uid must read the bundled package), removed after."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(root, 0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def autograder_root():
    with temporary_root() as root:
        yield root


def lay_out(root: Path, bundle: Path, notebooks: dict, toy: bool = True) -> Path:
    """Unpack ``bundle`` as Gradescope does and place the submission; ``toy`` swaps in the toy course."""
    for folder in ("source", "submission", "results"):
        (root / folder).mkdir()
    with zipfile.ZipFile(bundle) as archive:
        archive.extractall(root / "source")
    for name in ("setup.sh", "run_autograder"):
        os.chmod(root / "source" / name, 0o755)  # zipfile does not restore modes; Gradescope does
    if toy:
        shutil.rmtree(root / "source" / "course" / "solutions")
        gf.make_toy_course(root / "source" / "course")
    for name, nb in notebooks.items():
        path = root / "submission" / name
        if isinstance(nb, str):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(nb, encoding="utf-8")
        else:
            gf.write_notebook(path, nb)
    (root / "submission_metadata.json").write_text(json.dumps({"users": [{"id": 4217, "name": "Ann"}]}))
    return root


def run_autograder(root: Path, *args: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # the bundled package, not this checkout's, so a file missing from the zip fails here
    env |= {
        "AUTOGRADER_ROOT": str(root),
        "AUTOGRADER_PYTHON": sys.executable,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([str(root / "source" / "course"), str(REPO / "tests")]),
    }
    result = subprocess.run(
        [str(root / "source" / "run_autograder"), *args], env=env, cwd="/", capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))


TOY_IDS = list(gf.TOY_SOLUTIONS)
TOY_MAX = [float(gf.TOY_POINTS[e]) for e in TOY_IDS]
TOY = ["--registry", "grader_fixtures:TOY_REGISTRY"]


def test_an_honest_submission_gets_every_point(bundle, autograder_root):
    root = lay_out(autograder_root, bundle, {"hw/my homework.ipynb": gf.toy_submission()})
    data = run_autograder(root, *TOY)
    check_spec(data, TOY_IDS, TOY_MAX)
    assert data["score"] == sum(TOY_MAX) == 6
    assert all(t["status"] == "passed" for t in data["tests"])
    assert {t["visibility"] for t in scored(data)} == {"after_due_date"}  # the bundle's visibility
    n = sum(t["visibility"] == "visible" for t in data["tests"])
    assert n == len(TOY_IDS)
    assert data["output"].startswith(
        f"{n} of {n} checks shown now pass. Your points and the full feedback are shown after the due date."
    )
    assert instructor_notes(data)["grader isolation (instructors only)"]["output"].startswith("isolation level")


def test_a_wrong_answer_loses_its_points_with_the_diagnosis(bundle, autograder_root):
    wrong = gf.toy_submission(
        {"ch1.attend": ("def attend(q, k, v):\n    return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v\n")}
    )
    data = run_autograder(lay_out(autograder_root, bundle, {"01_toy.ipynb": wrong}), *TOY)
    check_spec(data, TOY_IDS, TOY_MAX)
    by_name = {t["name"]: t for t in scored(data)}
    assert by_name["ch1.attend"]["status"] == "failed" and by_name["ch1.attend"]["score"] == 0
    assert "sqrt" in by_name["ch1.attend"]["output"]
    assert data["score"] == 3


def test_a_broken_submission_scores_zero_with_reasons(bundle, autograder_root):
    root = lay_out(autograder_root, bundle, {"01_toy.ipynb": "{ this is not json", "x.txt": "hello"})
    data = run_autograder(root, *TOY)
    check_spec(data, TOY_IDS, TOY_MAX)
    assert data["score"] == 0
    assert all(t["status"] == "failed" and t["output"].startswith(f"{Status.INVALID}:") for t in scored(data))
    assert "not valid JSON" in data["tests"][0]["output"]
    assert "Not graded: x.txt (not a notebook or zip)." in data["output"]


def test_an_empty_submission_says_what_to_submit(bundle, autograder_root):
    run_gradescope(lay_out(autograder_root, bundle, {}), registry=gf.TOY_REGISTRY)
    data = json.loads((autograder_root / "results" / "results.json").read_text(encoding="utf-8"))
    check_spec(data, TOY_IDS, TOY_MAX)
    assert data["score"] == 0 and "No exercise cell was found" in data["output"]


def test_cases_depend_on_the_gradescope_user(bundle, autograder_root):
    """Two students with the same seed get different cases: the user id names the student."""
    from utils.grading.gradescope import _student_name, lock_down

    root = lay_out(autograder_root, bundle, {})
    assert _student_name(lock_down(root)) == "user-4217"
    (root / "submission_metadata.json").write_text(json.dumps({"users": [{"id": "9/../x"}, {"id": 3}]}))
    assert _student_name(lock_down(root)) == "user-3-9_.._x"
    (root / "submission_metadata.json").write_text("not json")
    assert _student_name(lock_down(root)) == "submission"
    (root / "submission_metadata.json").write_text(json.dumps({"users": "4217"}))
    assert _student_name(lock_down(root)) == "submission"


@pytest.mark.slow
def test_the_real_course_solutions_get_full_marks(bundle, autograder_root):
    solutions = {p.name: gf.nbformat.read(str(p), as_version=4) for p in gf.course_notebooks()}
    data = run_autograder(lay_out(autograder_root, bundle, solutions, toy=False))
    points = {
        c.metadata["course"]["exercise"]: c.metadata["course"]["points"]
        for nb in solutions.values()
        for c in nb.cells
        if c.get("metadata", {}).get("course", {}).get("exercise")
    }
    from utils.exercises import all_exercises

    names, maxima = [], []
    for exercise_id in points:  # one test per named part where an exercise has two or more
        parts = all_exercises()[exercise_id].part_list()
        if len(parts) > 1:
            names += [f"{exercise_id} · {part.name}" for part in parts]
            maxima += [float(part.points) for part in parts]
        else:
            names.append(exercise_id)
            maxima.append(float(points[exercise_id]))
    check_spec(data, names, maxima)
    assert data["score"] == sum(points.values())
    assert all(t["status"] == "passed" for t in data["tests"]), [t for t in data["tests"] if t["status"] != "passed"]
    assert any(t["name"].endswith(PUBLIC) for t in data["tests"])  # the course's exercises run hidden cases
