"""One chapter, or any set of chapters, is an assignment: ``--chapters`` (utils/grading/course.py's
``parse_chapters``, ``batch.grade(chapters=...)``) grades only those chapters' exercises, out of their
own points, and reports nothing about the others."""

from __future__ import annotations

import csv
import dataclasses
import io
import re
from fractions import Fraction

import grader_fixtures as gf
import pytest

from utils.grading import batch, cli, course, lms
from utils.grading.course import CourseExercise
from utils.grading.unit import Row

# A two-chapter toy course: chapter 1 is add_one and attend (5 points), chapter 2 is total (1 point).
TOTAL2 = dataclasses.replace(gf.TOTAL, id="ch2.total")
REGISTRY = {"ch1.add_one": gf.ADD_ONE, "ch1.attend": gf.ATTEND, "ch2.total": TOTAL2}
CH1 = {k: gf.TOY_SOLUTIONS[k] for k in ("ch1.add_one", "ch1.attend")}
CH2 = {"ch2.total": gf.TOY_SOLUTIONS["ch1.total"]}
POINTS = {"ch1.add_one": 2, "ch1.attend": 3, "ch2.total": 1}


def two_chapter_course(root):
    gf.write_notebook(root / "solutions" / "01_toy.ipynb", gf.notebook(list(CH1.items()), POINTS))
    gf.write_notebook(root / "solutions" / "02_more.ipynb", gf.notebook(list(CH2.items()), POINTS))
    return root


@pytest.mark.parametrize(
    "text, expected",
    [("2", {2}), ("2-3", {2, 3}), ("1,3,5-6", {1, 3, 5, 6}), (" 1 , 3-3 ,6 ", {1, 3, 6}), ("1-6", set(range(1, 7)))],
)
def test_parse_chapters_reads_numbers_ranges_and_lists(text, expected):
    assert course.parse_chapters(text, range(1, 7)) == frozenset(expected)


@pytest.mark.parametrize(
    "text, message",
    [
        ("7", "--chapters '7': chapter 7 is not in this course; its chapters are 1-6"),
        ("0,5-8", "--chapters '0,5-8': chapters 0, 7-8 are not in this course; its chapters are 1-6"),
        ("3-2", "--chapters '3-2': the range 3-2 runs backwards (write 2-3); its chapters are 1-6"),
        ("", "--chapters '': expected chapter numbers and ranges such as 2, 2-3 or 1,3,5-6; its chapters are 1-6"),
        ("2,", "expected chapter numbers and ranges"),
        ("ch2", "expected chapter numbers"),
        ("1-", "expected chapter"),
    ],
)
def test_parse_chapters_refuses_bad_values_naming_the_option_and_the_valid_chapters(text, message):
    with pytest.raises(course.ChapterError) as exc:
        course.parse_chapters(text, range(1, 7))
    assert message in str(exc.value)


def test_chapters_come_from_the_notebook_name_and_the_course_lists_them(tmp_path):
    root = two_chapter_course(tmp_path / "course")
    assert course.course_chapters(root) == {1, 2}
    exercises = course.load_course(root, REGISTRY)
    assert [(e.id, e.chapter) for e in exercises] == [("ch1.add_one", 1), ("ch1.attend", 1), ("ch2.total", 2)]
    assert [e.id for e in course.select_chapters(exercises, {2})] == ["ch2.total"]
    assert course.select_chapters(exercises, None) == exercises
    with pytest.raises(course.ChapterError, match="chapter 3 has no exercise in this course; its chapters are 1-2"):
        course.select_chapters(exercises, {2, 3})
    assert course.course_chapters(None) == {1, 2, 3, 4, 5, 6, 7}  # the list shipped with the package


# A Canvas gradebook export: chapter 1's column is already filled, and Carl has no submission.
ROSTER = (
    "Student,ID,SIS User ID,SIS Login ID,Section,01_toy (501),02_more (502),Current Score\n"
    "    Points Possible,,,,,5,1,(read only)\n"
    "Ann,11,,ann,,4,,80\n"
    "Bob,12,,bob,,5,0.5,90\n"
    "Carl,13,,carl,,2,1,40\n"
)


@pytest.fixture(scope="module")
def chapter_two(tmp_path_factory):
    """ann handed in chapter 2 only, bob chapter 1 only; graded as the chapter 2 assignment."""
    tmp = tmp_path_factory.mktemp("chapters")
    root = two_chapter_course(tmp / "course")
    subs = tmp / "subs"
    gf.student(subs, "ann", {"02_more.ipynb": gf.notebook(list(CH2.items()))})
    gf.student(subs, "bob", {"01_toy.ipynb": gf.notebook(list(CH1.items()))})
    (tmp / "roster.csv").write_text(ROSTER, encoding="utf-8")
    summary = batch.grade(
        subs,
        tmp / "out",
        jobs=1,
        timeout=4,
        seed=3,
        memory_mb=512,
        progress=False,
        course_root=root,
        registry=REGISTRY,
        chapters=frozenset({2}),
        roster=tmp / "roster.csv",
        lms_format="canvas",
    )
    return tmp, summary


@pytest.mark.sandbox
def test_a_chapter_is_graded_out_of_its_own_points_and_nothing_else_is_reported(chapter_two):
    tmp, summary = chapter_two
    assert summary["exercises"] == ["ch2.total"] and summary["max_total"] == 1 and summary["chapters"] == [2]
    assert summary["totals"] == {"ann": 1, "bob": 0}
    rows = gf.exercise_rows(tmp / "out")
    assert set(rows) == {("ann", "ch2.total"), ("bob", "ch2.total")}  # no chapter 1 line, not even "missing"
    assert rows[("bob", "ch2.total")]["status"] == "missing"
    assert "ch1." not in (tmp / "out" / "feedback" / "ann.md").read_text(encoding="utf-8")
    grades = (tmp / "out" / "grades.csv").read_text(encoding="utf-8").splitlines()
    assert grades[0] == "student,ch2.total,total,max_total,student_id" and grades[1] == "ann,1,1,1,ann"


def test_bad_chapters_on_the_command_line_exit_2_before_grading(tmp_path, capsys):
    root = two_chapter_course(tmp_path / "course")
    gf.student(tmp_path / "subs", "ann", {"x.ipynb": gf.notebook([])})
    for bad in ("3", "2-1", "two"):
        code = cli.main(
            [str(tmp_path / "subs"), "--course", str(root), "--chapters", bad, "--out", str(tmp_path / "out")]
        )
        err = capsys.readouterr().err
        assert code == 2 and f"grader: --chapters '{bad}'" in err and "its chapters are 1-2" in err
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------------------------------
# Importing canvas.csv, as Canvas does
# --------------------------------------------------------------------------------------------------

_ASSIGNMENT = re.compile(r"^.*\S\s+\((?P<id>\d+)\)$")
_IGNORED = {"Student", "Section", "Current Score", "Final Score"}
_DECIMAL = re.compile(r"^-?\d+(\.\d+)?$")


def gradebook_of(export: str) -> dict[tuple[str, str], str]:
    """(Canvas user id, assignment id) -> grade, from a gradebook export."""
    lines = list(csv.reader(io.StringIO(export)))
    columns = {i: m["id"] for i, cell in enumerate(lines[0]) if (m := _ASSIGNMENT.match(cell))}
    return {
        (line[1], aid): line[i]
        for line in lines[1:]
        if line[0].strip() != "Points Possible"
        for i, aid in columns.items()
    }


def canvas_import(gradebook: dict[tuple[str, str], str], people: list[dict[str, str]], text: str) -> dict:
    """What Canvas's grade import does with ``text``: a column is the assignment whose id ends its header
    (any other column but the identity and read-only ones would become a new assignment: refused here); a
    row is the student with that ID, else SIS User ID, else SIS Login ID; the Points Possible row is
    ignored; a blank cell leaves an empty grade empty and REMOVES a grade the student has (Canvas's
    gradebook importer counts it as a change and sends ``posted_grade: null``). A grade must be a decimal
    number."""
    lines = list(csv.reader(io.StringIO(text)))
    columns = {}
    for i, cell in enumerate(lines[0]):
        if (m := _ASSIGNMENT.match(cell)) is not None:
            columns[i] = m["id"]
        else:
            assert cell in _IGNORED | set(lms.IDENTITY), f"Canvas would create a new assignment {cell!r}"
    after = dict(gradebook)
    for line in lines[1:]:
        if line[0].strip() == "Points Possible":
            continue
        row = dict(zip(lines[0], line))
        person = next(
            p
            for key in ("ID", "SIS User ID", "SIS Login ID")
            for p in people
            if row.get(key) and p.get(key) == row[key]
        )
        for i, assignment in columns.items():
            if line[i].strip():
                assert _DECIMAL.match(line[i]), f"Canvas cannot read the grade {line[i]!r}"
                after[(person["ID"], assignment)] = line[i]
            elif after.get((person["ID"], assignment), "").strip():
                after[(person["ID"], assignment)] = ""  # Canvas: a blank cell against a grade removes the grade
    return after


def people_of(export: str) -> list[dict[str, str]]:
    return [r for r in csv.DictReader(io.StringIO(export)) if r["Student"].strip() != "Points Possible"]


@pytest.mark.sandbox
def test_importing_canvas_csv_changes_only_the_graded_chapter(chapter_two):
    tmp, summary = chapter_two
    before = gradebook_of(ROSTER)
    after = canvas_import(before, people_of(ROSTER), (tmp / "out" / "canvas.csv").read_text(encoding="utf-8"))
    changed = {key: value for key, value in after.items() if before.get(key) != value}
    assert changed == {("11", "502"): "1"}  # Carl sent nothing: his 1 stays
    assert after[("11", "501")] == "4"  # chapter 1, filled before and not graded now, is untouched
    assert after[("12", "502")] == "0.5"  # Bob handed in chapter 1 only: no 0 over his chapter 2 grade


CANVAS_EXPORT = (
    "Student,ID,SIS User ID,SIS Login ID,Section,01_toy (4417),02 More (4418),ch2.more (4420),Quiz (4419),"
    "Current Score\n"
    "    Points Possible,,,,,6,4,4,10,(read only)\n"
    '"Doe, Jane",1234,S1,jdoe,A,4,,,9,80\n'
    '"Smith, Bob",555,S2,bsmith,A,3.5,3,3,7,70\n'
)
CHAPTER_TWO = [CourseExercise("ch2.more", 4, "02_more.ipynb", None)]


@pytest.mark.parametrize("columns, assignment", [("chapter", "4418"), ("exercise", "4420")])
def test_canvas_import_of_one_graded_chapter_in_decimals_leaves_every_other_grade(tmp_path, columns, assignment):
    (tmp_path / "roster.csv").write_text(CANVAS_EXPORT, encoding="utf-8")
    roster = lms.read_roster(tmp_path / "roster.csv")
    rows = [Row("jdoe", "ch2.more", Fraction(5, 2), 4, "failed", "")]  # Smith sent nothing
    sheet = lms.canvas_csv(rows, ["jdoe"], CHAPTER_TWO, roster=roster, columns=columns)
    assert "/" not in sheet.text and (sheet.left_out, sheet.new) == ([], [])
    before = gradebook_of(CANVAS_EXPORT)
    after = canvas_import(before, people_of(CANVAS_EXPORT), sheet.text)
    assert {k: v for k, v in after.items() if before[k] != v} == {("1234", assignment): "2.5"}


def test_a_roster_with_assignments_but_none_for_the_graded_chapter_is_refused(tmp_path):
    (tmp_path / "roster.csv").write_text(CANVAS_EXPORT, encoding="utf-8")
    roster = lms.read_roster(tmp_path / "roster.csv")
    other = [CourseExercise("ch3.x", 2, "03_other.ipynb", None)]
    with pytest.raises(lms.RosterError, match="none named like a graded column \\(03_other\\)"):
        lms.canvas_columns(other, "chapter", roster)


@pytest.mark.sandbox
def test_another_chapter_s_notebook_beside_the_graded_one_is_named_not_dropped(tmp_path):
    """Walkthrough W27: with --chapters 2, a chapter 1 notebook handed in beside the chapter 2 one was dropped
    silently by the local grader (Gradescope named it); it is an unplaced row now, with the reason."""
    subs = tmp_path / "subs"
    gf.student(subs, "cat", {"02_more.ipynb": gf.notebook(list(CH2.items())),
                             "01_toy.ipynb": gf.notebook(list(CH1.items()))})
    summary = batch.grade(subs, tmp_path / "out", jobs=1, timeout=4, seed=3, memory_mb=512, progress=False,
                          course_root=two_chapter_course(tmp_path / "course"), registry=REGISTRY,
                          chapters=frozenset({2}))
    assert summary["totals"] == {"cat": 1}
    said = "chapter 1, which this assignment does not grade: it grades chapter 2"
    assert [u.path for u in summary["unplaced"] if said in u.reason] == ["01_toy.ipynb"], summary["unplaced"]
    with open(tmp_path / "out" / "results.csv", encoding="utf-8", newline="") as handle:
        unplaced = [r for r in csv.DictReader(handle) if r["status"] == "unplaced"]
    assert any("01_toy.ipynb" in r["feedback"] and said in r["feedback"] for r in unplaced), unplaced
    assert said in (tmp_path / "out" / "feedback" / "cat.md").read_text(encoding="utf-8")
    # W27: a new --out and its feedback/ are the instructor's alone (the file names are students' names)
    assert all((tmp_path / "out" / sub).stat().st_mode & 0o777 == 0o700 for sub in ("", "feedback"))
