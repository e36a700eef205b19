"""The nbgrader export's hidden tests stay hidden: a per-course secret seed set at export and kept in the
instructor's course directory only (utils/grading/course_secret.py), and the course's judge, which grades
outside the student's kernel (utils/builder/nbgrader_hook.py, utils/grading/nbgrader_judge.py).

These tests need no nbgrader. The real nbgrader round trip (an attack notebook that patches its kernel,
a partially right one, the feedback, the same points as ``python -m utils.grade``) is the slow test of
tests/test_nbgrader_export.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import grader_fixtures as gf
import nbformat
import pytest

from utils.builder.cli import main as build_main
from utils.builder.nbgrader import HOOK_NAME, SECRET_NAME, export_nbgrader, nbgrader_config
from utils.builder.nbgrader_hook import CHANGED, FINGERPRINTS_NAME, SECRET_NOTICE, CourseJudge, fingerprint
from utils.grading.course_secret import read_secret, secret_mode
from utils.notebook_files import BuildError

CHAPTER = "01_queries_keys_values"


def test_the_secret_seed_is_set_at_export_and_lives_only_in_the_course_directory(tmp_path, capsys):
    course = tmp_path / "course"
    assert build_main(["--nbgrader", str(course), "--seed", "8675309123"]) == 0
    secret = course / SECRET_NAME
    assert read_secret(secret) == 8675309123 and secret_mode(secret) == 0o600
    assert "8675309123" not in capsys.readouterr().out  # the console does not show it either
    for path in course.rglob("*"):  # not in source/, not in a notebook, not in the config or the judge
        if path.is_file() and path != secret:
            assert "8675309123" not in path.read_text(encoding="utf-8"), path

    # exporting again keeps it; another --seed is refused, and nothing is rewritten
    drawn = tmp_path / "drawn"
    export_nbgrader(drawn, chapters={CHAPTER})
    first = read_secret(drawn / SECRET_NAME)
    assert SECRET_NAME not in [p.name for p in export_nbgrader(drawn, chapters={CHAPTER})]
    assert read_secret(drawn / SECRET_NAME) == first
    notebook = drawn / "source" / CHAPTER / f"{CHAPTER}.ipynb"
    notebook.write_text("edited", encoding="utf-8")
    with pytest.raises(BuildError, match="already holds this course's seed"):
        export_nbgrader(drawn, chapters={CHAPTER}, seed=first + 1)
    assert read_secret(drawn / SECRET_NAME) == first and notebook.read_text(encoding="utf-8") == "edited"


def test_seed_without_nbgrader_and_a_bad_seed_are_errors(tmp_path, capsys):
    with pytest.raises(SystemExit) as exited:
        build_main(["--seed", "3"])
    assert exited.value.code == 2 and "--seed is the secret of an nbgrader export" in capsys.readouterr().err
    assert build_main(["--nbgrader", str(tmp_path / "c"), "--seed", "-1"]) == 2
    assert "--seed must be a non-negative integer, got -1" in capsys.readouterr().err
    assert not (tmp_path / "c" / SECRET_NAME).exists()


def test_an_edited_config_is_kept_unless_forced(tmp_path):
    export_nbgrader(tmp_path, chapters={CHAPTER})
    config = tmp_path / "nbgrader_config.py"
    assert config.read_text(encoding="utf-8") == nbgrader_config(sys.executable)
    assert (tmp_path / HOOK_NAME).read_text(encoding="utf-8") == (
        gf.REPO / "utils" / "builder" / "nbgrader_hook.py"
    ).read_text(encoding="utf-8")
    edited = config.read_text(encoding="utf-8").replace(sys.executable, "/opt/course/bin/python")
    config.write_text(edited, encoding="utf-8")
    with pytest.raises(BuildError, match="nbgrader_config.py: differs from the configuration"):
        export_nbgrader(tmp_path, chapters={CHAPTER})
    assert config.read_text(encoding="utf-8") == edited
    export_nbgrader(tmp_path, chapters={CHAPTER}, force=True)
    assert config.read_text(encoding="utf-8") == nbgrader_config(sys.executable)


def _judge(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-I", "-m", "utils.grading.nbgrader_judge", *args], capture_output=True, text=True, timeout=300
    )


def test_without_its_secret_the_judge_grades_nothing_and_says_why(tmp_path):
    course = tmp_path / "course"
    export_nbgrader(course, chapters={CHAPTER})
    notebook = course / "source" / CHAPTER / f"{CHAPTER}.ipynb"
    secret = course / SECRET_NAME

    os.chmod(secret, 0o644)  # readable by every user: refused
    done = _judge(str(notebook), "--student", "alice", "--secret", str(secret), "--exercise", "ch1.project_qkv")
    assert done.returncode == 2 and f"{secret} is readable by other users" in done.stderr and done.stdout == ""

    secret.unlink()
    done = _judge(str(notebook), "--student", "alice", "--secret", str(secret), "--exercise", "ch1.project_qkv")
    assert done.returncode == 2 and done.stdout == ""
    assert f"the course's grading secret {secret} is missing, so the hidden cases cannot be drawn" in done.stderr

    # in nbgrader, the hook stops before the kernel starts, and fails the submission instead of grading it
    judge = CourseJudge(sys.executable, str(course), SECRET_NAME)
    nb = nbformat.read(str(notebook), as_version=4)
    with pytest.raises(RuntimeError, match=f"grading secret {secret} is missing.*nothing was graded"):
        judge.preflight(nb, {})
    resources = {"nbgrader": {"student": "alice", "assignment": CHAPTER, "notebook": CHAPTER}}
    with pytest.raises(RuntimeError, match="is missing"):
        judge(nb, resources)
    assert all(c.get("outputs", []) == [] for c in nb.cells)


def _submission(course, student: str, nb) -> tuple[object, dict]:
    path = course / "submitted" / student / CHAPTER / f"{CHAPTER}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    return path, {"nbgrader": {"student": student, "assignment": CHAPTER, "notebook": CHAPTER}}


def _unsolved(course):
    """The source notebook with every exercise's body replaced by the course's stub."""
    nb = nbformat.read(str(course / "source" / CHAPTER / f"{CHAPTER}.ipynb"), as_version=4)
    for cell in nb.cells:
        if cell.get("metadata", {}).get("course", {}).get("exercise"):
            head = cell.source.split("### BEGIN SOLUTION")[0]
            cell.source = head + "raise NotImplementedError\n"
    return nb


def test_the_judge_grades_the_copy_handed_in_when_the_kernel_rewrites_it(tmp_path, caplog):
    course = tmp_path / "course"
    export_nbgrader(course, chapters={CHAPTER})
    solved = (course / "source" / CHAPTER / f"{CHAPTER}.ipynb").read_bytes()
    handed_in = _unsolved(course)
    path, resources = _submission(course, "trudy", handed_in)
    original = path.read_bytes()
    judge = CourseJudge(sys.executable, str(course), SECRET_NAME)
    judge.preflight(handed_in, resources)
    path.write_bytes(solved)  # what a "Try it" cell of hers does while her kernel runs
    with caplog.at_level("WARNING"):
        judge(handed_in, resources)
    tests = [c for c in handed_in.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade")]
    assert [c.outputs[1].data["text/plain"] for c in tests] == ["0", "0"]  # the unsolved copy's points
    assert all(c.outputs[0].text.startswith(f"WARNING: {CHANGED}\n") for c in tests)
    assert f"trudy: {CHANGED}" in caplog.text
    assert path.read_bytes() == original  # what she handed in is back in submitted/

    # a file that another student's kernel changed after autograde began is refused, not graded
    judge = CourseJudge(sys.executable, str(course), SECRET_NAME)
    other, other_resources = _submission(course, "alice", handed_in)
    judge.preflight(handed_in, resources)  # trudy first: every submission's digest is taken now
    other.write_bytes(solved)
    with pytest.raises(RuntimeError, match=f"{other} changed after this autograde started"):
        judge.preflight(handed_in, other_resources)
    with pytest.raises(RuntimeError, match="was not read before its kernel started"):
        judge(handed_in, other_resources)


def test_outputs_that_show_the_secret_are_removed_and_logged(tmp_path, caplog):
    course = tmp_path / "course"
    export_nbgrader(course, chapters={CHAPTER}, seed=8675309123)
    nb = _unsolved(course)
    nb.cells[3].outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="patched\n"),
        nbformat.v4.new_output("stream", name="stdout", text=(course / SECRET_NAME).read_text()),
    ]
    nb.cells[5].outputs = [
        nbformat.v4.new_output("error", ename="ValueError", evalue="LEAK 8675309123", traceback=["x"]),
        nbformat.v4.new_output("display_data", data={"text/html": "<b>8675309123</b>"}),
        nbformat.v4.new_output("execute_result", data={"text/plain": "'867530912'"}, execution_count=1),
    ]
    judge = CourseJudge(sys.executable, str(course), SECRET_NAME)
    with caplog.at_level("WARNING"):
        assert judge.scrub(nb, "mallory", CHAPTER) == 3
    assert [o.get("text") for o in nb.cells[3].outputs] == ["patched\n", SECRET_NOTICE]
    assert [o.get("text") for o in nb.cells[5].outputs[:2]] == [SECRET_NOTICE, SECRET_NOTICE]
    assert nb.cells[5].outputs[2].data["text/plain"] == "'867530912'"  # not the secret: kept
    assert "8675309123" not in nbformat.writes(nb)
    assert f"mallory {CHAPTER}.ipynb cell 3: 1 output(s) showed the grading secret" in caplog.text
    assert f"mallory {CHAPTER}.ipynb cell 5: 2 output(s)" in caplog.text and "8675309123" not in caplog.text


def test_an_assignment_is_graded_only_with_the_secret_it_was_exported_with(tmp_path):
    course, other = tmp_path / "course", "02_scaled_dot_product_attention"
    export_nbgrader(course, chapters={CHAPTER}, seed=1111111)
    old = fingerprint(1111111)
    records = json.loads((course / FINGERPRINTS_NAME).read_text(encoding="utf-8"))
    assert records == {CHAPTER: old} and "1111111" not in json.dumps(records)
    secret = course / SECRET_NAME
    secret.rename(tmp_path / "moved")

    # exporting the chapter again would draw another secret: refused, and no secret is written
    with pytest.raises(BuildError, match=f"{CHAPTER} \\(secret fingerprint {old}\\) was exported with another"):
        export_nbgrader(course, chapters={CHAPTER})
    with pytest.raises(BuildError, match=f"would use \\(the secret with fingerprint {fingerprint(2222222)}\\)"):
        export_nbgrader(course, chapters={CHAPTER}, seed=2222222)
    assert not secret.exists()
    export_nbgrader(course, chapters={other}, seed=2222222)  # another chapter gets the new secret
    new = fingerprint(2222222)
    assert json.loads((course / FINGERPRINTS_NAME).read_text(encoding="utf-8")) == {CHAPTER: old, other: new}

    # autograding the earlier chapter with the new secret is refused, naming both fingerprints
    judge = CourseJudge(sys.executable, str(course), SECRET_NAME)
    nb = _unsolved(course)
    _, resources = _submission(course, "alice", nb)
    refused = f"{CHAPTER} was exported with the grading secret whose fingerprint is {old}, but {secret} has "
    with pytest.raises(RuntimeError, match=re.escape(f"{refused}fingerprint {new}")):
        judge.preflight(nb, resources)
    assert judge._handed_in == {}
    # --force exports it with the new secret (the instructor then generates and autogrades it again)
    export_nbgrader(course, chapters={CHAPTER}, force=True)
    assert json.loads((course / FINGERPRINTS_NAME).read_text(encoding="utf-8")) == {CHAPTER: new, other: new}
    judge = CourseJudge(sys.executable, str(course), SECRET_NAME)
    judge.preflight(nb, resources)
