"""The Gradescope autograder bundle (utils/builder/gradescope_bundle.py) and runner (utils/grading/gradescope.py).

Gradescope cannot run here, so the bundle is unpacked into a temporary root laid out as Gradescope lays
out ``/autograder`` (``source/`` = the zip, ``submission/``, ``results/``) and its own ``run_autograder``
runs on honest, wrong and broken submissions; ``results.json`` is checked field by field against
Gradescope's autograder specification (top-level ``score``, ``execution_time``, ``output``; ``tests[]``
with ``name``, ``score``, ``max_score``, ``status``, ``output``, ``visibility``).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import grader_fixtures as gf
import pytest

from utils.builder.gradescope_bundle import write_gradescope_bundle
from utils.exercises.common import Status
from utils.grade import main as grade_main
from utils.grading.gradescope import (
    GRADESCOPE_VISIBILITIES,
    gradescope_results,
    gradescope_test,
    run_gradescope,
)
from utils.grading.unit import PartRow as GraderPart
from utils.grading.unit import Row

pytestmark = pytest.mark.sandbox  # grades batches in sandboxed workers: make unit, not make quick

REPO = gf.REPO
TOP_LEVEL = {"score", "execution_time", "output", "stdout_visibility", "tests"}
TEST_KEYS = {"name", "score", "max_score", "status", "output", "visibility"}
NUMBER = (int, float)


def check_spec(data: dict, names: list[str], max_scores: list[float]) -> None:
    """``results.json`` as Gradescope's specification describes it, field by field."""
    assert set(data) == TOP_LEVEL
    assert isinstance(data["score"], NUMBER) and not isinstance(data["score"], bool)
    assert isinstance(data["execution_time"], int) and data["execution_time"] >= 0
    assert isinstance(data["output"], str) and data["output"]
    assert data["stdout_visibility"] in GRADESCOPE_VISIBILITIES
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
    for test, after in zip(data["tests"], data["tests"][1:] + [None]):
        if test["name"].endswith(PUBLIC):  # shown at once, worth nothing; the points follow it, held back
            assert test["max_score"] == 0 and test["visibility"] == "visible", test
            assert after is not None and after["name"] == test["name"].removesuffix(PUBLIC), (test, after)
            assert after["visibility"] != "visible", after
    tests = scored(data)
    assert [t["name"] for t in tests] == names
    assert [t["max_score"] for t in tests] == max_scores
    assert math.isclose(data["score"], sum(t["score"] for t in data["tests"]))


PUBLIC = " · public cases"


def scored(data: dict) -> list[dict]:
    """The tests that carry points (not a part's public cases alone)."""
    return [t for t in data["tests"] if not t["name"].endswith(PUBLIC)]


# --------------------------------------------------------------------------------------------------
# The mapping from grader rows to tests (pure)
# --------------------------------------------------------------------------------------------------


def test_each_row_is_one_test_and_each_part_its_own_test():
    from fractions import Fraction

    parted = Row("ann", "ch2.causal_mask", Fraction(3, 2), 3, Status.FAILED, "1.5 of 3", (
        GraderPart("shapes", Fraction(3, 2), Fraction(3, 2), Status.PASSED, "all cases pass"),
        GraderPart("fully masked rows", 0, Fraction(3, 2), Status.FAILED, "2 of 4 hidden cases pass (masking)")))
    one_part = Row("ann", "ch1.h", 1, 1, Status.PASSED, "✅ h", (GraderPart("", 1, 1, Status.PASSED, "✅ h"),))
    rows = [Row("ann", "ch1.f", 2, 2, Status.PASSED, "✅ f"), Row("ann", "ch1.g", 0, 3, Status.TIMEOUT, "too slow"),
            parted, one_part]
    data = gradescope_results(rows, 3.6)
    check_spec(data, ["ch1.f", "ch1.g", "ch2.causal_mask · shapes", "ch2.causal_mask · fully masked rows", "ch1.h"],
               [2.0, 3.0, 1.5, 1.5, 1.0])
    assert data["score"] == 4.5 and data["execution_time"] == 4
    assert [t["visibility"] for t in data["tests"]] == ["visible"] * 5
    assert data["tests"][3]["output"] == "failed: 2 of 4 hidden cases pass (masking)"
    assert data["tests"][1]["output"] == "timeout: too slow"
    assert data["tests"][1]["status"] == "failed"


def hidden_parted_row(status_public=Status.PASSED):
    from fractions import Fraction

    return Row("ann", "ch2.causal_mask", Fraction(3, 2), 3, Status.FAILED, "1.5 of 3", (
        GraderPart("shapes", Fraction(3, 2), Fraction(3, 2), Status.PASSED, "all 2 public and 3 hidden cases pass",
                   3, Status.PASSED, "2 of 2 public cases pass"),
        GraderPart("fully masked rows", 0, Fraction(3, 2), Status.FAILED, "hidden cases: 2 of 4 pass (masking)",
                   4, status_public, "1 of 1 public case pass")))


def test_a_part_with_hidden_cases_shows_its_public_cases_now_and_its_points_later():
    """Resubmitting must not turn the hidden cases into an oracle: their verdict waits for the visibility."""
    data = gradescope_results([hidden_parted_row()], 2.0)
    check_spec(data, ["ch2.causal_mask · shapes", "ch2.causal_mask · fully masked rows"], [1.5, 1.5])
    assert [(t["name"], t["score"], t["status"], t["visibility"]) for t in data["tests"]] == [
        ("ch2.causal_mask · shapes · public cases", 0.0, "passed", "visible"),
        ("ch2.causal_mask · shapes", 1.5, "passed", "after_published"),
        ("ch2.causal_mask · fully masked rows · public cases", 0.0, "passed", "visible"),
        ("ch2.causal_mask · fully masked rows", 0.0, "failed", "after_published")]
    assert data["tests"][2]["output"] == "passed: 1 of 1 public case pass"
    assert "hidden" not in data["tests"][2]["output"]
    one = Row("ann", "ch1.f", 0, 2, Status.FAILED, "hidden cases: 0 of 3 pass", (
        GraderPart("", 0, 2, Status.FAILED, "hidden cases: 0 of 3 pass", 3, Status.PASSED,
                   "2 of 2 public cases pass"),))
    assert [t["name"] for t in gradescope_results([one], 1.0)["tests"]] == ["ch1.f · public cases", "ch1.f"]


def test_with_visible_hidden_cases_each_part_is_one_test():
    data = gradescope_results([hidden_parted_row()], 2.0, hidden_visibility="visible")
    assert [(t["name"], t["visibility"]) for t in data["tests"]] == [
        ("ch2.causal_mask · shapes", "visible"), ("ch2.causal_mask · fully masked rows", "visible")]


class PartRow:
    """A row marked as running hidden cases only (``hidden``): the bundle's hidden visibility applies."""

    def __init__(self, part, hidden, points, status):
        self.student, self.exercise, self.part, self.hidden = "ann", "ch2.causal_mask", part, hidden
        self.points, self.max_points, self.status, self.feedback = points, 1.5, status, "why"


@pytest.mark.parametrize("visibility", GRADESCOPE_VISIBILITIES)
def test_hidden_visibility_is_configurable(visibility):
    assert gradescope_test(PartRow("p", True, 0, Status.FAILED), visibility)["visibility"] == visibility
    assert gradescope_test(PartRow("p", False, 0, Status.FAILED), visibility)["visibility"] == "visible"


def test_a_visibility_gradescope_does_not_know_is_refused(tmp_path):
    with pytest.raises(ValueError, match="hidden_visibility must be one of .*got 'later'"):
        gradescope_results([], 1.0, hidden_visibility="later")
    with pytest.raises(ValueError, match="hidden_visibility"):
        write_gradescope_bundle(tmp_path / "a.zip", hidden_visibility="after")
    with pytest.raises(TypeError, match="seed must be an integer"):
        write_gradescope_bundle(tmp_path / "a.zip", seed="7")


# --------------------------------------------------------------------------------------------------
# The bundle
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bundle") / "autograder.zip"
    assert grade_main(["gradescope-bundle", str(out), "--seed", "11", "--hidden-visibility", "hidden"]) == 0
    return out


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
        config = json.loads(archive.read("gradescope.json"))
    # the CPU torch is chosen as make and Binder choose it, and the course installs from its pins
    assert 'prereqs.py" torch-index auto' in setup and "postBuild" in setup
    assert '-c "$COURSE/constraints.txt" -r "$COURSE/requirements.txt"' in setup
    assert '--no-deps "$COURSE"' in setup and 'chmod 600 "$ROOT/source/gradescope.json"' in setup
    assert config == {"seed": 11, "timeout": 30.0, "memory_mb": 2048, "hidden_visibility": "hidden",
                      "course": "course", "lang": "en"}


def test_the_zip_carries_the_whole_package_and_no_solution(bundle):
    with zipfile.ZipFile(bundle) as archive:
        names = set(archive.namelist())
        notebooks = {n: archive.read(n).decode() for n in names if n.startswith("course/solutions/")}
    package = {f"course/{p.relative_to(REPO).as_posix()}" for p in (REPO / "utils").rglob("*.py")
               if "__pycache__" not in p.parts}
    assert package <= names, sorted(package - names)[:5]
    assert {"course/pyproject.toml", "course/constraints.txt", "course/requirements.txt", "course/README.md"} <= names
    assert sorted(Path(n).name for n in notebooks) == sorted(p.name for p in gf.course_notebooks())
    for name, text in notebooks.items():
        assert "# BEGIN SOLUTION" not in text and '"outputs": []' in text, name
        assert gf.exercise_ids(gf.nbformat.reads(text, as_version=4)), name


def test_the_same_course_and_seed_give_the_same_zip(bundle, tmp_path):
    again = write_gradescope_bundle(tmp_path / "again.zip", seed=11, hidden_visibility="hidden")
    assert again.read_bytes() == bundle.read_bytes()


# --------------------------------------------------------------------------------------------------
# run_autograder in a simulated /autograder
# --------------------------------------------------------------------------------------------------


@pytest.fixture
def autograder_root():
    """A world-readable temporary root (the sandbox uid must read the bundled package), removed after."""
    root = Path(tempfile.mkdtemp(prefix="autograder-"))
    os.chmod(root, 0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


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
    env |= {"AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable, "OMP_NUM_THREADS": "1",
            "PYTHONPATH": os.pathsep.join([str(root / "source" / "course"), str(REPO / "tests")])}
    result = subprocess.run([str(root / "source" / "run_autograder"), *args], env=env, cwd="/",
                            capture_output=True, text=True, timeout=300)
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
    assert {t["visibility"] for t in scored(data)} == {"hidden"}  # the bundle's visibility for hidden cases
    n = len(data["tests"])
    assert data["output"].startswith(f"6 / 6 points; {n} of {n} tests passed.")


def test_a_wrong_answer_loses_its_points_with_the_diagnosis(bundle, autograder_root):
    wrong = gf.toy_submission({"ch1.attend": (
        "def attend(q, k, v):\n    return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v\n")})
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
    assert "Not graded: x.txt (not a notebook)." in data["output"]


def test_an_empty_submission_says_what_to_submit(bundle, autograder_root):
    run_gradescope(lay_out(autograder_root, bundle, {}), registry=gf.TOY_REGISTRY)
    data = json.loads((autograder_root / "results" / "results.json").read_text(encoding="utf-8"))
    check_spec(data, TOY_IDS, TOY_MAX)
    assert data["score"] == 0 and "No exercise cell was found" in data["output"]


def test_a_failing_grader_still_writes_results_json(bundle, autograder_root):
    root = lay_out(autograder_root, bundle, {"01_toy.ipynb": gf.toy_submission()})
    run_gradescope(root, registry=gf.REPO)  # not a mapping: the grader raises inside
    data = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    check_spec(data, [], [])
    assert data["score"] == 0 and "The autograder failed (TypeError" in data["output"]


def test_cases_depend_on_the_gradescope_user(bundle, autograder_root):
    """Two students with the same seed get different cases: the user id names the student."""
    from utils.grading.gradescope import _student_name

    root = lay_out(autograder_root, bundle, {})
    assert _student_name(root) == "user-4217"
    (root / "submission_metadata.json").write_text(json.dumps({"users": [{"id": "9/../x"}, {"id": 3}]}))
    assert _student_name(root) == "user-3-9_.._x"
    (root / "submission_metadata.json").write_text("not json")
    assert _student_name(root) == "submission"


@pytest.mark.slow
def test_the_real_course_solutions_get_full_marks(bundle, autograder_root):
    solutions = {p.name: gf.nbformat.read(str(p), as_version=4) for p in gf.course_notebooks()}
    data = run_autograder(lay_out(autograder_root, bundle, solutions, toy=False))
    points = {c.metadata["course"]["exercise"]: c.metadata["course"]["points"]
              for nb in solutions.values() for c in nb.cells if c.get("metadata", {}).get("course", {}).get("exercise")}
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
