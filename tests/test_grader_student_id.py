"""``results.csv``'s ``student_id`` on the rows of files that were not graded (issue 35, W17): the README
promises the column for gradebook joins, so every row whose student is known carries it, the same as the
student's graded rows: a second copy of a chapter, a notebook that cannot be read, a file that is not a
notebook, a zip's member, Jupyter's checkpoints, a chapter not graded, and a Canvas download that is not a
notebook (its name says whose it is). Only a file nobody owns (top level, not named like a download) has
none. Reading and planning only: nothing is run in the sandbox.
"""

from __future__ import annotations

import csv
import io
import os
import zipfile

import grader_fixtures as gf
from test_grader_chapters import CH1, REGISTRY, two_chapter_course

from utils.grading import batch, course, engine, intake, report

NOT_A_NOTEBOOK = "not a notebook (.ipynb) or zip; not graded"


def results(rows) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(report.results_csv(rows))))


def test_every_row_of_a_student_folder_carries_the_student_id(tmp_path):
    subs = tmp_path / "subs"
    old = gf.student(subs, "dave", {"01_toy.ipynb": gf.notebook(list(CH1.items()))}) / "01_toy.ipynb"
    new = gf.write_notebook(subs / "dave" / "01_toy (1).ipynb", gf.notebook(list(CH1.items())))
    os.utime(old, (1_600_000_000, 1_600_000_000))
    os.utime(new, (1_700_000_000, 1_700_000_000))  # W17: the older copy is not graded
    newest = subs / "dave" / "01_toy (2).ipynb"
    newest.write_text("{")  # the newest copy cannot be read: reported, the readable copy graded
    os.utime(newest, (1_800_000_000, 1_800_000_000))
    (subs / "dave" / "notes.txt").write_text("x")
    gf.write_notebook(subs / "dave" / ".ipynb_checkpoints" / "01_toy-checkpoint.ipynb", gf.notebook([]))
    with zipfile.ZipFile(subs / "dave" / "extra.zip", "w") as archive:
        archive.writestr("readme.md", "x")
    found = intake.collect(subs)
    [submission] = found.students
    exercises = course.load_course(two_chapter_course(tmp_path / "course"), REGISTRY)
    decided, _tasks, skipped = engine.plan_student(submission, exercises, frozenset({1, 2}))
    lines = results([*decided.values(), *batch.unplaced_rows([*found.unplaced, *skipped])])
    unplaced = {line["feedback"].split(": ")[0] for line in lines if line["status"] == intake.UNPLACED}
    assert unplaced == {"01_toy.ipynb", "01_toy (2).ipynb", "dave/notes.txt", "dave/.ipynb_checkpoints",
                        "dave/extra.zip:readme.md"}, unplaced
    assert {line["status"] for line in lines} == {intake.UNPLACED, "missing"}  # ch2 was not handed in
    assert {(line["student"], line["student_id"]) for line in lines} == {("dave", "dave")}, lines


def test_a_canvas_download_that_is_not_a_notebook_is_its_student_s_row(tmp_path):
    subs = tmp_path / "subs"
    for name in ("jonesdave_12_345_01_toy.ipynb", "leeann_77_1_a.ipynb", "leeann_78_2_b.ipynb"):
        gf.write_notebook(subs / name, gf.notebook(list(CH1.items())))
    for name in ("jonesdave_12_346_notes.txt", "leeann_78_3_notes.pdf", "solo_9_4_essay.docx", "grades_summary.txt"):
        (subs / name).write_text("x")
    found = intake.collect(subs)
    assert found.layout == "canvas"
    assert [s.student for s in found.students] == ["jonesdave", "leeann_77", "leeann_78"]
    by_path = {u.path: (u.student, u.reason) for u in found.unplaced}
    assert by_path == {
        "jonesdave_12_346_notes.txt": ("jonesdave", NOT_A_NOTEBOOK),
        "leeann_78_3_notes.pdf": ("leeann_78", NOT_A_NOTEBOOK),  # named as that user's graded rows are
        "solo_9_4_essay.docx": ("solo", NOT_A_NOTEBOOK),  # only a file that is not graded: still theirs
        "grades_summary.txt": ("", by_path["grades_summary.txt"][1]),  # nobody's
    }, by_path
    assert "not named like a Canvas download" in by_path["grades_summary.txt"][1]
    ids = {line["feedback"].split(":")[0]: line["student_id"] for line in results(batch.unplaced_rows(found.unplaced))}
    assert ids == {"jonesdave_12_346_notes.txt": "jonesdave", "leeann_78_3_notes.pdf": "leeann_78",
                   "solo_9_4_essay.docx": "solo", "grades_summary.txt": ""}, ids
