"""The nbgrader export's hidden tests stay hidden: a per-course secret seed set at export and kept in the
instructor's course directory only (utils/grading/course_secret.py), and the course's judge, which grades
outside the student's kernel (utils/builder/nbgrader_hook.py, utils/grading/nbgrader_judge.py).

These tests need no nbgrader. The real nbgrader round trip (an attack notebook that patches its kernel,
a partially right one, the feedback, the same points as ``python -m utils.grade``) is the slow test of
tests/test_nbgrader_export.py.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import marshal
import os
import re
import shutil
import subprocess
import sys
import venv

import grader_fixtures as gf
import nbformat
import pytest

from utils.builder import nbgrader_hook
from utils.builder.cli import main as build_main
from utils.builder.nbgrader import HOOK_NAME, SECRET_NAME, export_nbgrader, nbgrader_config
from utils.builder.nbgrader_hook import CHANGED, FINGERPRINTS_NAME, JUDGE_CODE_NAME, CourseJudge, fingerprint
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
    os.utime(notebook, ns=(0, 0))  # a rewrite, even with the same text, would change this
    before = notebook.read_bytes()
    with pytest.raises(BuildError, match="already holds this course's seed"):
        export_nbgrader(drawn, chapters={CHAPTER}, seed=first + 1)
    assert read_secret(drawn / SECRET_NAME) == first and notebook.read_bytes() == before
    assert notebook.stat().st_mtime_ns == 0


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
    with pytest.raises(BuildError, match="nbgrader_config.py differs from the configuration"):
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


def _grade_cells(nb) -> list:
    return [c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade")]


def _points(nb) -> list[str]:
    return [c.outputs[1].data["text/plain"] for c in _grade_cells(nb)]


def test_every_submission_is_judged_before_any_kernel_runs(tmp_path, caplog, monkeypatch):
    """trudy's kernel runs first: it rewrites her own file (the solutions) and zed's (the stubs). Both were read
    and graded at the first preflight, in one process: each gets what was handed in, and both files come back."""
    course = tmp_path / "course"
    export_nbgrader(course, chapters={CHAPTER}, seed=8675309123)
    solved = nbformat.read(str(course / "source" / CHAPTER / f"{CHAPTER}.ipynb"), as_version=4)
    unsolved = _unsolved(course)
    trudy_path, trudy = _submission(course, "trudy", unsolved)
    zed_path, zed = _submission(course, "zed", solved)
    handed_in = {path: path.read_bytes() for path in (trudy_path, zed_path)}
    graders, run = [], subprocess.run
    monkeypatch.setattr(nbgrader_hook.subprocess, "run", lambda cmd, **kw: graders.append(cmd) or run(cmd, **kw))
    judge = CourseJudge(sys.executable, str(course), SECRET_NAME)
    judge.preflight(unsolved, trudy)
    assert len(graders) == 1  # every submission graded at once, before trudy's kernel

    # trudy's kernel: she hands herself the solutions and zed the stubs, and prints what she read
    trudy_path.write_bytes(handed_in[zed_path])
    zed_path.write_bytes(handed_in[trudy_path])
    free = next(i for i, c in enumerate(unsolved.cells) if c.cell_type == "code" and "nbgrader" not in c.metadata)
    unsolved.cells[free].outputs = [
        nbformat.v4.new_output("stream", name="stdout", text=f"OTHERS {zed_path} 8675309123\n"),
        nbformat.v4.new_output("display_data", data={"text/plain": "HEX " + hex(8675309123)}),
    ]
    with caplog.at_level("INFO"):
        judge(unsolved, trudy)
    assert _points(unsolved) == ["0", "0"]  # what she handed in: the stubs
    assert unsolved.cells[free].outputs == []  # nothing her kernel printed reaches her feedback
    written = nbformat.writes(unsolved)
    assert "8675309123" not in written and str(zed_path) not in written and hex(8675309123) not in written
    assert f"trudy {CHAPTER}.ipynb cell {free}: 1 output(s) showed the grading secret" in caplog.text
    assert f"trudy {CHAPTER}.ipynb: the outputs of 1 code cell(s) that are not test cells were removed" in caplog.text
    assert f"trudy: {CHANGED}" in caplog.text and trudy_path.read_bytes() == handed_in[trudy_path]

    # zed's turn: his file was changed before his kernel ran; he is graded on what he handed in, not refused
    judge.preflight(solved, zed)
    judge(solved, zed)
    maximum = [float(c.metadata.nbgrader.points) for c in _grade_cells(solved)]
    assert [float(p) for p in _points(solved)] == maximum and len(maximum) == 2
    assert all(c.outputs[0].text.startswith(f"WARNING: {CHANGED}\n") for c in _grade_cells(solved))
    assert zed_path.read_bytes() == handed_in[zed_path] and len(graders) == 1

    # a submission that was not there when autograde began (a kernel wrote it) is refused, not graded
    late, late_resources = _submission(course, "eve", solved)
    with pytest.raises(RuntimeError, match=f"{late} was not in submitted/ when this autograde began"):
        judge.preflight(solved, late_resources)
    assert len(graders) == 1


def _course_python(tmp_path):
    """A Python that imports a copy of the course package (tmp_path/checkout/utils), as a COURSE_PYTHON whose
    checkout a kernel can write; torch and the rest come from this venv's site-packages."""
    checkout = tmp_path / "checkout"
    shutil.copytree(gf.REPO / "utils", checkout / "utils", ignore=shutil.ignore_patterns("__pycache__"))
    (checkout / "solutions").symlink_to(gf.REPO / "solutions")
    env = tmp_path / "env"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(env)
    site = next((env / "lib").glob("python3*/site-packages"))
    paths = [p for p in sys.path[1:] if p and os.path.realpath(p) != str(gf.REPO)]
    (site / "course.pth").write_text("\n".join([str(checkout), *paths]) + "\n", encoding="utf-8")
    return env / "bin" / "python", checkout / "utils"


def _plant_bytecode(source, code: str) -> None:
    """A cached bytecode file for ``source`` whose header matches the source's time and size, as Python checks
    it: an import that trusts __pycache__ runs ``code`` instead of the source."""
    info = source.stat()
    cache = importlib.util.cache_from_source(str(source))
    os.makedirs(os.path.dirname(cache), exist_ok=True)
    header = importlib.util.MAGIC_NUMBER + bytes(4)
    header += int(info.st_mtime).to_bytes(4, "little") + (info.st_size & 0xFFFFFFFF).to_bytes(4, "little")
    with open(cache, "wb") as handle:
        handle.write(header + marshal.dumps(compile(code, str(source), "exec")))


def test_judge_code_changed_since_the_export_is_refused_and_its_bytecode_is_never_used(tmp_path):
    python, package = _course_python(tmp_path)
    course = tmp_path / "course"
    export_nbgrader(course, chapters={CHAPTER}, python=str(python))
    record = json.loads((course / JUDGE_CODE_NAME).read_text(encoding="utf-8"))
    assert record["package"] == str(package.resolve()) and secret_mode(course / JUDGE_CODE_NAME) == 0o600
    assert "grading/nbgrader_judge.py" in record["files"] and not any("__pycache__" in f for f in record["files"])
    nb = _unsolved(course)
    _, resources = _submission(course, "oscar", nb)

    # an earlier run's kernel patched the judge's reader (as W9's oscar did): the first preflight refuses
    target = package / "grading" / "nbgrader_judge.py"
    original = target.read_bytes()
    target.write_bytes(original.replace(b"data = sys.stdin.buffer.read(limit + 1)", b"data = b''"))
    judge = CourseJudge(str(python), str(course), SECRET_NAME)
    changed = f"differs from what the export recorded in {JUDGE_CODE_NAME}: grading/nbgrader_judge.py (in "
    with pytest.raises(RuntimeError, match=re.escape(f"{changed}{record['package']})")):
        judge.preflight(nb, resources)
    with pytest.raises(RuntimeError, match="nothing was graded"):  # every later student too, without a new run
        judge.preflight(nb, resources)

    # the source restored, but a planted bytecode file that forges full points: the checked source is run
    target.write_bytes(original)
    exercises = {e: {"points": "2", "max_points": 2, "status": "passed", "feedback": "ok", "parts": []}
                 for e in ("ch1.project_qkv", "ch1.attention_scores")}
    forged = {"isolation": "", "students": {"oscar": {"exercises": exercises}}}
    _plant_bytecode(target, f"import json\ndef batch_main(payload):\n    print(json.dumps({forged!r}))\n    return 0\n")
    judge = CourseJudge(str(python), str(course), SECRET_NAME)
    judge.preflight(nb, resources)
    judge(nb, resources)
    assert _points(nb) == ["0", "0"]  # graded by the judge's real code: the stubs earn nothing


def test_an_assignment_is_graded_only_with_the_secret_it_was_exported_with(tmp_path):
    course, other = tmp_path / "course", "02_scaled_dot_product_attention"
    export_nbgrader(course, chapters={CHAPTER}, seed=1111111)
    old = fingerprint(1111111)
    records = json.loads((course / FINGERPRINTS_NAME).read_text(encoding="utf-8"))
    assert records == {CHAPTER: old} and "1111111" not in json.dumps(records)
    assert secret_mode(course / FINGERPRINTS_NAME) == 0o600  # W12: a short --seed could be tried against it
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


def test_nbgrader_metadata_a_student_added_is_dropped_and_a_locked_copy_removed(tmp_path, monkeypatch):
    """Walkthrough W28: a student who gave a cell of their own nbgrader metadata (a 10-point ``ch1-bonus``) made
    nbgrader refuse the notebook and record 0.0 for correct work; the judge now keeps the cell as an ordinary
    one. A pasted copy of a locked cell is still removed (W14), and the assignment's own cells keep theirs."""
    course = tmp_path / "course"
    export_nbgrader(course, chapters={CHAPTER})
    nb = nbformat.read(str(course / "source" / CHAPTER / f"{CHAPTER}.ipynb"), as_version=4)
    tests = [c for c in nb.cells if str(c.metadata.get("nbgrader", {}).get("grade_id", "")).endswith("-tests")]
    added = nbformat.v4.new_markdown_cell("my bonus answer")
    added.metadata["nbgrader"] = {"grade": True, "grade_id": "ch1-bonus", "points": 10, "solution": True}
    nameless = nbformat.v4.new_code_cell("x = 1")
    nameless.metadata["nbgrader"] = {"grade": True, "points": 5}
    masked = nbformat.v4.new_markdown_cell("my notes")  # R26: a test cell's metadata on a cell before it
    masked.metadata["nbgrader"] = copy.deepcopy(tests[0].metadata["nbgrader"])
    nb.cells.insert(1, masked)
    nb.cells += [added, nameless, copy.deepcopy(tests[0])]
    logged: list[str] = []
    monkeypatch.setattr(nbgrader_hook, "_warn", lambda message, level="warning": logged.append(message))
    judge = CourseJudge(sys.executable, str(course), SECRET_NAME)
    resources = {"nbgrader": {"student": "ivan", "assignment": CHAPTER, "notebook": CHAPTER}}
    kept, _ = judge.drop_copies(nb, resources)
    kept_sources = [c.source for c in kept.cells]
    assert "my bonus answer" in kept_sources and "x = 1" in kept_sources and "my notes" in kept_sources
    assert all("nbgrader" not in c.metadata for c in kept.cells if c.source in ("my bonus answer", "x = 1", "my notes"))
    assert tests[0].source in kept_sources  # the real test cell stays, not the markdown one that came first
    ids = [c.metadata["nbgrader"]["grade_id"] for c in kept.cells if "nbgrader" in c.metadata]
    assert len(ids) == len(set(ids)) and tests[0].metadata["nbgrader"]["grade_id"] in ids  # the copy went
    said = "\n".join(logged)
    assert "ch1-bonus" in said and "no grade_id" in said and "a copy of the locked cell" in said
