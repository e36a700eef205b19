"""Submissions as they really arrive (utils/grading/intake.py): nested folders, Canvas downloads, flat
folders, a zip per student, and zips as untrusted input. Most tests read a submissions folder without
grading it; two small batches grade a toy course end to end."""

from __future__ import annotations

import csv
import io
import os
import stat
import threading
import zipfile
from pathlib import Path

import grader_fixtures as gf
import nbformat
import pytest

from utils.grading import batch, intake

TIMEOUT = 4


def nb_bytes(overrides: dict | None = None) -> bytes:
    return nbformat.writes(gf.toy_submission(overrides)).encode()


def write_zip(path: Path, members: dict[str, bytes], modes: dict[str, int] | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            info = zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED
            if modes and name in modes:
                info.external_attr = modes[name] << 16
            archive.writestr(info, data)
    return path


def reasons(found: intake.Intake) -> dict[str, str]:
    return {u.path: u.reason for u in found.unplaced}


def cells_of(found: intake.Intake, student: str) -> dict[str, list[str]]:
    submission = next(s for s in found.students if s.student == student)
    return {eid: [f for f, _ in cells] for eid, cells in submission.cells.items()}


def collect_in_thread(root: Path, layout: str = "auto", seconds: float = 20) -> intake.Intake:
    box: dict = {}
    thread = threading.Thread(target=lambda: box.update(found=intake.collect(root, layout)), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "reading the submissions hung"
    return box["found"]


# --------------------------------------------------------------------------------------------------
# Layouts
# --------------------------------------------------------------------------------------------------


def test_nested_folders_are_read_and_checkpoints_reported(tmp_path):
    subs = tmp_path / "subs"
    gf.write_notebook(subs / "ana" / "chapters" / "week1" / "01_toy.ipynb", gf.toy_submission())
    gf.write_notebook(subs / "ana" / "chapters" / ".ipynb_checkpoints" / "01_toy-checkpoint.ipynb", gf.toy_submission())
    (subs / "ana" / "notes.txt").write_text("my notes")
    found = intake.collect(subs)
    assert (found.layout, found.reason) == ("folders", "1 folder, one per student")
    assert cells_of(found, "ana")["ch1.add_one"] == ["chapters/week1/01_toy.ipynb"]  # the checkpoint is not a 2nd copy
    assert reasons(found) == {"ana/chapters/.ipynb_checkpoints": "Jupyter's autosave copies, not graded",
                              "ana/notes.txt": "not a notebook (.ipynb) or zip; not graded"}
    assert {u.student for u in found.unplaced} == {"ana"}


def test_a_folder_deeper_than_the_limit_is_reported_not_walked(tmp_path):
    deep = tmp_path / "subs" / "deep"
    for _ in range(intake.MAX_FOLDER_DEPTH + 2):
        deep = deep / "d"
    gf.write_notebook(deep / "x.ipynb", gf.toy_submission())
    found = intake.collect(tmp_path / "subs")
    assert cells_of(found, "deep") == {}
    [entry] = found.unplaced
    assert "nested deeper than" in entry.reason and entry.student == "deep"


def test_a_top_level_notebook_is_an_error_in_the_folders_layout(tmp_path):
    subs = tmp_path / "subs"
    gf.student(subs, "bob", {"a.ipynb": gf.toy_submission()})
    gf.write_notebook(subs / "stray.ipynb", gf.toy_submission())
    (subs / ".hidden").mkdir()
    (subs / "link").symlink_to(subs / "bob")
    found = intake.collect(subs)
    assert found.layout == "folders" and [s.student for s in found.students] == ["bob"]
    assert [u.path for u in found.errors()] == ["stray.ipynb"]
    assert "top level" in reasons(found)["stray.ipynb"] and "--layout flat" in reasons(found)["stray.ipynb"]
    assert "starts with '.'" in reasons(found)[".hidden"] and "symbolic link" in reasons(found)["link"]


def test_flat_layout_one_notebook_or_zip_per_student(tmp_path):
    subs = tmp_path / "subs"
    gf.write_notebook(subs / "carol.ipynb", gf.toy_submission())
    write_zip(subs / "dan.zip", {"work/01_toy.ipynb": nb_bytes()})
    (subs / "readme.md").write_text("x")
    found = intake.collect(subs)
    assert found.layout == "flat" and "one per student" in found.reason
    assert [s.student for s in found.students] == ["carol", "dan"]
    assert cells_of(found, "dan")["ch1.total"] == ["dan.zip:work/01_toy.ipynb"]
    assert reasons(found) == {"readme.md": "not a notebook or zip"}


CANVAS_FILES = {
    "doejane_1234_98765_01_toy.ipynb": "jane",
    "doejane_1234_98766_extra.ipynb": "jane",  # a second file of the same Canvas user
    "smithbob_LATE_555_98767_homework-1.ipynb": "bob",
    "leeann_77_98768_lee.zip": "ann-zip",
    "leeann_78_98769_mine.ipynb": "other-ann",  # another user with the same name part
}


def make_canvas(subs: Path) -> None:
    subs.mkdir(parents=True)
    for name, who in CANVAS_FILES.items():
        if name.endswith(".zip"):
            write_zip(subs / name, {"01_toy.ipynb": nb_bytes()})
        elif who == "jane" and "extra" in name:
            gf.write_notebook(subs / name, gf.notebook([]))
        else:
            gf.write_notebook(subs / name, gf.toy_submission())
    (subs / "grades_summary.txt").write_text("not a submission")


def test_canvas_download_is_recognised_and_grouped_by_user(tmp_path):
    make_canvas(tmp_path / "subs")
    found = intake.collect(tmp_path / "subs")
    assert found.layout == "canvas" and "5 of the 5 notebooks and zips" in found.reason
    assert [s.student for s in found.students] == ["doejane", "leeann_77", "leeann_78", "smithbob"]
    assert found.canvas_ids == {"doejane": "1234", "leeann_77": "77", "leeann_78": "78", "smithbob": "555"}
    # the download's name (W8: two files with one original name are two copies, never one notebook)
    assert cells_of(found, "doejane")["ch1.add_one"] == ["doejane_1234_98765_01_toy.ipynb"]
    assert cells_of(found, "smithbob")["ch1.add_one"] == ["smithbob_LATE_555_98767_homework-1.ipynb"]
    assert cells_of(found, "leeann_77")["ch1.add_one"] == ["leeann_77_98768_lee.zip:01_toy.ipynb"]
    assert "not named like a Canvas download" in reasons(found)["grades_summary.txt"]


def test_layout_can_be_forced_and_a_bad_layout_is_refused(tmp_path):
    make_canvas(tmp_path / "subs")
    flat = intake.collect(tmp_path / "subs", "flat")
    assert flat.reason == "" and "doejane_1234_98765_01_toy" in [s.student for s in flat.students]
    with pytest.raises(ValueError, match="layout must be one of auto, folders, canvas, flat, got 'zip'"):
        intake.collect(tmp_path / "subs", "zip")


# --------------------------------------------------------------------------------------------------
# A zip is untrusted input
# --------------------------------------------------------------------------------------------------


def test_zip_path_traversal_links_and_fifos_are_refused_and_nothing_is_written(tmp_path):
    subs = tmp_path / "subs"
    members = {"../../evil.ipynb": nb_bytes(), "/abs/evil.ipynb": nb_bytes(), "ok/01_toy.ipynb": nb_bytes(),
               "link.ipynb": b"/etc/passwd", "fifo.ipynb": b"", "inner.zip": b"PK", "__MACOSX/._01_toy.ipynb": b"x",
               "ok\\..\\..\\win.ipynb": nb_bytes()}
    write_zip(subs / "eve.zip", members, {"link.ipynb": stat.S_IFLNK | 0o777, "fifo.ipynb": stat.S_IFIFO | 0o644})
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    found = collect_in_thread(subs)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # nothing extracted
    got = reasons(found)
    assert "leaves the zip" in got["eve.zip:../../evil.ipynb"] and "leaves the zip" in got["eve.zip:/abs/evil.ipynb"]
    assert "leaves the zip" in got["eve.zip:ok/../../win.ipynb"]
    assert "symbolic link" in got["eve.zip:link.ipynb"] and "FIFO" in got["eve.zip:fifo.ipynb"]
    assert "zip inside a zip" in got["eve.zip:inner.zip"] and "macOS" in got["eve.zip:__MACOSX/._01_toy.ipynb"]
    assert cells_of(found, "eve")["ch1.add_one"] == ["eve.zip:ok/01_toy.ipynb"]  # the honest member still counts


def test_zip_bomb_member_and_total_are_bounded(tmp_path, monkeypatch):
    subs = tmp_path / "subs"
    huge = b"{" + b" " * (30 * 2**20)  # 30 MB of spaces compresses to a few kB
    write_zip(subs / "bomb.zip", {"a.ipynb": huge, "b.ipynb": nb_bytes()})
    assert (subs / "bomb.zip").stat().st_size < 2**20
    found = intake.collect(subs)
    [submission] = found.students
    assert submission.invalid == [("bomb.zip:a.ipynb", "is too large (more than 20 MB)")]
    assert "ch1.add_one" in submission.cells
    monkeypatch.setattr(intake, "MAX_ZIP_TOTAL", 2**20)
    found = intake.collect(subs)
    assert "unpacks to more than 1 MB" in reasons(found)["bomb.zip:a.ipynb"]
    assert found.students[0].cells == {}  # reading stopped at the bound


def test_zip_with_too_many_members_or_too_large_or_not_a_zip(tmp_path, monkeypatch):
    subs = tmp_path / "subs"
    write_zip(subs / "many.zip", {f"{i}.ipynb": b"{}" for i in range(6)})
    (subs / "junk.zip").write_bytes(b"this is not a zip")
    monkeypatch.setattr(intake, "MAX_ZIP_MEMBERS", 5)
    got = reasons(intake.collect(subs))
    assert got["many.zip"] == "a zip with 6 entries, more than 5; not read"
    assert got["junk.zip"].startswith("not a readable zip file")
    monkeypatch.setattr(intake, "MAX_ZIP_BYTES", 100)
    assert "more than 0 MB; not read" in reasons(intake.collect(subs))["many.zip"]


@pytest.mark.sandbox
def test_a_fifo_or_link_named_like_a_zip_does_not_hang(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    os.mkfifo(subs / "fifo.zip")
    gf.student(subs, "mallory", {})
    os.mkfifo(subs / "mallory" / "hw.zip")
    (subs / "mallory" / "zero.zip").symlink_to("/dev/zero")
    found = collect_in_thread(subs)
    got = reasons(found)
    assert got["fifo.zip"] == "is not a regular file; not read"
    assert got["mallory/hw.zip"] == "is not a regular file; not read"
    assert "symbolic link" in got["mallory/zero.zip"]


# --------------------------------------------------------------------------------------------------
# End to end: graded, and every unplaced entry is a row
# --------------------------------------------------------------------------------------------------


def grade(tmp_path: Path, subs: Path, **kwargs) -> tuple[dict, list[dict]]:
    course = gf.make_toy_course(tmp_path / "course")
    options = {"jobs": 2, "timeout": TIMEOUT, "seed": 5, "memory_mb": 512, "progress": False} | kwargs
    summary = batch.grade(subs, tmp_path / "out", course_root=course, registry=gf.TOY_REGISTRY, **options)
    with open(tmp_path / "out" / "results.csv", newline="", encoding="utf-8") as handle:
        return summary, list(csv.DictReader(handle))


@pytest.mark.sandbox
def test_nested_zipped_and_stray_submissions_are_graded_or_reported(tmp_path, capsys):
    subs = tmp_path / "subs"
    only_add_one = {"ch1.attend": None, "ch1.total": None}  # one exercise runs per student: a quick batch
    gf.write_notebook(subs / "nested" / "chapters" / "01_toy.ipynb", gf.toy_submission(only_add_one))
    write_zip(subs / "zipped.zip", {"hw/01_toy.ipynb": nb_bytes(only_add_one), "../x.ipynb": b"{}"})
    gf.write_notebook(subs / "stray.ipynb", gf.toy_submission())
    summary, rows = grade(tmp_path, subs)
    err = capsys.readouterr().err
    assert "layout folders (--layout auto: 1 folder and 1 zip, one per student)" in err
    assert "grader: error: stray.ipynb is a notebook at the top level" in err
    assert summary["students"] == ["nested", "zipped"]
    graded = {(r["student"], r["exercise"]): r["status"] for r in rows if r["exercise"]}
    assert graded[("nested", "ch1.add_one")] == graded[("zipped", "ch1.add_one")] == "passed"
    unplaced = [(r["student"], r["status"], r["feedback"]) for r in rows if not r["exercise"]]
    assert [(s, st) for s, st, _ in unplaced] == [("", "unplaced"), ("zipped", "unplaced")]
    assert unplaced[0][2].startswith("stray.ipynb: a notebook at the top level")
    assert unplaced[1][2].startswith("zipped.zip:../x.ipynb: a path that leaves the zip")
    assert not (tmp_path / "x.ipynb").exists()
    assert "stray.ipynb (a notebook at the top level" in summary["skipped"][0]


@pytest.mark.sandbox
def test_feedback_index_maps_files_to_raw_student_ids(tmp_path):
    subs = tmp_path / "subs"
    for name in ("a b", "a_b", "-2+3"):
        gf.student(subs, name, {"x.ipynb": gf.notebook([])})  # no exercise cell: nothing runs
    _summary, rows = grade(tmp_path, subs)
    index = list(csv.DictReader(io.StringIO((tmp_path / "out" / "feedback" / "index.csv").read_text())))
    assert [(r["file"], r["student_id"]) for r in index] == [("-2_3.md", "-2+3"), ("a_b.md", "a b"),
                                                             ("a_b_.md", "a_b")]
    for entry in index:
        assert (tmp_path / "out" / "feedback" / entry["file"]).is_file()
    by_id = {r["student_id"] for r in rows}
    assert by_id == {"-2+3", "a b", "a_b"} and "'-2+3" in {r["student"] for r in rows}  # display escaped, id raw
    grades = list(csv.DictReader(io.StringIO((tmp_path / "out" / "grades.csv").read_text())))
    assert [(g["student"], g["student_id"]) for g in grades] == [("'-2+3", "-2+3"), ("a b", "a b"), ("a_b", "a_b")]
