"""LMS exports (utils/grading/lms.py: roster, Canvas gradebook CSV) and the pip-installed grader
(the exercise list shipped as package data, utils/grading/manifest.py)."""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import sys
import zipfile
from fractions import Fraction
from pathlib import Path

import grader_fixtures as gf
import pytest
import tomllib

from utils import build
from utils.grading import batch, cli, course, lms, manifest
from utils.grading.course import CourseExercise
from utils.grading.unit import Row
from utils.paths import REPO_ROOT

pytestmark = pytest.mark.sandbox  # grades batches in sandboxed workers: make unit, not make quick

CANVAS_EXPORT = (
    "\ufeffStudent,ID,SIS User ID,SIS Login ID,Section,01_toy (4417),Current Score\n"
    "    Points Possible,,,,,6,(read only)\n"
    '"Doe, Jane",1234,S1,jdoe,A,,\n'
    '"Smith, Bob",555,S2,bsmith,A,,\n'
    '"=Evil, Eve",999,S3,eve,=cmd,,\n'
)
EXERCISES = [CourseExercise(eid, points, "01_toy.ipynb", None) for eid, points in gf.TOY_POINTS.items()] + [
    CourseExercise("ch2.more", 4, "02_more.ipynb", None)]


def rows_for(student: str, points: dict[str, int]) -> list[Row]:
    return [Row(student, e.id, points.get(e.id, 0), e.points, "passed", "") for e in EXERCISES]


def table(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_canvas_export_is_a_roster_and_matching_follows_the_documented_order(tmp_path):
    (tmp_path / "roster.csv").write_text(CANVAS_EXPORT, encoding="utf-8")
    roster = lms.read_roster(tmp_path / "roster.csv")
    assert [r["ID"] for r in roster.rows] == ["1234", "555", "999"]  # BOM and Points Possible row handled
    assert roster.assignment_headers == {"01_toy": "01_toy (4417)"}
    assert roster.match("jdoe") == (0, "")  # SIS Login ID
    assert roster.match("doejane", canvas_id="1234") == (0, "")  # Canvas layout: the user id
    assert roster.match("S2") == (1, "")  # SIS User ID
    assert roster.match("nobody")[0] is None and "no roster row" in roster.match("nobody")[1]
    (tmp_path / "two.csv").write_text("submission,ID\nann,1\nann,2\nbo,3\n")
    two = lms.read_roster(tmp_path / "two.csv")
    assert two.match("bo") == (2, "") and two.match("ann") == (None, "rows 2, 3 of the roster all have "
                                                                       "submission 'ann'")


@pytest.mark.parametrize("text, message", [
    ("", "is empty"), ("name,email\nx,y\n", "has none of the columns"), (b"\xff\xfe", "not UTF-8")])
def test_unusable_rosters_say_why(tmp_path, text, message):
    path = tmp_path / "roster.csv"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(lms.RosterError, match=message):
        lms.read_roster(path)
    with pytest.raises(lms.RosterError, match="is missing"):
        lms.read_roster(tmp_path / "nowhere.csv")


def test_canvas_csv_per_chapter_with_identities_first_and_points_possible(tmp_path):
    (tmp_path / "roster.csv").write_text(CANVAS_EXPORT, encoding="utf-8")
    roster = lms.read_roster(tmp_path / "roster.csv")
    rows = rows_for("jdoe", {"ch1.add_one": 2, "ch1.attend": 3, "ch2.more": 4}) + rows_for("stranger", {})
    rows += rows_for("eve", {})
    sheet = lms.canvas_csv(rows, ["jdoe", "stranger", "eve"], EXERCISES, roster=roster)
    lines = table(sheet.text)
    # 02_more has no Canvas assignment in the roster: left out, never a column Canvas would create
    assert lines[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "01_toy (4417)"]
    assert lines[1] == ["Points Possible", "", "", "", "", "6"]
    assert lines[2] == ["Doe, Jane", "1234", "S1", "jdoe", "A", "5"]
    assert lines[3] == ["'=Evil, Eve", "999", "S3", "eve", "'=cmd", "0"]  # display columns escaped
    assert len(lines) == 4  # Bob sent nothing: no row, so Canvas keeps what it holds for him
    assert sheet.absent == ["Smith, Bob"] and sheet.untouched == ["Smith, Bob (bsmith)"]
    assert sheet.unmatched == [("stranger", "no roster row has this submission's name")]
    assert (sheet.left_out, sheet.new) == (["02_more"], [])


def test_canvas_csv_per_exercise_from_canvas_file_names_without_roster():
    rows = rows_for("doejane", {"ch1.total": 1})
    sheet = lms.canvas_csv(rows, ["doejane"], EXERCISES, canvas_ids={"doejane": "1234"}, columns="exercise")
    lines = table(sheet.text)
    assert lines[0][5:] == [e.id for e in EXERCISES] and lines[1][5:] == ["2", "3", "1", "4"]
    assert lines[2] == ["doejane", "1234", "", "", "", "0", "0", "1", "0"]
    assert sheet.new == [e.id for e in EXERCISES]  # no roster, no ids: Canvas makes new assignments (and we say so)
    with pytest.raises(lms.RosterError, match="--format canvas needs --roster"):
        lms.canvas_csv(rows, ["doejane"], EXERCISES)
    with pytest.raises(ValueError, match="columns must be one of chapter, exercise, got 'week'"):
        lms.grade_columns(EXERCISES, "week")


def test_roster_without_format_and_format_without_identities_exit_2(tmp_path, capsys):
    gf.student(tmp_path / "subs", "bob", {"x.ipynb": gf.notebook([])})
    with pytest.raises(SystemExit) as exc:
        cli.main([str(tmp_path / "subs"), "--roster", "r.csv"])
    assert exc.value.code == 2 and "add --format canvas" in capsys.readouterr().err
    assert cli.main([str(tmp_path / "subs"), "--format", "canvas", "--out", str(tmp_path / "out")]) == 2
    assert "--format canvas needs --roster" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # refused before grading anyone


def test_a_canvas_download_graded_into_canvas_csv(tmp_path, capsys):
    subs = tmp_path / "subs"
    one = {"ch1.attend": None, "ch1.total": None}  # one exercise runs: a quick batch
    gf.write_notebook(subs / "doejane_1234_98765_01_toy.ipynb", gf.toy_submission(one))
    gf.write_notebook(subs / "nobody_42_98766_01_toy.ipynb", gf.notebook([]))
    (tmp_path / "roster.csv").write_text(CANVAS_EXPORT, encoding="utf-8")
    toy = gf.make_toy_course(tmp_path / "course")
    summary = batch.grade(subs, tmp_path / "out", jobs=2, timeout=4, seed=2, memory_mb=512, progress=False,
                        course_root=toy, registry=gf.TOY_REGISTRY, roster=tmp_path / "roster.csv",
                        lms_format="canvas")
    assert summary["layout"] == "canvas" and summary["canvas"].unmatched[0][0] == "nobody"
    lines = table((tmp_path / "out" / "canvas.csv").read_text())
    assert lines[0][5:] == ["01_toy (4417)"] and lines[2] == ["Doe, Jane", "1234", "S1", "jdoe", "A", "2"]
    err = capsys.readouterr().err
    assert "canvas.csv: 'nobody' is left out" in err and "2 roster students without a notebook to grade" in err
    index = table((tmp_path / "out" / "feedback" / "index.csv").read_text())  # SpeedGrader finds her by id (W25)
    assert index[0] == ["file", "student_id", "canvas_user_id"] and ["doejane.md", "doejane", "1234"] in index


# --------------------------------------------------------------------------------------------------
# The pip-installed grader: the exercise list is package data
# --------------------------------------------------------------------------------------------------


def test_shipped_exercise_list_matches_solutions_and_a_fresh_build():
    shipped = manifest.load_manifest()
    from_solutions, _where = course.course_entries(REPO_ROOT)
    assert [(e["notebook"], e["id"], e["points"]) for e in shipped] == from_solutions and shipped
    assert build.render(REPO_ROOT)[manifest.MANIFEST_PATH] == manifest.MANIFEST_PATH.read_text(encoding="utf-8"), (
        "utils/grading/exercises.json is stale: run `python -m utils.build`")
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    assert manifest.MANIFEST_FILE in config["tool"]["setuptools"]["package-data"]["utils.grading"]


def test_a_malformed_manifest_says_what_is_wrong(tmp_path):
    path = tmp_path / "exercises.json"
    assert manifest.load_manifest(path) == []
    for text, message in (("{", "not valid JSON"), ("{}", "no list of exercises"),
                          ('{"exercises": [{"id": "a", "points": -1, "notebook": "n"}]}', "malformed entry")):
        path.write_text(text)
        with pytest.raises(ValueError, match=message):
            manifest.load_manifest(path)


def installed_copy(tmp_path: Path) -> Path:
    """The package as a wheel would install it: utils/ alone, outside the repository, no solutions/."""
    site = tmp_path / "site"
    shutil.copytree(REPO_ROOT / "utils", site / "utils", ignore=shutil.ignore_patterns("__pycache__"))
    return site


def run_grader(site: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(site), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "utils.grade", *args], cwd=site, env=env, capture_output=True,
                          text=True, timeout=300)


def test_grader_outside_the_repository_uses_the_shipped_list(tmp_path):
    site = installed_copy(tmp_path)
    first = manifest.load_manifest()[0]["id"]  # one cell that does not parse: judged, but nothing runs
    gf.student(tmp_path / "subs", "kim", {"x.ipynb": gf.notebook([(first, "def broken(:\n")])})
    done = run_grader(site, str(tmp_path / "subs"), "--out", str(tmp_path / "out"), "--seed", "1", "--jobs", "1")
    assert done.returncode == 0, done.stderr
    with open(tmp_path / "out" / "results.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    shipped = manifest.load_manifest()
    totals: dict[str, Fraction] = {}
    for r in rows:  # one line per named part: the parts' maxima add up to the exercise's points
        totals[r["exercise"]] = totals.get(r["exercise"], Fraction(0)) + Fraction(r["max_points"])
    assert list(totals.items()) == [(e["id"], e["points"]) for e in shipped]


def test_a_grader_without_exercises_exits_2_with_one_sentence(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(batch, "COURSE_ROOT", tmp_path / "site-packages")  # an installed package: no solutions/
    monkeypatch.setattr(course, "load_manifest", lambda: [])  # ... and its exercise list is gone
    gf.student(tmp_path / "subs", "kim", {"x.ipynb": gf.notebook([])})
    assert cli.main([str(tmp_path / "subs"), "--out", str(tmp_path / "out"), "--seed", "1"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "grader: found no exercises to grade in the exercise list shipped with the package; pass --course with the "
        "folder of a course checkout (the one holding solutions/), or reinstall the course package")
    assert not (tmp_path / "out").exists()


def test_help_documents_course_layout_and_jobs(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--course COURSE the course folder whose solutions/*.ipynb give the exercises" in text
    assert "else the exercise list installed with the package" in text
    assert "--jobs JOBS students graded in parallel" in text and "--layout {auto,folders,canvas,flat}" in text


@pytest.mark.slow
def test_the_wheel_ships_the_exercise_list(course_wheel):
    with zipfile.ZipFile(course_wheel) as archive:
        assert "utils/grading/exercises.json" in archive.namelist()
        assert archive.read("utils/grading/exercises.json") == manifest.MANIFEST_PATH.read_bytes()


TWO_FOR_ONE = (
    "Student,ID,SIS User ID,SIS Login ID,Section,{first},Quiz (700),{second},quiz (701)\n"
    "    Points Possible,,,,,4.00,10,4.00,10\n"
    "Alice,301,s301,alice,S,1.00,9,2.00,8\n"
)
QKV = [CourseExercise("ch1.project_qkv", 4, "01_queries_keys_values.ipynb", 1)]


@pytest.mark.parametrize("first, second", [
    ("01_queries_keys_values (11)", "01_queries_keys_values (12)"),  # R10: the same name twice
    ("01 Queries-Keys Values (11)", "01_queries_keys_values (12)"),  # names alike but for case, spaces, - and _
])
def test_two_roster_assignments_for_one_graded_column_are_refused_naming_both(tmp_path, first, second):
    """R10, finding 3: the last of the two won silently, so the import updated one assignment of the two."""
    (tmp_path / "roster.csv").write_text(TWO_FOR_ONE.format(first=first, second=second), encoding="utf-8")
    roster = lms.read_roster(tmp_path / "roster.csv")
    with pytest.raises(lms.RosterError) as raised:
        lms.canvas_columns(QKV, "chapter", roster)
    message = str(raised.value)
    assert f"'{first}' and '{second}'" in message and "01_queries_keys_values" in message, message
    assert "Quiz" not in message  # two ungraded assignments alike are no concern of this run
    assert roster.grades[0][first] == "1.00" and roster.grades[0][second] == "2.00"  # both read, none dropped


def test_two_alike_assignments_nobody_grades_are_no_error(tmp_path):
    (tmp_path / "roster.csv").write_text(TWO_FOR_ONE.format(first="01_queries_keys_values (11)", second="Other (12)"),
                                         encoding="utf-8")
    layout, left_out, new = lms.canvas_columns(QKV, "chapter", lms.read_roster(tmp_path / "roster.csv"))
    assert [header for header, _ids, _max in layout] == ["01_queries_keys_values (11)"] and left_out == new == []


MANUAL_POSTING = (  # W6: Canvas exports a "Manual Posting" row when an assignment posts grades by hand
    "Student,ID,SIS User ID,SIS Login ID,Section,01_toy (4417),02 More (4418),Current Score\n"
    ",,,,,Manual Posting,,\n"
    "Manual Posting,,,,,,Manual Posting,\n"
    "    Points Possible,,,,,6,4,(read only)\n"
    '"Doe, Jane",1234,S1,jdoe,A,4,,80\n'
    '"Smith, Bob",555,S2,bsmith,A,,,\n'
)


@pytest.mark.parametrize("zero_missing", [False, True])
def test_canvas_manual_posting_rows_are_no_students_and_never_reach_canvas_csv(tmp_path, zero_missing):
    (tmp_path / "roster.csv").write_text(MANUAL_POSTING, encoding="utf-8")
    roster = lms.read_roster(tmp_path / "roster.csv")
    assert [r["ID"] for r in roster.rows] == ["1234", "555"] and len(roster.grades) == 2
    sheet = lms.canvas_csv(rows_for("jdoe", {"ch1.add_one": 2}), ["jdoe"], EXERCISES, roster=roster,
                           zero_missing=zero_missing)
    assert sheet.absent == ["Smith, Bob"]  # never "row 2" or "row 3"
    ids = [line[1] for line in table(sheet.text)[2:]]
    assert "" not in ids and "Manual Posting" not in sheet.text, sheet.text
