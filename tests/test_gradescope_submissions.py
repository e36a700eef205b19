"""What a student uploads to Gradescope, graded as ``python -m utils.grade`` grades it (an instructor's
walkthrough, issue 35): two copies of a chapter keep their times, so the newest is graded and the student
is told which; a zip is read as the local grader reads it; a run the grader refuses (no safe isolation) or
that fails is an autograder error Gradescope shows as one (no ``results.json``, a non-zero exit: its
"The autograder failed to execute correctly"), never a score of 0.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile

import grader_fixtures as gf
import pytest
import test_gradescope as tg
from test_gradescope import TOY, check_spec, lay_out, run_autograder, scored

from utils.grading import gradescope, sandbox
from utils.grading.gradescope import run_gradescope

pytestmark = pytest.mark.sandbox

WRONG = {"ch1.attend": "def attend(q, k, v):\n    return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v\n"}
OLD, NEW = 1_600_000_000, 1_700_000_000


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return tg.make_bundle(tmp_path_factory)


@pytest.fixture
def autograder_root():
    with tg.temporary_root() as root:
        yield root


def test_the_newest_of_two_copies_is_graded_and_the_student_is_told_which(bundle, autograder_root):
    """The older, wrong copy's name sorts last: copied without its time it would look newest."""
    root = lay_out(autograder_root, bundle, {"01_toy (1).ipynb": gf.toy_submission(),
                                             "01_toy.ipynb": gf.toy_submission(WRONG)})
    os.utime(root / "submission" / "01_toy (1).ipynb", (NEW, NEW))
    os.utime(root / "submission" / "01_toy.ipynb", (OLD, OLD))
    data = run_autograder(root, *TOY)
    check_spec(data, list(gf.TOY_SOLUTIONS), [float(gf.TOY_POINTS[e]) for e in gf.TOY_SOLUTIONS])
    assert data["score"] == 6, [(t["name"], t["score"]) for t in scored(data)]
    assert "01_toy.ipynb (not graded for ch1.add_one, ch1.attend, ch1.total: 01_toy (1).ipynb holds it too and " \
           "was modified later; the newest copy is graded)" in data["output"], data["output"]


def test_a_newest_copy_that_cannot_be_read_is_shown_with_the_copy_graded(bundle, autograder_root):
    """Issue 35: the newer copy, cut short, was dropped without a word and the older one graded."""
    root = lay_out(autograder_root, bundle, {"01_toy.ipynb": gf.toy_submission(WRONG)})
    (root / "submission" / "01_toy (1).ipynb").write_text(json.dumps(gf.toy_submission())[:50], encoding="utf-8")
    os.utime(root / "submission" / "01_toy (1).ipynb", (NEW, NEW))
    os.utime(root / "submission" / "01_toy.ipynb", (OLD, OLD))
    data = run_autograder(root, *TOY)
    assert "01_toy (1).ipynb (this is your newest copy of chapter 1, but it is not valid JSON, so nothing in it " \
           "was graded; graded from an older copy instead: ch1.add_one, ch1.attend, ch1.total (01_toy.ipynb)" \
           in data["output"], data["output"]
    assert data.get("output_visibility", "visible") == "visible"


def zipped(members: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in members.items():
            archive.writestr(name, text)
    return buffer.getvalue()


def test_a_zip_is_graded_as_the_local_grader_grades_it(bundle, autograder_root):
    root = lay_out(autograder_root, bundle, {})
    text = json.dumps(gf.toy_submission())
    (root / "submission" / "chloé.zip").write_bytes(zipped({"work/01_toy.ipynb": text}))
    data = run_autograder(root, *TOY)
    assert data["score"] == 6, data["output"]
    assert "not a notebook" not in data["output"]


def test_a_file_that_is_neither_is_named_with_what_is_read(bundle, autograder_root):
    root = lay_out(autograder_root, bundle, {"01_toy.ipynb": gf.toy_submission(), "notes.txt": "hello"})
    data = run_autograder(root, *TOY)
    assert "Not graded: notes.txt (not a notebook or zip)." in data["output"], data["output"]


def test_a_file_name_with_control_or_bidirectional_characters_is_shown_escaped(bundle, autograder_root):
    """A name such as ``x\u202etxt.exe`` (shown as ``xexe.txt``) or one with ESC is written as escapes."""
    root = lay_out(autograder_root, bundle, {"01_toy.ipynb": gf.toy_submission(), "a\u202etxt.exe": "hi",
                                             "b\x1b[2K.txt": "hi"})
    data = run_autograder(root, *TOY)
    assert "a\\u202etxt.exe (not a notebook or zip)" in data["output"], data["output"]
    assert "b\\x1b[2K.txt (not a notebook or zip)" in data["output"], data["output"]
    assert "\u202e" not in json.dumps(data, ensure_ascii=False) and "\x1b" not in data["output"]


def run_main(root, *args):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env |= {"AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable, "OMP_NUM_THREADS": "1",
            "PYTHONPATH": os.pathsep.join([str(root / "source" / "course"), str(gf.REPO / "tests")])}
    return subprocess.run([str(root / "source" / "run_autograder"), *args], env=env, cwd="/", capture_output=True,
                          text=True, timeout=300)


def test_a_refused_run_is_an_autograder_error_not_a_score(bundle, autograder_root, monkeypatch):
    root = lay_out(autograder_root, bundle, {"01_toy.ipynb": gf.toy_submission()})
    (root / "results" / "results.json").write_text('{"score": 6}', encoding="utf-8")  # an earlier run's
    monkeypatch.setattr(sandbox, "isolation", lambda *a, **k: sandbox.Isolation("session", (), ""))
    graded = []
    monkeypatch.setattr(gradescope, "grade", lambda *a, **k: graded.append(1) or {"rows": []})
    assert run_gradescope(root, registry=gf.TOY_REGISTRY) is None and graded == []
    assert not (root / "results" / "results.json").exists()  # Gradescope: "failed to execute correctly"
    monkeypatch.setattr(gradescope, "run_gradescope", lambda *a, **k: None)
    monkeypatch.setattr(gradescope, "become_subreaper", lambda: True)
    assert gradescope.main(["--root", str(root)]) == 1


def test_a_failing_grader_exits_non_zero_without_results_json(bundle, autograder_root):
    root = lay_out(autograder_root, bundle, {"01_toy.ipynb": gf.toy_submission()})
    done = run_main(root, "--registry", "grader_fixtures:REPO")  # not a mapping: the grader raises inside
    assert done.returncode == 1, done.stdout + done.stderr
    assert not (root / "results" / "results.json").exists()
    assert "the grader failed: TypeError" in done.stdout + done.stderr


def test_a_copy_inside_a_folder_is_named_by_its_own_path(bundle, autograder_root):
    """W4: ``old/01_toy.ipynb`` was shown as ``old__01_toy.ipynb``, a name the student never wrote."""
    root = lay_out(autograder_root, bundle, {"01_toy.ipynb": gf.toy_submission()})
    (root / "submission" / "old").mkdir()
    (root / "submission" / "old" / "01_toy.ipynb").write_text(json.dumps(gf.toy_submission(WRONG)), encoding="utf-8")
    os.utime(root / "submission" / "01_toy.ipynb", (NEW, NEW))
    os.utime(root / "submission" / "old" / "01_toy.ipynb", (OLD, OLD))
    data = run_autograder(root, *TOY)
    assert data["score"] == 6, [(t["name"], t["score"]) for t in scored(data)]
    assert "Not graded: old/01_toy.ipynb (not graded for ch1.add_one, ch1.attend, ch1.total: 01_toy.ipynb holds " \
           "it too and was modified later" in data["output"], data["output"]
    assert "old__" not in json.dumps(data)
