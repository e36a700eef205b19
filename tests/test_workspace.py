"""The learner's work folder: `make lab` fills it, and never overwrites what the learner wrote."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import nbformat

from utils import build, lab
from utils.paths import REPO_ROOT
from utils.workspace import MANIFEST, sync

FIRST = sorted((REPO_ROOT / "solutions").glob(build.NOTEBOOK_GLOB))[0].name


def course_copy(root: Path) -> Path:
    """A course folder of its own (solutions + config), built, so that a test may change a chapter."""
    shutil.copytree(REPO_ROOT / "solutions", root / "solutions")
    shutil.copy(REPO_ROOT / "pyproject.toml", root / "pyproject.toml")
    build.build(root, log=lambda *a: None)
    return root


def edit_markdown(path: Path, text: str) -> None:
    nb = nbformat.read(path, as_version=4)
    nb.cells[0].source += text
    nbformat.write(nb, path)


def test_new_chapters_are_copied_and_unchanged_ones_left_alone(tmp_path):
    chapters = course_copy(tmp_path / "course") / "chapters"
    report = sync(tmp_path / "work", chapters)
    assert report.copied == sorted(p.name for p in chapters.glob("*.ipynb"))
    again = sync(tmp_path / "work", chapters)
    assert again.copied == again.refreshed == again.updates_beside == [] and again.lines() == []
    assert set(json.loads((tmp_path / "work" / MANIFEST).read_text())) == set(report.copied)


def test_a_course_update_reaches_an_untouched_copy(tmp_path):
    course = course_copy(tmp_path / "course")
    sync(tmp_path / "work", course / "chapters")
    edit_markdown(course / "solutions" / FIRST, "\n\nA sentence the course added.")
    build.build(course, log=lambda *a: None)
    report = sync(tmp_path / "work", course / "chapters")
    assert report.refreshed == [FIRST] and report.updates_beside == []
    assert "A sentence the course added." in (tmp_path / "work" / FIRST).read_text()


def test_the_learners_edit_survives_an_update_and_the_update_is_offered(tmp_path, capsys):
    course = course_copy(tmp_path / "course")
    work = tmp_path / "work"
    assert lab.main(["--dry-run", "--work", str(work), "--chapters", str(course / "chapters")]) == 0
    edit_markdown(work / FIRST, "\n\nMy own notes.")
    mine = (work / FIRST).read_bytes()

    edit_markdown(course / "solutions" / FIRST, "\n\nA sentence the course added.")  # the course changes ...
    build.build(course, log=lambda *a: None)  # ... and is rebuilt
    capsys.readouterr()
    assert lab.main(["--dry-run", "--work", str(work), "--chapters", str(course / "chapters")]) == 0
    out = capsys.readouterr().out

    assert (work / FIRST).read_bytes() == mine  # never touched
    updated = work / FIRST.replace(".ipynb", ".updated.ipynb")
    assert "A sentence the course added." in updated.read_text()
    assert f"The course has a newer {FIRST}. Your copy is untouched; the new version is {updated.name}" in out

    # the learner starts on the updated copy; a later update must not overwrite that either
    edit_markdown(updated, "\n\nNotes in the updated copy.")
    begun = updated.read_bytes()
    edit_markdown(course / "solutions" / FIRST, "\n\nA second change.")
    build.build(course, log=lambda *a: None)
    report = sync(work, course / "chapters")
    assert (work / FIRST).read_bytes() == mine and updated.read_bytes() == begun
    second = work / FIRST.replace(".ipynb", ".updated-2.ipynb")
    assert "A second change." in second.read_text()
    assert report.updates_beside == [f"{FIRST} -> {second.name}"]
