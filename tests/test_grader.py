"""The instructor grader: outputs, statuses, determinism, command line, and the real course.

The machinery is tested on a toy course (tests/grader_fixtures.py) with an injected registry; the
real-course tests are parametrized over whatever solutions/ notebooks exist.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import grader_fixtures as gf
import numpy as np
import pytest
import torch

from utils.exercises.common import Outcome, Status
from utils.grading import cli, engine, report, sandbox, serialize, unit
from utils.grading.batch import grade
from utils.grading.course import InvalidNotebook, read_notebook

pytestmark = pytest.mark.sandbox  # grades batches in sandboxed workers: make unit, not make quick

TIMEOUT = 4


def run_toy(tmp_path: Path, students: dict[str, dict], seed: int = 7, out: str = "out", **kwargs) -> dict:
    course = gf.make_toy_course(tmp_path / "course")
    subs = tmp_path / "subs"
    for name, notebooks in students.items():
        gf.student(subs, name, notebooks)
    options = {"jobs": 2, "timeout": TIMEOUT, "seed": seed, "memory_mb": 512, "progress": False} | kwargs
    return grade(subs, tmp_path / out, course_root=course, registry=gf.TOY_REGISTRY, **options)


def rows_of(out: Path) -> dict[tuple[str, str], dict[str, str]]:
    return gf.exercise_rows(out)


# --------------------------------------------------------------------------------------------------
# One small batch of honest and careless students (toy course)
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("batch")
    untouched = {eid: gf.strip_solutions(src) for eid, src in gf.TOY_SOLUTIONS.items()}
    students = {
        "alice": {"01_toy.ipynb": gf.toy_submission()},
        "renamed": {"my homework (final).ipynb": gf.toy_submission()},
        "untouched": {"01_toy.ipynb": gf.toy_submission(untouched)},
        "noscale": {"01_toy.ipynb": gf.toy_submission({"ch1.attend": (
            "def attend(q, k, v):\n    return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v\n")})},
        "=HYPERLINK(1)": {"01_toy.ipynb": gf.toy_submission({"ch1.add_one": None})},
        "split": {"a.ipynb": gf.toy_submission({"ch1.total": None}),
                  "b.ipynb": gf.notebook([("ch1.total", gf.TOY_SOLUTIONS["ch1.total"]),
                                          ("ch1.unknown", "def unknown():\n    pass\n")])},
        "syntax": {"01_toy.ipynb": gf.toy_submission({"ch1.total": "def total(x):\n    return (\n"})},
        "empty": {},
    }
    summary = run_toy(tmp, students)
    return tmp / "out", summary


def test_results_csv_has_the_exact_header_and_a_row_per_student_and_exercise(batch):
    out, summary = batch
    text = (out / "results.csv").read_text(encoding="utf-8")
    assert text.splitlines()[0] == "student,exercise,part,points,max_points,status,feedback,student_id"
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 8 * 3
    assert {r["status"] for r in rows} <= set(Status)
    assert summary["max_total"] == 6


def test_solutions_get_full_marks_and_points_come_from_the_course(batch):
    out, summary = batch
    rows = rows_of(out)
    for name in ("alice", "renamed"):
        for eid, points in gf.TOY_POINTS.items():
            row = rows[(name, eid)]
            assert (row["status"], row["points"], row["max_points"]) == ("passed", str(points), str(points))
    assert summary["totals"]["alice"] == 6  # the submission's metadata says 99 points per exercise


def test_untouched_notebook_gets_zero_with_not_implemented_feedback(batch):
    rows = rows_of(batch[0])
    for eid in gf.TOY_POINTS:
        row = rows[("untouched", eid)]
        assert row["points"] == "0" and row["status"] == "not attempted"
        assert "not implemented" in row["feedback"]


def test_plausible_wrong_answer_is_failed_with_its_diagnosis(batch):
    row = rows_of(batch[0])[("noscale", "ch1.attend")]
    assert row["status"] == "failed" and row["points"] == "0"
    assert "forgot to divide the scores by sqrt(d)" in row["feedback"]


def test_exercise_spread_over_two_files_and_duplicates(batch):
    rows = rows_of(batch[0])
    assert rows[("split", "ch1.add_one")]["status"] == "passed"
    assert rows[("split", "ch1.total")]["status"] == "passed"  # only in b.ipynb: found by id
    assert rows[("split", "ch1.attend")]["status"] == "passed"
    assert rows[("'=HYPERLINK(1)", "ch1.add_one")]["status"] == "missing"
    assert all(rows[("empty", eid)]["status"] == "missing" for eid in gf.TOY_POINTS)


def test_syntax_error_is_an_error_naming_the_line(batch):
    row = rows_of(batch[0])[("syntax", "ch1.total")]
    assert row["status"] == "error" and "syntax error on line" in row["feedback"]
    assert rows_of(batch[0])[("syntax", "ch1.add_one")]["status"] == "passed"


def test_grades_csv_is_wide_with_totals_and_escaped(batch):
    text = (batch[0] / "grades.csv").read_text(encoding="utf-8")
    lines = list(csv.reader(io.StringIO(text)))
    assert lines[0] == ["student", "ch1.add_one", "ch1.attend", "ch1.total", "total", "max_total", "student_id"]
    table = {line[0]: line[1:] for line in lines[1:]}
    assert table["alice"] == ["2", "3", "1", "6", "6", "alice"]
    assert table["untouched"][-3:] == ["0", "6", "untouched"]
    assert table["'=HYPERLINK(1)"][-1] == "=HYPERLINK(1)"  # the raw id, for joins
    assert "'=HYPERLINK(1)" in table and "=HYPERLINK(1)" not in table
    assert "\n=HYPERLINK" not in (batch[0] / "results.csv").read_text(encoding="utf-8")


def test_feedback_file_per_student(batch):
    out = batch[0]
    names = sorted(p.name for p in (out / "feedback").glob("*.md"))
    assert (out / "feedback" / "index.csv").is_file()  # which file is whose
    assert "alice.md" in names and "noscale.md" in names and len(names) == 8
    text = (out / "feedback" / "noscale.md").read_text(encoding="utf-8")
    assert "3 / 6" in text and "sqrt(d)" in text
    assert not list(out.rglob("*.tmp"))  # atomic writes leave no temporary files


def test_same_seed_gives_identical_results_and_another_seed_other_cases(tmp_path, batch):
    students = {"alice": {"01_toy.ipynb": gf.toy_submission()},
                "noscale": {"01_toy.ipynb": gf.toy_submission({"ch1.attend": (
                    "def attend(q, k, v):\n    return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v\n")})}}
    run_toy(tmp_path, students, seed=7, out="again")
    first = [line for line in (batch[0] / "results.csv").read_text().splitlines()
             if line.startswith(("alice,", "noscale,"))]
    again = (tmp_path / "again" / "results.csv").read_text().splitlines()[1:]
    assert first == again
    assert engine.case_seed(7, "ch1.attend", "a") != engine.case_seed(8, "ch1.attend", "a")
    assert engine.case_seed(7, "ch1.attend", "a") != engine.case_seed(7, "ch1.attend", "b")


# --------------------------------------------------------------------------------------------------
# Units without running sandboxes
# --------------------------------------------------------------------------------------------------


def test_escape_cell_neutralizes_formulas():
    for text in ("=1+1", "+1", "-1", "@SUM(A1)"):
        assert report.escape_cell(text) == "'" + text
    for text, escaped in (("\t=1", "'\\t=1"), ("\r=1", "'\\r=1")):  # and the control character escaped
        assert report.escape_cell(text) == escaped
    assert report.escape_cell("alice") == "alice" and report.escape_cell(-3) == -3


def test_atomic_write_keeps_the_old_file_when_writing_fails(tmp_path, monkeypatch):
    target = tmp_path / "grades.csv"
    report.atomic_write(target, "old\n")

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(report.os, "replace", broken)
    with pytest.raises(OSError):
        report.atomic_write(target, "new\n")
    assert target.read_text() == "old\n" and list(tmp_path.iterdir()) == [target]


def test_serialize_round_trip_all_dtypes(tmp_path):
    value = {"x": torch.randn(2, 3), "h": torch.randn(4).half(), "b": torch.randn(3).bfloat16(),
             "m": torch.tensor([True, False]), "i": torch.arange(3), "n": None, "t": (1, 2), "f": float("nan"),
             "s": "causal"}
    serialize.dump(value, tmp_path / "v")
    back = serialize.load(tmp_path / "v")
    for key in ("x", "h", "b", "m", "i"):
        assert back[key].dtype == value[key].dtype and torch.equal(back[key], value[key])
    assert back["n"] is None and back["t"] == (1, 2) and back["s"] == "causal" and back["f"] != back["f"]


def test_hostile_outcome_files_are_rejected(tmp_path):
    folder = tmp_path / "o"
    serialize.dump_outcomes([Outcome(output=torch.ones(2))], folder)
    assert torch.equal(serialize.load_outcomes(folder, ["x"])[0].output, torch.ones(2))
    np.save(folder / "0.npy", np.array([object()], dtype=object), allow_pickle=True)  # a pickle bomb slot
    with pytest.raises(serialize.DecodeError):
        serialize.load_outcomes(folder, ["x"])
    (folder / "outcomes.json").write_text(json.dumps([{"output": {"t": "tensor", "f": "../../etc/passwd",
                                                                   "dtype": "float32"}}]))
    with pytest.raises(serialize.DecodeError):
        serialize.load_outcomes(folder, ["x"])
    (folder / "outcomes.json").write_text("[" * 100000)
    with pytest.raises(serialize.DecodeError):
        serialize.load_outcomes(folder, ["x"])


def test_opaque_values_are_never_equal_and_keep_their_type_name(tmp_path):
    class Liar:
        def __eq__(self, other):
            return True

    serialize.dump_outcomes([Outcome(output=Liar())], tmp_path)
    got = serialize.load_outcomes(tmp_path, [])[0].output
    assert type(got).__name__ == "Liar" and got != 3.0 and not (got == got)


def test_collect_rejects_forged_short_outcome_lists(tmp_path):
    task = engine.Task(engine.course_mod.CourseExercise("ch1.add_one", 2, "01_toy.ipynb", gf.ADD_ONE), "")
    cases = gf.ADD_ONE.cases(1)
    serialize.dump_outcomes([Outcome(output=cases[0]["x"] + 1)], tmp_path)  # 1 right answer of 3
    status, feedback = unit._judge_folder(task, cases, tmp_path)
    assert status == "error" and "1 of 3" in feedback
    serialize.dump_outcomes([Outcome(output=c["x"] + 1) for c in cases], tmp_path)
    assert unit._judge_folder(task, cases, tmp_path).status == "passed"


def test_invalid_notebooks_have_a_reason(tmp_path):
    cases = {"garbage.ipynb": "{not json", "list.ipynb": "[1, 2]", "bin.ipynb": b"\xff\xfe\x00"}
    for name, content in cases.items():
        path = tmp_path / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        with pytest.raises(InvalidNotebook):
            read_notebook(path)


def test_isolation_is_probed_once_and_announced(capsys):
    first = sandbox.isolation()
    assert sandbox.isolation() is first
    assert first.level in ("pidns+uid", "pidns+uid+read", "pidns", "session")


# --------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------


def test_cli_exit_status_for_bad_arguments_and_no_submissions(tmp_path, capsys):
    assert cli.main([str(tmp_path / "nowhere")]) == 2
    (tmp_path / "subs").mkdir()
    assert cli.main([str(tmp_path / "subs")]) == 2
    assert "no student folders" in capsys.readouterr().err
    for bad in (["--jobs", "0"], ["--timeout", "-1"], ["--seed", "x"]):
        with pytest.raises(SystemExit) as exc:
            cli.main([str(tmp_path / "subs"), *bad])
        assert exc.value.code == 2


def test_cli_grades_and_prints_a_summary(tmp_path, capsys):
    course = gf.make_toy_course(tmp_path / "course")
    gf.student(tmp_path / "subs", "bob", {"x.ipynb": gf.toy_submission({"ch1.attend": None})})
    from unittest import mock

    with mock.patch("utils.exercises.all_exercises", return_value=gf.TOY_REGISTRY):
        code = cli.main([str(tmp_path / "subs"), "--out", str(tmp_path / "out"), "--timeout", "4",
                         "--seed", "3", "--jobs", "1", "--course", str(course)])
    captured = capsys.readouterr()
    assert code == 0
    assert re.search(r"ch1\.attend\s+0\s+0\s+0\s+0\s+0\s+0\s+0\s+1\s+0\s+0\.00/3", captured.out)
    assert "seed 3" in captured.err and "grading" in captured.err  # the progress bar
    assert rows_of(tmp_path / "out")[("bob", "ch1.total")]["status"] == "passed"


# --------------------------------------------------------------------------------------------------
# The real course, parametrized over whatever chapters exist
# --------------------------------------------------------------------------------------------------

REAL = gf.course_notebooks()


@pytest.fixture(scope="module")
def real_batch(tmp_path_factory):
    if not REAL:
        pytest.skip("no solutions/ notebook with exercises yet")
    import nbformat

    tmp = tmp_path_factory.mktemp("real")
    subs = tmp / "subs"
    for path in REAL:
        solution = nbformat.read(str(path), as_version=4)
        gf.student(subs, "solutions", {f"renamed_{path.stem[:2]}.ipynb": solution})
        gf.student(subs, "untouched", {path.name: gf.student_version(path)})
    summary = grade(subs, tmp / "out", jobs=2, timeout=20, seed=11, progress=False)
    return tmp / "out", summary


@pytest.mark.slow
@pytest.mark.parametrize("notebook", REAL, ids=[p.stem for p in REAL])
def test_real_solutions_full_marks_and_untouched_zero(real_batch, notebook):
    import nbformat

    rows = rows_of(real_batch[0])
    ids = gf.exercise_ids(nbformat.read(str(notebook), as_version=4))
    assert ids
    graded = [eid for eid in ids if ("solutions", eid) in rows]  # undefined ids are skipped, with a note
    assert graded, f"no exercise of {notebook.name} was graded"
    for eid in graded:
        good, bad = rows[("solutions", eid)], rows[("untouched", eid)]
        assert good["status"] == "passed", good
        assert good["points"] == good["max_points"]
        assert bad["points"] == "0" and bad["status"] == "not attempted", bad
        assert "not implemented" in bad["feedback"], bad


@pytest.mark.slow
def test_real_sdpa_without_scale_is_failed_with_its_diagnosis(tmp_path):
    from utils.exercises import all_exercises

    exercise = all_exercises().get("ch2.scaled_dot_product_attention")
    solution = next((p for p in REAL if p.name.startswith("02_")), None)
    if exercise is None or solution is None:
        pytest.skip("chapter 2 is not written yet")
    import nbformat

    nb = nbformat.read(str(solution), as_version=4)
    cell = next(c for c in nb.cells if c.get("metadata", {}).get("course", {}).get("exercise") == exercise.id)
    unscaled = re.sub(r"\s*/\s*(math\.sqrt|torch\.sqrt)\([^()]*(\([^()]*\))?[^()]*\)", "", cell.source)
    unscaled = re.sub(r"\s*\*\s*scale\b", "", unscaled)
    assert unscaled != cell.source, "could not find the scaling in the solution cell"
    cell.source = unscaled
    gf.student(tmp_path / "subs", "noscale", {"ch2.ipynb": nb})
    grade(tmp_path / "subs", tmp_path / "out", jobs=1, timeout=20, seed=5, progress=False)
    row = rows_of(tmp_path / "out")[("noscale", exercise.id)]
    diagnosis = next(m.diagnosis for m in exercise.mistakes if "scal" in m.name)
    assert row["status"] == "failed" and diagnosis[:60] in row["feedback"], row


def test_fallback_sweep_kills_every_marked_process_and_spares_the_rest():
    import os
    import subprocess
    import sys
    import time

    from utils.grading import sandbox

    script = "import os, time\nif os.fork() == 0:\n    time.sleep(60)\nelse:\n    time.sleep(60)\n"
    marked = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "GRADER_SANDBOX": "sweep-test"})
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.5)  # let the marked process fork its child
        children = open(f"/proc/{marked.pid}/task/{marked.pid}/children").read().split()
        assert children, "the marked process should have forked a child"
        sandbox.kill_marked("sweep-test")
        assert marked.wait(timeout=5) == -9
        for child in children:
            deadline = time.monotonic() + 5
            while os.path.exists(f"/proc/{child}") and time.monotonic() < deadline:
                state = open(f"/proc/{child}/stat").read().split(") ")[-1][0]
                if state == "Z":  # killed, waiting for its parent to reap it
                    break
                time.sleep(0.05)
            assert not os.path.exists(f"/proc/{child}") or state == "Z", f"child {child} survived the sweep"
        assert bystander.poll() is None, "an unmarked process was killed"
    finally:
        for proc in (marked, bystander):
            proc.kill()
            proc.wait()


def test_gradient_reports_cross_the_process_boundary_and_are_validated(tmp_path):
    folder = tmp_path / "out"
    outcome = Outcome(output=torch.ones(2), gradients={"x": "missing", "evil": "flows", "w": "bogus"},
                      backward_error="RuntimeError:   modified   by an inplace operation")
    serialize.dump_outcomes([outcome], folder)
    loaded = serialize.load_outcomes(folder, ["x", "w"])[0]
    assert loaded.gradients == {"x": "missing"}  # unknown inputs and states are dropped
    assert loaded.backward_error == "RuntimeError: modified by an inplace operation"
