"""Rough edges an instructor meets (issue 35), graded in one shared batch of a two-chapter toy course:
a chapter handed in twice, a broken chapter notebook, feedback longer than 300 characters, names in
any script or differing only in case, control characters in file names, a notebook whose cells share
one id, and submissions too slow to read."""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import json
import os
import threading
import time
import warnings
import zipfile

import grader_fixtures as gf
import pytest
from test_grader_chapters import CH1, CH2, two_chapter_course

from utils.exercises.common import one_line
from utils.exercises.definition import Mistake
from utils.grading import batch, cli, course, engine, intake, report

LONG = (
    "You took the mean of the entries, not their sum. The mean divides the sum by how many entries "
    "there are, so your answer is too small by exactly that factor whenever there is more than one "
    "entry. Look at the docstring again: it asks for the total. Replace the mean by a sum, keep the "
    "float64 accumulation, and return a Python float as before."
)
assert len(LONG) > 300
TOTAL = dataclasses.replace(
    gf.TOTAL,
    id="ch2.total",
    mistakes=(Mistake("mean", lambda x: float(x.double().mean()), LONG), gf.TOTAL.mistakes[1]),
)
REGISTRY = {"ch1.add_one": gf.ADD_ONE, "ch1.attend": gf.ATTEND, "ch2.total": TOTAL}
ADD_ONE = {"ch1.add_one": CH1["ch1.add_one"]}
ADD_TWO = {"ch1.add_one": "def add_one(x):\n    return x + 2\n"}
MEAN = {"ch2.total": "def total(x):\n    return float(x.double().mean())\n"}
EVIL = "evil\x1b[2K\rgrader: 0 errors"
SPIN_SECONDS = 4.0  # CPU seconds each of spin's notebooks takes to "read"


def many_ids(count: int) -> str:
    cells = [
        {"cell_type": "code", "id": "same", "metadata": {}, "source": "x = 1", "outputs": [], "execution_count": None}
        for _ in range(count)
    ]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


@pytest.fixture(scope="module")
def edges(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("edges")
    subs = tmp / "subs"
    old = gf.student(subs, "dup", {"01_toy.ipynb": gf.notebook(list(ADD_TWO.items()))}) / "01_toy.ipynb"
    new = gf.write_notebook(subs / "dup" / "01_toy (1).ipynb", gf.notebook(list(ADD_ONE.items())))
    os.utime(old, (1_600_000_000, 1_600_000_000))
    os.utime(new, (1_700_000_000, 1_700_000_000))  # the resubmission, named less like the chapter
    gf.student(subs, "broken", {"02_more.ipynb": '{"cells": [ not json'})
    older = gf.student(subs, "cut", {"01_toy.ipynb": gf.notebook(list(ADD_TWO.items()))}) / "01_toy.ipynb"
    newer = subs / "cut" / "01_toy (1).ipynb"
    newer.write_text(json.dumps(gf.notebook(list(ADD_ONE.items())))[:40], encoding="utf-8")  # cut short
    os.utime(older, (1_600_000_000, 1_600_000_000))
    os.utime(newer, (1_700_000_000, 1_700_000_000))
    gf.student(subs, "stray", {"01_toy.ipynb": gf.notebook(list(CH1.items())),
                               "02_more.ipynb": gf.notebook(list(MEAN.items())), "notes.ipynb": "{"})
    gf.student(subs, "verbose", {"02_more.ipynb": gf.notebook(list(MEAN.items()))})
    for name in ("José Núñez", "张伟", "Alice", "alice"):
        gf.student(subs, name, {"x.ipynb": gf.notebook([])})
    gf.student(subs, "ids", {"x.ipynb": many_ids(3000)})
    (gf.student(subs, EVIL, {}) / "notes.txt").write_text("x")
    (subs / "x\r\ngrader: 0 errors.txt").write_text("x")
    gf.student(subs, "hang", {"02_more.ipynb": gf.notebook(list(CH2.items()))})
    gf.student(subs, "spin", {"a.ipynb": gf.notebook([]), "b.ipynb": gf.notebook(list(CH2.items()))})
    release = threading.Event()
    real_read = intake.read_notebook

    def read(path, notes=None):
        if path.parent.name == "hang":
            release.wait(600)  # a read that blocks: only the watchdog's wall clock ends it
        if path.parent.name == "spin":
            start = time.thread_time()
            while time.thread_time() - start < SPIN_SECONDS:  # a read that computes: its CPU time ends it
                pass
        return real_read(path, notes)

    stderr = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        patch.setattr(intake, "read_notebook", read)
        patch.setattr(engine, "READ_CPU_SECONDS", SPIN_SECONDS - 1)
        patch.setattr(engine, "READ_WALL_SECONDS", 30.0)  # far above what a tiny notebook takes on a busy machine
        with contextlib.redirect_stderr(stderr):
            summary = batch.grade(
                subs,
                tmp / "out",
                jobs=2,
                timeout=4,
                seed=1,
                memory_mb=512,
                progress=False,
                course_root=two_chapter_course(tmp / "course"),
                registry=REGISTRY,
                feedback="full",
            )
    release.set()
    out = tmp / "out"
    return {
        "out": out,
        "summary": summary,
        "rows": gf.exercise_rows(out),
        "results": read_csv(out / "results.csv"),
        "err": stderr.getvalue(),
        "warnings": [str(w.message) for w in caught],
    }


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as handle:  # newline="": a name's \r stays in its cell
        return list(csv.DictReader(handle))


def unplaced(edges, student):
    return [r["feedback"] for r in edges["results"] if r["status"] == "unplaced" and r["student_id"] == student]


@pytest.mark.sandbox
def test_of_a_chapter_handed_in_twice_the_newest_copy_is_graded_and_the_other_reported(edges):
    assert edges["rows"][("dup", "ch1.add_one")]["status"] == "passed"
    assert unplaced(edges, "dup") == [
        "01_toy.ipynb: not graded for ch1.add_one: 01_toy (1).ipynb holds it too and "
        "was modified later; the newest copy is graded"
    ]


@pytest.mark.sandbox
def test_a_newest_copy_that_cannot_be_read_is_reported_and_the_older_copy_named(edges):
    """Issue 35: a resubmission cut short was dropped silently and the older copy graded as if it were all."""
    assert edges["rows"][("cut", "ch1.add_one")]["status"] == "failed"  # the older copy, the only one readable
    [line] = [f for f in unplaced(edges, "cut") if f.startswith("01_toy (1).ipynb: ")]
    assert "this is your newest copy of chapter 1, but it is not valid JSON" in line, line
    assert "graded from an older copy instead: ch1.add_one (01_toy.ipynb)" in line, line
    feedback = (edges["out"] / "feedback" / "cut.md").read_text(encoding="utf-8")
    assert "01_toy (1).ipynb" in feedback and "this is your newest copy of chapter 1" in feedback
    assert "01_toy (1).ipynb (this is your newest copy of chapter 1" in edges["err"]


@pytest.mark.sandbox
def test_a_notebook_that_cannot_be_read_is_never_dropped_silently(edges):
    """Every exercise has a readable cell, so no row blames notes.ipynb: it gets a line of its own."""
    assert {edges["rows"][("stray", e)]["status"] for e in (*CH1, "ch2.total")} <= {"passed", "failed"}
    assert unplaced(edges, "stray") == ["notes.ipynb: this notebook is not valid JSON, so "
                                        "nothing in it was graded; hand it in again as saved by Jupyter"]


@pytest.mark.sandbox
def test_a_broken_notebook_is_blamed_only_for_its_own_chapter(edges):
    rows = edges["rows"]
    assert rows[("broken", "ch2.total")]["status"] == "invalid"
    assert rows[("broken", "ch2.total")]["feedback"].startswith("02_more.ipynb is not valid JSON")
    for exercise in CH1:  # chapter 1 was never handed in: missing, with its own reason
        assert rows[("broken", exercise)]["status"] == "missing"
        assert "02_more" not in rows[("broken", exercise)]["feedback"]


@pytest.mark.sandbox
def test_full_feedback_keeps_every_sentence(edges):
    row = edges["rows"][("verbose", "ch2.total")]
    assert row["status"] == "failed" and LONG in row["feedback"] and "…" not in row["feedback"]
    assert LONG in (edges["out"] / "feedback" / "verbose.md").read_text(encoding="utf-8")


def test_a_bounded_line_ends_at_a_sentence_and_says_how_much_is_left():
    for limit, last in ((250, "than one entry."), (200, "not their sum."), (40, "You took the mean")):
        cut = one_line(LONG, limit=limit)
        kept, marker = cut.split(" (…")
        assert len(cut) <= limit and LONG.startswith(kept) and kept.endswith(last), (limit, cut)
        assert marker == f"{len(LONG) - len(kept)} more characters)"
    assert one_line(LONG) == LONG  # no bound unless asked


@pytest.mark.sandbox
def test_names_are_kept_exactly_and_their_feedback_files_differ_on_any_disk(edges):
    out = edges["out"]
    grades = {r["student_id"] for r in read_csv(out / "grades.csv")}
    assert {"José Núñez", "张伟", "Alice", "alice", EVIL} <= grades
    index = {r["student_id"]: r["file"] for r in read_csv(out / "feedback" / "index.csv")}
    assert (index["José Núñez"], index["张伟"]) == ("José_Núñez.md", "张伟.md")  # readable
    assert len({name.casefold() for name in index.values()}) == len(index)  # Alice.md and alice.md would be one
    assert index[EVIL] == "evil__2K_grader__0_errors.md"
    for student, file in index.items():
        assert f"# Feedback for {student}" in (out / "feedback" / file).read_text("utf-8") or student == EVIL


@pytest.mark.sandbox
def test_control_characters_in_names_cannot_forge_console_lines(edges):
    err = edges["err"]
    assert "\x1b" not in err and "\r" not in err
    assert not [line for line in err.splitlines() if line.startswith("grader: 0 errors")]
    assert "grader: not graded: evil\\x1b[2K\\rgrader: 0 errors/notes.txt" in err
    assert "grader: not graded: x\\r\\ngrader: 0 errors.txt" in err


@pytest.mark.sandbox
def test_cells_sharing_one_id_give_one_warning_line(edges):
    lines = [line for line in edges["err"].splitlines() if "earlier cell's id" in line]
    assert lines == [
        "grader: warning: ids: x.ipynb: 2999 cells repeat an earlier cell's id; the grader gave them "
        "fresh ids, as Jupyter does"
    ]
    assert not [w for w in edges["warnings"] if "cell id" in w.lower()]  # nbformat's own: one per cell


@pytest.mark.sandbox
def test_a_submission_too_slow_to_read_costs_only_itself(edges):
    rows = edges["rows"]
    for exercise in (*CH1, "ch2.total"):
        assert rows[("hang", exercise)]["status"] == "invalid"
        assert (
            "watchdog gave up on this student while reading and checking its notebooks"
            in rows[("hang", exercise)]["feedback"]
        )
        assert rows[("spin", exercise)]["status"] == "invalid"
        assert f"took more than {SPIN_SECONDS - 1:.0f} s of CPU time" in rows[("spin", exercise)]["feedback"]
    assert rows[("dup", "ch1.add_one")]["status"] == "passed"  # the others were graded


def test_help_lists_the_gradescope_bundle_and_the_autograder_variables(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "python -m utils.grade gradescope-bundle OUT.zip" in text
    assert "AUTOGRADER_ROOT the folder the autograder works in" in text and "default /autograder" in text
    assert "AUTOGRADER_PYTHON the Python that run_autograder grades with" in text
    assert "--chapters LIST grade only these chapters" in text


def test_a_newest_copy_over_the_size_limit_in_a_zip_is_reported_with_the_copy_graded(tmp_path):
    """Issue 35: a zip member over the notebook size limit vanished without a line."""
    subs = tmp_path / "subs"
    subs.mkdir()
    with zipfile.ZipFile(subs / "zoe.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(zipfile.ZipInfo("work/01_toy.ipynb", (2020, 1, 1, 0, 0, 0)),
                         json.dumps(gf.notebook(list(CH1.items()))))
        archive.writestr(zipfile.ZipInfo("work/01_toy (1).ipynb", (2024, 1, 1, 0, 0, 0)),
                         "{" + " " * (21 * 2**20))  # 21 MB of spaces: a few kB zipped
    [submission] = intake.collect(subs).students
    exercises = course.load_course(two_chapter_course(tmp_path / "course"), REGISTRY)
    _decided, tasks, skipped = engine.plan_student(submission, exercises, frozenset({1, 2}))
    assert [t.course.id for t in tasks] == list(CH1)
    [line] = [u.line() for u in skipped]
    assert line == ("zoe.zip:work/01_toy (1).ipynb (this is your newest copy of chapter 1, but it is too large "
                    "(more than 20 MB), so nothing in it was graded; graded from an older copy instead: "
                    "ch1.add_one, ch1.attend (zoe.zip:work/01_toy.ipynb); hand it in again as saved by Jupyter "
                    "if it holds newer work)")


def test_control_and_bidirectional_characters_are_escaped_in_results_and_feedback_files(tmp_path):
    """Issue 35 (R5): a name with ESC, U+202E or CR/LF reached results.csv and the feedback file raw (a
    terminal that shows them obeys them; U+202E shows ``gpj.exe`` as ``exe.jpg``). Display cells and
    feedback escape them, as the console does; ``student_id`` stays exact, the key gradebooks join on."""
    name = "eve\x1b[2K\u202egpj.exe"
    rows = [batch.unplaced_rows([intake.Unplaced("x\r\ngrader: 0 errors\u202e.txt", "not a notebook", name)])[0]]
    report.write_all(tmp_path, rows, [name], [])
    [line] = read_csv(tmp_path / "results.csv")
    assert line["student"] == "eve\\x1b[2K\\u202egpj.exe" and line["student_id"] == name
    assert line["feedback"] == "x\\r\\ngrader: 0 errors\\u202e.txt: not a notebook"
    [file] = [f for f in (tmp_path / "feedback").iterdir() if f.suffix == ".md"]
    text = file.read_text(encoding="utf-8")
    assert not {"\x1b", "\u202e", "\r"} & set(text), repr(text)
    assert "# Feedback for eve\\x1b[2K\\u202egpj.exe" in text and "x\\r\\ngrader: 0 errors\\u202e.txt" in text


def test_at_equal_file_times_canvas_s_later_resubmission_is_graded_and_named():
    """W6: a Canvas download gave both copies one file time, and the copy named like the chapter beat Canvas's
    "-1" resubmission of it. At equal times the higher resubmission number in the name is the newer copy."""
    ex = course.CourseExercise("ch2.total", 1, "02_more.ipynb", None)
    same = dict.fromkeys(("02_more.ipynb", "02_more-1.ipynb", "02_more-2.ipynb", "notes-7.ipynb"), 100.0)
    source, others = engine.choose_copy([("02_more.ipynb", "first"), ("02_more-1.ipynb", "second")], same, ex)
    assert source == "second" and [file for file, _why in others] == ["02_more.ipynb"], others
    assert "02_more-1.ipynb holds it too and is Canvas's later resubmission" in others[0][1], others
    assert others[0][1].endswith("the newest copy is graded"), others
    cells = [("02_more-2.ipynb", "third"), ("02_more-1.ipynb", "second"), ("02_more.ipynb", "first")]
    assert engine.choose_copy(cells, same, ex)[0] == "third"
    # a "-7" that no copy of the same name stands beside is no resubmission: the chapter's name wins the tie
    assert engine.choose_copy([("notes-7.ipynb", "x"), ("02_more.ipynb", "first")], same, ex)[0] == "first"
    # the file time comes first: an older "-1" is not graded
    older = same | {"02_more-1.ipynb": 50.0}
    assert engine.choose_copy([("02_more.ipynb", "first"), ("02_more-1.ipynb", "second")], older, ex)[0] == "first"


W8_LATE = "jonesbob_LATE_102_10019_02_scaled_dot_product_attention.ipynb"  # W8's names, as Canvas downloads them
W8_NEW = "jonesbob_102_10020_02_scaled_dot_product_attention.ipynb"


def canvas_copies(subs, times):
    """W8: bob's late, wrong chapter 2 and his later, correct one, downloaded from Canvas with ``times``."""
    subs.mkdir()
    for name, cells, when in zip((W8_LATE, W8_NEW), (MEAN, CH2), times):
        os.utime(gf.write_notebook(subs / name, gf.notebook(list(cells.items()))), (when, when))
    [submission] = intake.collect(subs).students
    ex = course.CourseExercise("ch2.total", 1, "02_scaled_dot_product_attention.ipynb", TOTAL)
    decided, tasks, skipped = engine.plan_student(submission, [ex])
    return submission, decided, [t.source for t in tasks], [(u.path, u.line()) for u in skipped]


def test_two_canvas_files_with_one_original_name_are_two_copies_and_the_newer_is_graded(tmp_path):
    """W8 (issue 35): both Canvas files were read as one ``02_...ipynb``, their cells merged, and the older,
    wrong one graded ("this notebook has 2 cells for it; the last one is graded")."""
    dec1, dec3 = time.mktime((2026, 12, 1, 12, 0, 0, 0, 0, -1)), time.mktime((2026, 12, 3, 12, 0, 0, 0, 0, -1))
    submission, decided, sources, skipped = canvas_copies(tmp_path / "a", (dec1, dec3))
    assert submission.student == "jonesbob" and sorted(submission.modified) == sorted([W8_LATE, W8_NEW])
    assert not decided and sources == [CH2["ch2.total"]], sources
    assert skipped == [(W8_LATE, f"{W8_LATE} (not graded for ch2.total: {W8_NEW} holds it too and was modified "
                                 f"later; the newest copy is graded)")], skipped
    # one file time (Canvas often gives a download one): the higher submission id is the later submission
    _s, _d, sources, skipped = canvas_copies(tmp_path / "b", (dec3, dec3))
    assert sources == [CH2["ch2.total"]] and [path for path, _line in skipped] == [W8_LATE], skipped
    assert "is Canvas's later submission (a higher submission id" in skipped[0][1], skipped
    # the file time comes first: a newer file with the lower id is graded
    _s, _d, sources, skipped = canvas_copies(tmp_path / "c", (dec3, dec1))
    assert sources == [MEAN["ch2.total"]] and [path for path, _line in skipped] == [W8_NEW], skipped
    # the submission id comes before Canvas's -N suffix, and a Canvas name still says its chapter notebook
    ex = course.CourseExercise("ch2.total", 1, "02_more.ipynb", None)
    cells = [("bob_1_20_02_more.ipynb", "newer"), ("bob_1_19_02_more-1.ipynb", "older")]
    assert engine.choose_copy(cells, dict.fromkeys(dict(cells), 5.0), ex)[0] == "newer"
    assert engine.choose_copy([("bob_1_7_notes.ipynb", "x"), ("bob_1_7_02_more.ipynb", "chapter's")],
                              {}, ex)[0] == "chapter's"
