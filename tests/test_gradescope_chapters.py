"""``gradescope-bundle --chapters 2``: one chapter (or a set) is one Gradescope assignment.

The bundle grades only those chapters, out of their own points: a student who submits chapter 2 gets
chapter 2's tests, and no "missing" test for the chapters this assignment is not about.
"""

from __future__ import annotations

import json
import zipfile

import grader_fixtures as gf
import nbformat
import pytest
import test_gradescope as tg
from test_gradescope import TOY, check_spec, lay_out, run_autograder, scored

from utils.builder.gradescope_bundle import bundle_chapters, write_gradescope_bundle
from utils.grade import main as grade_main
from utils.grading.course import EXERCISE_CHAPTERS, ChapterError, chapter_of, course_entries, exercise_chapters


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return tg.make_bundle(tmp_path_factory)


@pytest.fixture
def autograder_root():
    with tg.temporary_root() as root:
        yield root


def test_the_bundle_of_chapter_2_carries_chapter_2_only(tmp_path):
    out = tmp_path / "ch2.zip"
    assert grade_main(["gradescope-bundle", str(out), "--seed", "5", "--chapters", "2"]) == 0
    with zipfile.ZipFile(out) as archive:
        config = json.loads(archive.read("gradescope.json"))
        notebooks = sorted(n for n in archive.namelist() if n.startswith("course/solutions/") and
                           n.endswith(".ipynb"))
    assert config["chapters"] == [2]
    assert notebooks == [f"course/solutions/{p.name}" for p in gf.course_notebooks() if p.name.startswith("02_")]


def test_chapters_are_checked_against_the_course(tmp_path, capsys):
    assert bundle_chapters(None, gf.REPO) is None
    assert bundle_chapters("1,3", gf.REPO) == [1, 3]
    assert bundle_chapters([2, 2], gf.REPO) == [2]
    for wrong in ([9], [], ["2"], [True]):
        with pytest.raises(ChapterError, match="its chapters are 1-7"):
            bundle_chapters(wrong, gf.REPO)
    with pytest.raises(ChapterError, match="--chapters '9'"):
        write_gradescope_bundle(tmp_path / "a.zip", chapters="9")
    assert grade_main(["gradescope-bundle", str(tmp_path / "a.zip"), "--chapters", "0-2x"]) == 2
    assert "gradescope-bundle: --chapters '0-2x'" in capsys.readouterr().err
    assert not (tmp_path / "a.zip").exists()


def two_chapter_course(root):
    """The toy course with ``ch1.total`` moved to a chapter 2 notebook, and the bundle set to grade ``chapters``."""
    course = root / "source" / "course"
    (course / "solutions" / "01_toy.ipynb").unlink()
    one = {e: s for e, s in gf.TOY_SOLUTIONS.items() if e != "ch1.total"}
    gf.write_notebook(course / "solutions" / "01_toy.ipynb", gf.notebook(list(one.items()), gf.TOY_POINTS))
    two = [("ch1.total", gf.TOY_SOLUTIONS["ch1.total"])]
    gf.write_notebook(course / "solutions" / "02_toy.ipynb", gf.notebook(two, gf.TOY_POINTS))


@pytest.mark.sandbox
def test_a_chapter_2_assignment_grades_chapter_2_out_of_its_own_points(bundle, autograder_root):
    submission = gf.notebook([("ch1.total", gf.TOY_SOLUTIONS["ch1.total"])])
    root = lay_out(autograder_root, bundle, {"02_toy.ipynb": submission})
    two_chapter_course(root)
    config = json.loads((root / "source" / "gradescope.json").read_text(encoding="utf-8"))
    (root / "source" / "gradescope.json").write_text(json.dumps(config | {"chapters": [2]}), encoding="utf-8")
    data = run_autograder(root, *TOY)
    check_spec(data, ["ch1.total"], [1.0])
    assert data["score"] == 1 and all(t["status"] == "passed" for t in data["tests"] if t["visibility"] != "hidden")
    assert "missing" not in json.dumps(data)

    (root / "source" / "gradescope.json").write_text(json.dumps(config | {"chapters": None}), encoding="utf-8")
    every = run_autograder(root, *TOY)  # the same submission in an all-chapter assignment misses chapter 1
    assert [t["name"] for t in scored(every)] == ["ch1.add_one", "ch1.attend", "ch1.total"]
    assert every["score"] == 1


@pytest.mark.sandbox
def test_another_chapters_notebook_in_a_chapter_2_assignment_is_named_as_such(bundle, autograder_root):
    """W4: a chapter 7 notebook handed into chapter 2 was told "No exercise cell was found"."""
    one = {e: s for e, s in gf.TOY_SOLUTIONS.items() if e != "ch1.total"}
    root = lay_out(autograder_root, bundle, {"01_toy.ipynb": gf.notebook(list(one.items()))})
    two_chapter_course(root)
    config = json.loads((root / "source" / "gradescope.json").read_text(encoding="utf-8"))
    (root / "source" / "gradescope.json").write_text(json.dumps(config | {"chapters": [2]}), encoding="utf-8")
    data = run_autograder(root, *TOY)
    assert data["score"] == 0
    assert "01_toy.ipynb: this is chapter 1; this assignment grades chapter 2: submit your chapter 2 notebook " \
           "(.ipynb) here." in data["output"], data["output"]
    assert "No exercise cell was found" not in data["output"]


@pytest.fixture(scope="module")
def chapter_2_bundle(tmp_path_factory):
    out = tmp_path_factory.mktemp("bundle") / "ch2.zip"
    assert grade_main(["gradescope-bundle", str(out), "--seed", "5", "--chapters", "2"]) == 0
    return out


def test_a_chapter_bundle_knows_every_exercise_chapter_but_ships_no_other_chapters_code(chapter_2_bundle):
    """W5: the bundle held chapter 2's notebook alone, so a chapter 7 upload could not be named as such."""
    with zipfile.ZipFile(chapter_2_bundle) as archive:
        listed = json.loads(archive.read(f"course/solutions/{EXERCISE_CHAPTERS}"))
        notebooks = [n for n in archive.namelist() if n.endswith(".ipynb")]
    course = course_entries(gf.REPO)[0]
    assert listed["chapters"] == {exercise_id: chapter_of(name) for name, exercise_id, _points in course}
    assert {7, 1, 2} <= set(listed["chapters"].values())
    assert set(listed) == {"about", "chapters"}  # ids and chapters only: no source, no solution
    assert all(name.startswith("course/solutions/02_") for name in notebooks), notebooks


@pytest.mark.sandbox
def test_a_chapter_7_notebook_in_the_real_chapter_2_bundle_is_named_as_such(chapter_2_bundle, autograder_root):
    """W5: a chapter 7 notebook uploaded to ``gradescope-bundle --chapters 2`` read "No exercise cell was
    found", and each test "no cell for exercise ch2.... found"; the bundle as written, the course's registry."""
    seven = next(p for p in gf.course_notebooks() if p.name.startswith("07_"))
    root = lay_out(autograder_root, chapter_2_bundle, {seven.name: nbformat.read(str(seven), as_version=4)},
                   toy=False)
    data = run_autograder(root)
    assert data["score"] == 0
    assert f"{seven.name}: this is chapter 7; this assignment grades chapter 2: submit your chapter 2 notebook " \
           "(.ipynb) here." in data["output"], data["output"]
    assert "No exercise cell was found" not in data["output"]
    tests = scored(data)
    assert tests and all(t["name"].startswith("ch2.") for t in tests)
    for test in tests:
        assert test["output"].startswith(f"missing: {seven.name}: this is chapter 7; this assignment grades chapter "
                                         "2, so ch2."), test["output"]
        assert "hand in your chapter 2 notebook" in test["output"], test["output"]



def test_another_chapter_s_notebook_beside_the_assignment_s_is_named(chapter_2_bundle, autograder_root):
    """W6: a chapter 1 notebook uploaded with the chapter 2 one to the chapter 2 assignment was not mentioned."""
    one, two = (next(p for p in gf.course_notebooks() if p.name.startswith(n)) for n in ("01_", "02_"))
    root = lay_out(autograder_root, chapter_2_bundle, {one.name: nbformat.read(str(one), as_version=4),
                                                        two.name: gf.student_version(two)}, toy=False)
    data = run_autograder(root)
    assert f"{one.name} (chapter 1, which this assignment does not grade: it grades chapter 2)" in \
        data["output"], data["output"]
    assert data["output"].count(one.name) == 1, data["output"]  # named once
    assert all(t["name"].startswith("ch2.") for t in scored(data))

def test_an_exercise_chapter_list_the_grader_cannot_use_is_refused_by_name(tmp_path):
    (tmp_path / "solutions").mkdir()
    listed = tmp_path / "solutions" / EXERCISE_CHAPTERS
    listed.write_text(json.dumps({"chapters": {"ch7.x": 7, "ch3.y": 3}}), encoding="utf-8")
    assert exercise_chapters(tmp_path, []) == {"ch7.x": 7, "ch3.y": 3}
    listed.write_text(json.dumps({"chapters": {"ch7.x": "7"}}), encoding="utf-8")
    with pytest.raises(ValueError, match=f"{listed}: 'chapters' must map each exercise id to its chapter number"):
        exercise_chapters(tmp_path, [])
