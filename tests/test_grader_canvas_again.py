"""Canvas "again later" (issue 35, W10): a rerun with ``--overwrite --keep-existing`` into the same ``--out``
updates a grade Canvas still holds as the last import gave it (a resubmission, a late submission) and keeps
one changed in Canvas by hand (a late penalty, an ``EX``), on the third run too; and stderr names each
student left out of canvas.csv once, in the right list (no submission, or only another chapter).

Canvas's import is modelled as in ``test_grader_chapters.canvas_import``: an empty cell clears a grade, a
changed number overwrites it, a student or column not in the file is left as it is.
"""

from __future__ import annotations

import csv
import io

import grader_fixtures as gf
import pytest
from test_grader_chapters import CH1, REGISTRY, canvas_import, gradebook_of, people_of, two_chapter_course
from test_grader_instructor import registry, run  # noqa: F401  (registry is a fixture)

from utils.grading import batch, lms, lms_previous
from utils.grading.course import CourseExercise
from utils.grading.unit import Row

CH1_ONLY = [CourseExercise("ch1.add_one", 2, "01_toy.ipynb", 1), CourseExercise("ch1.attend", 3, "01_toy.ipynb", 1)]
PEOPLE = [("Jones, Bob", "11", "bob"), ("Davis, Dave", "12", "dave"), ("Lee, Ann", "13", "ann"),
          ("Kim, Carl", "14", "carl"), ("Ng, Eve", "15", "eve")]


def export(book: dict[tuple[str, str], str]) -> str:
    """Canvas's gradebook export (Grades > Export) of ``book``: (user id, "501") -> cell."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerows([["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "01_toy (501)"],
                      ["    Points Possible", "", "", "", "", "5"]])
    writer.writerows([name, uid, "", login, "", book.get((uid, "501"), "")] for name, uid, login in PEOPLE)
    return buffer.getvalue()


def graded(points: dict[str, int]) -> list[Row]:
    """Chapter 1 rows: ``points`` is each student's total (add_one's 2 first, then attend's 3)."""
    return [Row(s, e, p, m, "passed" if p == m else "failed", "")
            for s, total in points.items()
            for e, p, m in (("ch1.add_one", min(total, 2), 2), ("ch1.attend", total - min(total, 2), 3))]


def one_run(tmp_path, book, points, **options):
    """One run as batch writes it into tmp_path/out: the roster exported from ``book``, the previous
    canvas.csv read first, then canvas.csv, its record and canvas.previous.csv; the import's result."""
    (tmp_path / "gradebook.csv").write_text(export(book), encoding="utf-8")
    previous, why = lms_previous.read_previous(tmp_path / "out")
    assert not why, why
    sheet = lms.canvas_csv(graded(points), list(points), CH1_ONLY, roster=lms.read_roster(tmp_path / "gradebook.csv"),
                           previous=previous.value if previous else None, **options)
    (tmp_path / "out").mkdir(exist_ok=True)
    batch.write_canvas(tmp_path / "out", sheet, previous)
    return sheet, canvas_import(gradebook_of(export(book)), people_of(export(book)), sheet.text)


def changes(before, after):
    return {uid: value for (uid, _a), value in after.items() if before.get((uid, _a), "") != value}


def test_again_later_updates_resubmissions_and_late_work_and_keeps_hand_edits_on_every_rerun(tmp_path):
    """Run 1: Bob 1, Dave 5, Eve 2; Ann and Carl sent nothing (--zero-missing: 0). In Canvas, by hand: Dave's
    late penalty 4.00, Carl's 1.50 (partial credit for work sent by mail). Run 2: Bob resubmitted (5), Ann
    handed in late (3), Carl too (2): the import changes Bob's and Ann's cells only. Run 3, the same grades: the
    import changes nothing (Dave's 4.00 that run 2 wrote back is still a hand edit, not the grader's grade)."""
    sheet, book = one_run(tmp_path, {}, {"bob": 1, "dave": 5, "eve": 2}, zero_missing=True)
    assert changes({}, book) == {"11": "1", "12": "5", "15": "2", "13": "0", "14": "0"}, sheet.text
    book |= {("12", "501"): "4.00", ("14", "501"): "1.50"}  # hand edits in Canvas after the import
    run_1 = (tmp_path / "out" / "canvas.csv").read_text(encoding="utf-8")

    second = {"bob": 5, "dave": 5, "eve": 2, "ann": 3, "carl": 2}
    sheet, after = one_run(tmp_path, book, second, zero_missing=True, keep_existing=True)
    assert changes(book, after) == {"11": "5", "13": "3"}, sheet.text  # Dave's 4.00 and Carl's 1.50 stay
    assert sheet.updated == [("Jones, Bob", "01_toy (501)", "1", "5"), ("Lee, Ann", "01_toy (501)", "0", "3")]
    assert sheet.changed == [("Davis, Dave", "01_toy (501)", "4.00", "5"), ("Kim, Carl", "01_toy (501)", "1.50", "2")]
    assert (tmp_path / "out" / "canvas.previous.csv").read_text(encoding="utf-8") == run_1

    book = after
    sheet, after = one_run(tmp_path, book, second, zero_missing=True, keep_existing=True)
    assert changes(book, after) == {} and sheet.updated == [], sheet.text
    assert [(who, held) for who, _c, held, _g in sheet.changed] == [("Davis, Dave", "4.00"), ("Kim, Carl", "1.50")]


def test_late_work_after_a_zero_is_updated_even_when_a_run_in_between_wrote_no_row_for_the_student(tmp_path):
    """W13: run 1 gives Ann a 0 (--zero-missing); run 2 writes no row for her (her cell holds the 0, she sent
    nothing); she hands in late before run 3: her 0 is still the grader's own, so run 3 updates it."""
    one_run(tmp_path, {}, {"bob": 5}, zero_missing=True)
    book = {("11", "501"): "5", ("12", "501"): "0", ("13", "501"): "0", ("14", "501"): "0", ("15", "501"): "0"}
    sheet, after = one_run(tmp_path, book, {"bob": 5}, zero_missing=True, keep_existing=True)
    assert changes(book, after) == {} and "Lee, Ann" not in sheet.text  # no row for her this time
    sheet, after = one_run(tmp_path, after, {"bob": 5, "ann": 3}, zero_missing=True, keep_existing=True)
    assert changes(book, after) == {"13": "3"}, sheet.text
    assert sheet.updated == [("Lee, Ann", "01_toy (501)", "0", "3")] and sheet.changed == []


def test_without_keep_existing_the_previous_file_changes_nothing_and_numbers_compare_as_numbers(tmp_path):
    """Without --keep-existing canvas.csv is what it was (this run's grades). With it, a roster 4.00 where the
    previous canvas.csv gave 4 is the same grade, so it is updated; Ann's EX (excused by hand) is kept; a
    previous cell with no such student or column updates nothing."""
    one_run(tmp_path, {}, {"bob": 4, "dave": 3, "ann": 2})
    book = {("11", "501"): "4.00", ("12", "501"): "2.00", ("13", "501"): "EX"}  # Dave: 3 lowered by hand
    (tmp_path / "gradebook.csv").write_text(export(book), encoding="utf-8")
    roster = lms.read_roster(tmp_path / "gradebook.csv")
    previous, _why = lms_previous.read_previous(tmp_path / "out")
    rows, who = graded({"bob": 5, "dave": 5, "ann": 5}), ["bob", "dave", "ann"]
    plain = lms.canvas_csv(rows, who, CH1_ONLY, roster=roster, previous=previous.value)
    assert plain.text == lms.canvas_csv(rows, who, CH1_ONLY, roster=roster).text
    assert plain.updated == [] and len(plain.changed) == 3
    kept = lms.canvas_csv(rows, who, CH1_ONLY, roster=roster, previous=previous.value, keep_existing=True)
    assert kept.updated == [("Jones, Bob", "01_toy (501)", "4.00", "5")], kept.text
    assert kept.changed == [("Davis, Dave", "01_toy (501)", "2.00", "5"), ("Lee, Ann", "01_toy (501)", "EX", "5")]
    assert [line[5] for line in csv.reader(io.StringIO(kept.text))][2:] == ["5", "2.00", "EX"]
    assert previous.value({"ID": "99", "Student": "Nobody"}, "01_toy (501)") is None
    assert previous.value({"ID": "", "Student": "Jones, Bob"}, "01_toy (501)") == "4"  # by name, without an ID
    assert previous.value({"ID": "11"}, "02_more (502)") is None


def test_a_cell_the_instructor_edited_in_canvas_csv_before_importing_is_no_grade_of_the_grader(tmp_path):
    """The previous canvas.csv says 3 (typed into it before the import) where the grader gave 5: the roster's
    3 is the instructor's, so it is kept; without the record (an older grader's --out) canvas.csv counts."""
    one_run(tmp_path, {}, {"bob": 5})
    text = (tmp_path / "out" / "canvas.csv").read_text(encoding="utf-8")
    (tmp_path / "out" / "canvas.csv").write_text(text.replace("bob,,5", "bob,,3"), encoding="utf-8")
    previous, _why = lms_previous.read_previous(tmp_path / "out")
    assert previous.value({"ID": "11"}, "01_toy (501)") is None
    (tmp_path / "out" / "canvas.graded.csv").unlink()
    previous, _why = lms_previous.read_previous(tmp_path / "out")
    assert previous.value({"ID": "11"}, "01_toy (501)") == "3"


@pytest.mark.parametrize("name, data, why", [
    ("canvas.csv", b"Student,ID\n\xff\xfe\n", "is not UTF-8 text"),
    ("canvas.csv", b"Name,Grade\nBob,5\n", "is not a canvas.csv the grader wrote"),
    ("canvas.graded.csv", b"who,what\n", "is not the record the grader writes"),
])
def test_a_previous_file_that_cannot_be_read_is_named_and_ignored(tmp_path, capsys, name, data, why):
    one_run(tmp_path, {}, {"bob": 1})
    (tmp_path / "out" / name).write_bytes(data)
    previous = batch.previous_canvas(tmp_path / "out", keep_existing=True)
    err = capsys.readouterr().err
    assert previous is None and f"{tmp_path / 'out' / name} {why}" in err, err
    assert "previous run's canvas.csv is IGNORED" in err and "--keep-existing updates no grade" in err, err
    (tmp_path / "out" / "canvas.csv").unlink()
    assert batch.previous_canvas(tmp_path / "out", keep_existing=True) is None and capsys.readouterr().err == ""


def test_each_student_left_out_is_listed_once_in_the_right_list(tmp_path, capsys):
    """W10: "3 roster students without a submission: Ford; Grant; Hill" was followed by "5 ... left out of
    canvas.csv because nothing of theirs was graded: Clark; Ford; Evans; Grant; Hill"."""
    (tmp_path / "gradebook.csv").write_text(export({}), encoding="utf-8")
    rows = [r for r in graded({"bob": 2}) if r.student == "bob"] + [
        Row("dave", e.id, 0, e.points, "missing", "") for e in CH1_ONLY]  # Dave sent chapter 2 only
    sheet = lms.canvas_csv(rows, ["bob", "dave"], CH1_ONLY, roster=lms.read_roster(tmp_path / "gradebook.csv"))
    assert sheet.absent == ["Lee, Ann", "Kim, Carl", "Ng, Eve"] and sheet.elsewhere == ["Davis, Dave (dave)"]
    batch._report_canvas(sheet)
    err = capsys.readouterr().err.splitlines()
    for who in ("Lee, Ann", "Kim, Carl", "Ng, Eve", "Davis, Dave"):
        assert sum(who in line for line in err) == 1, (who, err)
    [absent] = [line for line in err if "without a notebook to grade" in line]
    [other] = [line for line in err if "handed in only another chapter" in line]
    assert absent.endswith(": Lee, Ann; Kim, Carl; Ng, Eve") and other.endswith(": Davis, Dave (dave)"), err
    assert "1 roster student who handed in only another chapter" in other, other


@pytest.mark.sandbox
def test_a_roster_saved_before_the_previous_canvas_csv_is_refused_and_nothing_is_written(tmp_path, capsys):
    """W15 graded with the export from before the last import: its canvas.csv undid that import's grades. W23: a
    run that only warned still moved the imported canvas.csv to canvas.previous.csv, so the rerun the warning asked
    for took the never-imported one as what Canvas held (a late submission after a 0 stayed "kept" at 0)."""
    import os

    one_run(tmp_path, {}, {"bob": 1})
    roster, out = tmp_path / "gradebook.csv", tmp_path / "out"
    written = (out / "canvas.csv").stat().st_mtime
    capsys.readouterr()
    os.utime(roster, (written + 5, written + 5))  # exported again after the import: read as usual
    assert batch.previous_canvas(out, True, roster) is not None
    os.utime(roster, (written - 60, written - 60))  # the export from before it
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    with pytest.raises(lms.RosterError, match="saved before the previous canvas.csv") as refused:
        batch.previous_canvas(out, True, roster)
    assert "nothing was graded or written" in str(refused.value) and "Export the gradebook again" in str(refused.value)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


def test_a_stale_roster_stops_the_command_line_before_grading(tmp_path, registry, capsys):  # noqa: F811
    """Through ``python -m utils.grade``: exit 2 and every file of the earlier run as it was (W23)."""
    import os

    two_chapter_course(tmp_path / "course")
    gf.student(tmp_path / "subs", "dave", {"01_toy.ipynb": gf.notebook(list(CH1.items()))})
    roster = tmp_path / "gradebook.csv"
    roster.write_text(export({}), encoding="utf-8")
    args = ("--chapters", "1", "--format", "canvas", "--roster", str(roster), "--out", str(tmp_path / "out"))
    assert run(tmp_path, *args) == 0
    out = tmp_path / "out"
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    written = (out / "canvas.csv").stat().st_mtime
    os.utime(roster, (written - 60, written - 60))
    capsys.readouterr()
    assert run(tmp_path, *args, "--overwrite", "--keep-existing") == 2
    assert "saved before the previous canvas.csv" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


def test_again_later_through_the_command_line(tmp_path, registry, capsys):  # noqa: F811
    """README's "Again later": run 1, a hand edit in Canvas is kept and a resubmission updated by run 2."""
    two_chapter_course(tmp_path / "course")
    wrong = {eid: "def f(*a):\n    return None\n" for eid in CH1}
    gf.student(tmp_path / "subs", "bob", {"01_toy.ipynb": gf.notebook(list(wrong.items()))})
    gf.student(tmp_path / "subs", "dave", {"01_toy.ipynb": gf.notebook(list(CH1.items()))})
    args = ("--chapters", "1", "--format", "canvas", "--roster", str(tmp_path / "gradebook.csv"), "--out",
            str(tmp_path / "out"))
    (tmp_path / "gradebook.csv").write_text(export({}), encoding="utf-8")
    assert run(tmp_path, *args) == 0
    first = (tmp_path / "out" / "canvas.csv").read_text(encoding="utf-8")
    book = canvas_import(gradebook_of(export({})), people_of(export({})), first)
    assert book[("11", "501")] == "0" and book[("12", "501")] == "5", first
    book[("12", "501")] = "4.00"  # Dave's late penalty, by hand
    (tmp_path / "gradebook.csv").write_text(export(book), encoding="utf-8")
    gf.student(tmp_path / "subs", "bob", {"01_toy.ipynb": gf.notebook(list(CH1.items()))})  # resubmitted
    capsys.readouterr()
    assert run(tmp_path, *args, "--overwrite", "--keep-existing") == 0
    err = capsys.readouterr().err
    after = canvas_import(book, people_of(export(book)), (tmp_path / "out" / "canvas.csv").read_text(encoding="utf-8"))
    assert changes(book, after) == {"11": "5"}, err
    assert "updated 1 grade that Canvas holds as the previous canvas.csv gave it" in err, err
    assert "grader: canvas.csv:   Jones, Bob, 01_toy (501): 0 → 5" in err.splitlines(), err
    assert "grader: canvas.csv:   Davis, Dave, 01_toy (501): 4.00 → 5" in err.splitlines(), err
    assert (tmp_path / "out" / "canvas.previous.csv").read_text(encoding="utf-8") == first


__all__ = ["REGISTRY"]
