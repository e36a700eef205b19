"""What an instructor's walkthrough of ``python -m utils.grade`` found (issue 35, helper W3): nothing an
instructor has is lost without asking.

- ``--chapters 1`` on a download that holds chapter 2 only exits 2 with one line, and writes nothing;
- a student with no grade in a column (no submission, or none of its exercises) gets the roster's own value
  of that cell, never an empty one (Canvas's import removes a grade where a cell is empty), unless
  ``--zero-missing`` (0 for each of them); a Canvas-shaped import, which clears a grade under an empty
  cell, proves no grade is lost (issue 35, W4);
- an ``--out`` that holds an earlier run is refused unless ``--overwrite``; with it, the earlier run's
  feedback files of students absent now are gone, and nothing else of the folder is touched;
- the reports' cosmetics: an unplaced row's name in the feedback, names with commas on stderr.
"""

from __future__ import annotations

import csv
import io

import grader_fixtures as gf
import pytest
from test_grader_chapters import CH1, CH2, REGISTRY, canvas_import, gradebook_of, people_of, two_chapter_course

from utils.grading import cli, lms, report
from utils.grading.course import CourseExercise
from utils.grading.intake import UNPLACED
from utils.grading.unit import Row

GRADEBOOK = (
    "Student,ID,SIS User ID,SIS Login ID,Section,01_toy (501),02_more (502)\n"
    "    Points Possible,,,,,5,1\n"
    '"Jones, Bob",11,,bob,,4.00,\n'
    '"Lee, Ann",12,,ann,,2.00,1\n'
)


@pytest.fixture
def registry(monkeypatch):
    from utils import exercises

    monkeypatch.setattr(exercises, "all_exercises", lambda: REGISTRY)
    return REGISTRY


def run(tmp_path, *args: str) -> int:
    return cli.main([str(tmp_path / "subs"), "--course", str(tmp_path / "course"), "--jobs", "1", "--seed", "3",
                     "--memory", "512", "--timeout", "4", *args])


@pytest.mark.sandbox
def test_a_chapter_no_submission_holds_exits_2_and_writes_nothing(tmp_path, registry, capsys):
    two_chapter_course(tmp_path / "course")
    gf.student(tmp_path / "subs", "bob", {"02_more.ipynb": gf.notebook(list(CH2.items()))})
    gf.student(tmp_path / "subs", "ann", {"02_more.ipynb": gf.notebook(list(CH2.items()))})
    (tmp_path / "gradebook.csv").write_text(GRADEBOOK, encoding="utf-8")
    code = run(tmp_path, "--chapters", "1", "--format", "canvas", "--roster", str(tmp_path / "gradebook.csv"),
               "--out", str(tmp_path / "out"))
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "no submission holds" in line]
    assert code == 2 and len(lines) == 1, err
    assert "chapter 1 (--chapters)" in lines[0] and "exercises of chapter 2 only" in lines[0], lines[0]
    assert not (tmp_path / "out").exists()


def test_a_canvas_zip_given_as_the_submissions_says_to_unzip_it_and_writes_nothing(tmp_path, registry, capsys):
    """W13 passed Canvas's submissions.zip itself: "it is not a folder" said nothing of what to do."""
    two_chapter_course(tmp_path / "course")
    download = tmp_path / "submissions.zip"
    download.write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip
    code = cli.main([str(download), "--course", str(tmp_path / "course"), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and f"unzip -q {download} -d DIR" in err and "grade DIR" in err, err
    assert not (tmp_path / "out").exists()


CHAPTERS = [CourseExercise("ch1.add_one", 2, "01_toy.ipynb", 1), CourseExercise("ch1.attend", 3, "01_toy.ipynb", 1),
            CourseExercise("ch2.total", 1, "02_more.ipynb", 2)]


def rows_of(student: str, statuses: dict[str, str]) -> list[Row]:
    return [Row(student, e.id, e.points if statuses[e.id] == "passed" else 0, e.points, statuses[e.id], "")
            for e in CHAPTERS]


def test_a_column_the_submission_holds_nothing_of_keeps_the_roster_grade(tmp_path):
    """Bob handed in chapter 2 only: his 4.00 for chapter 1 survives the import; Ann's chapter 1 is graded."""
    (tmp_path / "gradebook.csv").write_text(GRADEBOOK, encoding="utf-8")
    roster = lms.read_roster(tmp_path / "gradebook.csv")
    rows = rows_of("bob", {"ch1.add_one": "missing", "ch1.attend": "missing", "ch2.total": "passed"})
    rows += rows_of("ann", {"ch1.add_one": "passed", "ch1.attend": "missing", "ch2.total": "missing"})
    before = gradebook_of(GRADEBOOK)
    sheet = lms.canvas_csv(rows, ["bob", "ann"], CHAPTERS, roster=roster)
    after = canvas_import(before, people_of(GRADEBOOK), sheet.text)
    assert {k: v for k, v in after.items() if before[k] != v} == {("11", "502"): "1", ("12", "501"): "2"}
    assert after[("11", "501")] == "4.00" and after[("12", "502")] == "1"  # nothing handed in: kept
    assert sheet.kept == [("Jones, Bob (bob)", "01_toy (501)"), ("Lee, Ann (ann)", "02_more (502)")]  # W6: not "bob"
    zero = lms.canvas_csv(rows, ["bob", "ann"], CHAPTERS, roster=roster, zero_missing=True)
    assert canvas_import(before, people_of(GRADEBOOK), zero.text) == after and zero.kept == sheet.kept  # R11


W4_GRADEBOOK = (
    "Student,ID,SIS User ID,SIS Login ID,Section,01_toy (501),02_more (502),Quiz (600),Current Score\n"
    "    Points Possible,,,,,5.00,1.00,10.00,(read only)\n"
    '"Smith, Ana",201,s201,ana,A,4.00,,9.00,75.00%\n'
    '"Lee, Fay",206,s206,fay,B,4.00,0.50,6.00,\n'
    '"Noshow, Nat",207,s207,nat,A,1.00,0.75,5.00,\n'
    '"Student, Test",208,,e1b2c3d4,,,,,\n'
)


def test_no_grade_canvas_holds_is_removed_by_an_empty_cell(tmp_path):
    """W4: Fay handed in chapter 1 into the chapter 2 run and Nat nothing; an empty cell would clear their
    chapter 2 grades on import, so the roster's values are copied and only Ana's graded cell changes."""
    (tmp_path / "gradebook.csv").write_text(W4_GRADEBOOK, encoding="utf-8")
    roster = lms.read_roster(tmp_path / "gradebook.csv")
    rows = [r for r in rows_of("ana", {"ch1.add_one": "missing", "ch1.attend": "missing", "ch2.total": "passed"})
            + rows_of("fay", {"ch1.add_one": "passed", "ch1.attend": "passed", "ch2.total": "missing"})
            if r.exercise == "ch2.total"]
    ch2 = [e for e in CHAPTERS if e.chapter == 2]
    before = gradebook_of(W4_GRADEBOOK)
    sheet = lms.canvas_csv(rows, ["ana", "fay"], ch2, roster=roster)
    after = canvas_import(before, people_of(W4_GRADEBOOK), sheet.text)
    assert {k: v for k, v in after.items() if before[k] != v} == {("201", "502"): "1"}, sheet.text
    assert after[("206", "502")] == "0.50" and after[("207", "502")] == "0.75" and after[("208", "502")] == ""
    assert sheet.kept == [] and sheet.absent == ["Noshow, Nat"]  # Fay sent only chapter 1: no rows
    assert sheet.untouched == ["Lee, Fay (fay)", "Noshow, Nat (nat)"] and sheet.test_student == ["Student, Test"]
    zero = lms.canvas_csv(rows, ["ana", "fay"], ch2, roster=roster, zero_missing=True)
    after = canvas_import(before, people_of(W4_GRADEBOOK), zero.text)
    assert {k: v for k, v in after.items() if before[k] != v} == {("201", "502"): "1"}  # W8: no 0 for Test Student
    assert "208" not in {line[1] for line in table_of(zero.text)} and zero.test_student == ["Student, Test"]


def test_zero_missing_fills_only_empty_cells_and_keeps_an_excuse_or_a_hand_entered_grade(tmp_path):
    """W5: --zero-missing wrote 0 over Ana's EX, Fay's hand-entered late penalty and a grade from an earlier
    import. Now only a cell empty in the roster gets its 0."""
    gradebook = W4_GRADEBOOK.replace("A,4.00,,9.00", "A,4.00,EX,9.00")  # Ana is excused from chapter 2
    (tmp_path / "gradebook.csv").write_text(gradebook, encoding="utf-8")
    rows = rows_of("fay", {"ch1.add_one": "passed", "ch1.attend": "passed", "ch2.total": "missing"})
    ch2 = [e for e in CHAPTERS if e.chapter == 2]
    zero = lms.canvas_csv([r for r in rows if r.exercise == "ch2.total"], ["fay"], ch2,
                          roster=lms.read_roster(tmp_path / "gradebook.csv"), zero_missing=True)
    cells = {line[1]: line[5] for line in list(csv.reader(io.StringIO(zero.text)))[2:]}
    assert cells == {}, zero.text  # no row with a 0 written: the others keep what Canvas holds, and 208 is
    # Canvas's Test Student (the student view), never given a 0 (W8)
    assert zero.untouched == ["Smith, Ana (ana)", "Lee, Fay (fay)", "Noshow, Nat (nat)"]


def feedback_names(out) -> set[str]:
    return {p.name for p in (out / "feedback").iterdir()}


@pytest.mark.sandbox
def test_an_earlier_run_in_out_is_refused_unless_overwrite_and_no_stale_feedback_stays(tmp_path, registry, capsys):
    two_chapter_course(tmp_path / "course")
    gf.student(tmp_path / "subs", "bob", {"02_more.ipynb": gf.notebook(list(CH2.items()))})
    gf.student(tmp_path / "subs", "ann", {"02_more.ipynb": gf.notebook(list(CH2.items()))})
    out = tmp_path / "out"
    assert run(tmp_path, "--chapters", "2", "--out", str(out)) == 0
    assert feedback_names(out) == {"ann.md", "bob.md", "index.csv"}
    (out / "grades.csv").write_text("hand edited\n", encoding="utf-8")
    (out / "feedback" / "notes.md").write_text("mine\n", encoding="utf-8")  # the instructor's, not listed
    capsys.readouterr()
    assert run(tmp_path, "--chapters", "2", "--out", str(out)) == 2
    err = capsys.readouterr().err
    assert f"--out {out} holds an earlier run (results.csv, grades.csv, feedback/index.csv)" in err
    assert "--overwrite" in err and (out / "grades.csv").read_text(encoding="utf-8") == "hand edited\n"

    (tmp_path / "subs" / "bob" / "02_more.ipynb").unlink()
    (tmp_path / "subs" / "bob").rmdir()  # bob withdrew: his old feedback must not stay beside the new
    assert run(tmp_path, "--chapters", "2", "--out", str(out), "--overwrite") == 0
    assert feedback_names(out) == {"ann.md", "index.csv", "notes.md"}
    assert "hand edited" not in (out / "grades.csv").read_text(encoding="utf-8")


def test_stale_feedback_goes_and_unlisted_files_stay(tmp_path):
    rows = [Row(s, "ch1.f", 1, 1, "passed", "") for s in ("ann", "bob")]
    report.write_all(tmp_path, rows, ["ann", "bob"], ["ch1.f"])
    (tmp_path / "feedback" / "mine.md").write_text("x", encoding="utf-8")
    report.write_all(tmp_path, rows[:1], ["ann"], ["ch1.f"])
    assert feedback_names(tmp_path) == {"ann.md", "index.csv", "mine.md"}


def test_an_unplaced_row_in_the_feedback_names_no_empty_exercise():
    rows = [Row("ann", "ch1.f", 1, 1, "passed", ""), Row("ann", "", 0, 0, UNPLACED, "notes.txt: not a notebook")]
    text = report.feedback_md("ann", rows)
    assert "``" not in text and "| (a file not graded) | 0 / 0 |" in text, text


def test_roster_students_without_a_submission_are_listed_apart_though_names_hold_commas(capsys):
    from utils.grading.batch import _report_canvas

    _report_canvas(lms.CanvasSheet("", [], ["Jones, Bob", "Lee, Ann"], kept=[("carl", "01_toy (501)")],
                                   untouched=["Jones, Bob (bob)", "Lee, Ann (ann)", "Kim, Eve (eve)"],
                                   elsewhere=["Kim, Eve (eve)"]))
    err = " ".join(capsys.readouterr().err.split())
    assert "2 roster students without a notebook to grade (no row in canvas.csv, so Canvas keeps what it has; " \
           "--zero-missing writes 0 where their cell is empty): Jones, Bob; Lee, Ann" in err, err
    assert "1 grade cell where the submission holds none of the column's exercises (each cell holds the roster's " \
           "current grade, since an empty cell would remove it on import" in err, err
    assert "1 roster student who handed in only another chapter (none of the graded exercises), left out of " \
           "canvas.csv so that Canvas keeps what it has" in err, err
    assert "too: Kim, Eve (eve) grader:" in err and err.count("Jones, Bob") == 1, err  # W8, W10: each named, once
    _report_canvas(lms.CanvasSheet("", [], ["Jones, Bob"], kept=[("carl", "01_toy (501)")], zero_missing=True))
    err = " ".join(capsys.readouterr().err.split())
    assert err.count("(--zero-missing: 0 where the roster's cell is empty; a cell holding anything, a grade or EX, "
                     "keeps it)") == 2 and "roster's current grade" not in err, err


def test_help_says_memory_is_per_student(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "MiB of RAM per student: all of a student's processes together" in text
    assert "--overwrite" in text and "--zero-missing" in text
    assert "keeps it; Canvas's Test Student (the student view) gets no row, not even a 0; default" in text  # W8



@pytest.mark.sandbox
def test_points_possible_unlike_the_course_exit_2_before_grading_and_write_nothing(tmp_path, registry, capsys):
    """W4: the roster gives chapter 2 10 points, the course 1: full marks would read 1/10 in Canvas. R11: this
    is known once the roster is read, so nobody is graded and nothing is written (an earlier run in --out, even
    with --overwrite, stays as it was)."""
    two_chapter_course(tmp_path / "course")
    gf.student(tmp_path / "subs", "bob", {"02_more.ipynb": gf.notebook(list(CH2.items()))})
    (tmp_path / "gradebook.csv").write_text(GRADEBOOK.replace(",,,,,5,1\n", ",,,,,5,10.00\n"), encoding="utf-8")
    out = tmp_path / "out"
    args = ("--chapters", "2", "--format", "canvas", "--roster", str(tmp_path / "gradebook.csv"), "--out", str(out))
    code = run(tmp_path, *args)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "Points Possible" in line]
    assert code == 2 and len(lines) == 1, err
    assert "canvas.csv NOT written" in lines[0] and "for 02_more (502) is 10.00, but the course gives it 1 " \
        "points" in lines[0], lines[0]
    assert "nothing was graded or written" in err.splitlines()[-1] and "grading:" not in err, err
    assert not out.exists()
    out.mkdir()
    (out / "canvas.csv").write_text("earlier\n", encoding="utf-8")
    (out / "results.csv").write_text("earlier\n", encoding="utf-8")
    assert run(tmp_path, *args, "--overwrite") == 2
    assert "grading:" not in capsys.readouterr().err
    assert [p.read_text(encoding="utf-8") for p in sorted(out.iterdir())] == ["earlier\n", "earlier\n"]


def test_points_possible_compared_as_decimals_per_graded_column(tmp_path):
    (tmp_path / "gradebook.csv").write_text(W4_GRADEBOOK, encoding="utf-8")
    roster = lms.read_roster(tmp_path / "gradebook.csv")
    assert roster.points_possible == {"01_toy (501)": "5.00", "02_more (502)": "1.00", "Quiz (600)": "10.00"}
    rows = rows_of("ana", {"ch1.add_one": "passed", "ch1.attend": "passed", "ch2.total": "passed"})
    assert lms.canvas_csv(rows, ["ana"], CHAPTERS, roster=roster).mismatched == []  # 5.00 is 5, 1.00 is 1
    wrong = lms.read_roster(tmp_path / "gradebook.csv")
    wrong.points_possible["02_more (502)"] = "2.5"
    assert lms.canvas_csv(rows, ["ana"], CHAPTERS, roster=wrong).mismatched == [("02_more (502)", "2.5", "1")]


def test_help_says_what_zero_missing_writes(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "write 0 where a roster student has no graded submission for a column (who handed in nothing, or " \
           "nothing of that chapter) and the roster's cell is EMPTY; a cell holding anything (a grade, EX, a late " \
           "penalty entered by hand) keeps it" in text
    assert "copy the roster's current grade into that cell" in text
    assert "a student with nothing graded gets no row (Canvas keeps what it has)" in text


@pytest.mark.sandbox
def test_another_chapters_notebook_is_named_as_such_in_the_feedback(tmp_path, registry, capsys):
    """W4: Fay handed in chapter 1 into the chapter 2 run and read only "no cell ... found"."""
    two_chapter_course(tmp_path / "course")
    gf.student(tmp_path / "subs", "bob", {"02_more.ipynb": gf.notebook(list(CH2.items()))})
    gf.student(tmp_path / "subs", "fay", {"01_toy.ipynb": gf.notebook(list(CH1.items()))})
    assert run(tmp_path, "--chapters", "2", "--out", str(tmp_path / "out")) == 0
    fay = (tmp_path / "out" / "feedback" / "fay.md").read_text(encoding="utf-8")
    assert "01_toy.ipynb: this is chapter 1; this assignment grades chapter 2, so ch2.total has no cell here: " \
           "hand in your chapter 2 notebook" in fay, fay
    assert "no cell for exercise" not in fay
    assert "this is chapter" not in (tmp_path / "out" / "feedback" / "bob.md").read_text(encoding="utf-8")


@pytest.mark.sandbox
def test_two_assignments_for_one_graded_column_exit_2_before_grading(tmp_path, registry, capsys):
    """R10: '02_more (502)' and '02 More (503)' both name chapter 2: refused, naming both, nobody graded."""
    two_chapter_course(tmp_path / "course")
    gf.student(tmp_path / "subs", "bob", {"02_more.ipynb": gf.notebook(list(CH2.items()))})
    (tmp_path / "gradebook.csv").write_text(
        GRADEBOOK.replace("02_more (502)\n", "02_more (502),02 More (503)\n").replace(",,,,,5,1\n", ",,,,,5,1,1\n"),
        encoding="utf-8")
    code = run(tmp_path, "--chapters", "2", "--format", "canvas", "--roster", str(tmp_path / "gradebook.csv"),
               "--out", str(tmp_path / "out"))
    err = capsys.readouterr().err
    assert code == 2 and "'02_more (502)' and '02 More (503)'" in err.splitlines()[-1], err
    assert "grading:" not in err and not (tmp_path / "out").exists(), err


def test_a_grade_canvas_holds_that_this_run_changes_is_listed_and_kept_only_with_keep_existing(tmp_path):
    """R11: Bob's 4.00 (entered by hand) becomes 5 and Ann's EX becomes 1: canvas.csv carries the new grades
    and the sheet names both cells; with keep_existing it carries the roster's. Equal values (2.00 and 2) and a
    first grade (an empty cell) are no change."""
    (tmp_path / "gradebook.csv").write_text(GRADEBOOK.replace('2.00,1\n', '2.00,EX\n'), encoding="utf-8")
    roster = lms.read_roster(tmp_path / "gradebook.csv")
    rows = rows_of("bob", {"ch1.add_one": "passed", "ch1.attend": "passed", "ch2.total": "passed"})
    rows += rows_of("ann", {"ch1.add_one": "passed", "ch1.attend": "failed", "ch2.total": "passed"})

    def cells(sheet):
        return {(line[1], column): cell for line in list(csv.reader(io.StringIO(sheet.text)))[2:]
                for column, cell in zip(("501", "502"), line[5:])}

    changed = [("Jones, Bob", "01_toy (501)", "4.00", "5"), ("Lee, Ann", "02_more (502)", "EX", "1")]
    new = lms.canvas_csv(rows, ["bob", "ann"], CHAPTERS, roster=roster)
    assert new.changed == changed and not new.keep_existing
    assert cells(new) == {("11", "501"): "5", ("11", "502"): "1", ("12", "501"): "2", ("12", "502"): "1"}
    kept = lms.canvas_csv(rows, ["bob", "ann"], CHAPTERS, roster=roster, keep_existing=True)
    assert kept.changed == changed and kept.keep_existing
    assert cells(kept) == {("11", "501"): "4.00", ("11", "502"): "1", ("12", "501"): "2", ("12", "502"): "EX"}


def test_changed_grades_are_each_listed_on_stderr_with_their_count(capsys):
    from utils.grading.batch import _report_canvas

    changed = [("Jones, Bob", "01_toy (501)", "4.00", "5"), ("Lee, Ann", "02_more (502)", "EX", "1")]
    _report_canvas(lms.CanvasSheet("", [], [], changed=changed))
    err = capsys.readouterr().err.splitlines()
    assert "2 grades Canvas already holds differ from this run's (canvas.csv carries this run's grade" in err[0], err
    assert err[1:] == ["grader: canvas.csv:   Jones, Bob, 01_toy (501): 4.00 → 5",
                       "grader: canvas.csv:   Lee, Ann, 02_more (502): EX → 1"], err
    _report_canvas(lms.CanvasSheet("", [], [], changed=changed[:1], keep_existing=True))
    err = capsys.readouterr().err.splitlines()
    assert "1 grade Canvas already holds differs from this run's (kept: canvas.csv carries the roster's value, " \
           "--keep-existing)" in err[0] and err[1] == "grader: canvas.csv:   Jones, Bob, 01_toy (501): 4.00 → 5", err


def test_help_says_what_keep_existing_does(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--keep-existing canvas.csv: where the roster's cell already holds a grade (or EX) and this run's grade " \
           "differs, keep the roster's value" in text, text
    assert "default: write this run's grade (a regrade replaces the old one on import); either way stderr lists " \
           "each such cell (Name, column: old → new) and their count" in text, text


@pytest.mark.parametrize("flag", ["--zero-missing", "--keep-existing"])
def test_canvas_only_flags_without_format_canvas_are_refused(flag, capsys):
    with pytest.raises(SystemExit) as raised:
        cli.main(["subs", flag])
    assert raised.value.code == 2 and f"{flag} changes only canvas.csv: add --format canvas" in capsys.readouterr().err


@pytest.mark.sandbox
def test_a_rerun_lists_the_grade_it_changes_and_keep_existing_keeps_it(tmp_path, registry, capsys):
    """R11, through the command line: Ann's 0.50 for chapter 2 (entered by hand) meets her graded 1."""
    two_chapter_course(tmp_path / "course")
    gf.student(tmp_path / "subs", "ann", {"02_more.ipynb": gf.notebook(list(CH2.items()))})
    (tmp_path / "gradebook.csv").write_text(GRADEBOOK.replace("2.00,1\n", "2.00,0.50\n"), encoding="utf-8")
    args = ("--chapters", "2", "--format", "canvas", "--roster", str(tmp_path / "gradebook.csv"), "--out",
            str(tmp_path / "out"))
    assert run(tmp_path, *args) == 0
    assert "grader: canvas.csv:   Lee, Ann, 02_more (502): 0.50 → 1" in capsys.readouterr().err.splitlines()
    assert '"Lee, Ann",12,,ann,,1\n' in (tmp_path / "out" / "canvas.csv").read_text(encoding="utf-8")
    import os  # the gradebook exported again (unchanged) after that run: a stale one is refused (W23)

    later = (tmp_path / "out" / "canvas.csv").stat().st_mtime + 5
    os.utime(tmp_path / "gradebook.csv", (later, later))
    assert run(tmp_path, *args, "--overwrite", "--keep-existing") == 0
    assert "(kept: canvas.csv carries the roster's value, --keep-existing)" in capsys.readouterr().err
    assert '"Lee, Ann",12,,ann,,0.50\n' in (tmp_path / "out" / "canvas.csv").read_text(encoding="utf-8")


def test_a_stale_roster_undoes_no_edit_made_in_canvas_since_the_export(tmp_path, capsys):
    """W6: canvas.csv had a row for every roster student, copying the roster's cells where the run had no grade,
    so importing it put back what the old export held over an edit made in Canvas since. Now a student with
    nothing graded has no row, and Canvas's import leaves a student not in the file as they are."""
    from utils.grading.batch import _report_canvas

    (tmp_path / "gradebook.csv").write_text(W4_GRADEBOOK, encoding="utf-8")
    roster = lms.read_roster(tmp_path / "gradebook.csv")  # exported before the edits below
    now = gradebook_of(W4_GRADEBOOK) | {("207", "502"): "1.00", ("206", "502"): "EX", ("206", "501"): "5.00"}
    rows = [r for r in rows_of("ana", {"ch1.add_one": "missing", "ch1.attend": "missing", "ch2.total": "passed"})
            + rows_of("fay", {"ch1.add_one": "passed", "ch1.attend": "passed", "ch2.total": "missing"})
            if r.exercise == "ch2.total"]
    ch2 = [e for e in CHAPTERS if e.chapter == 2]
    sheet = lms.canvas_csv(rows, ["ana", "fay"], ch2, roster=roster)
    after = canvas_import(now, people_of(W4_GRADEBOOK), sheet.text)
    assert {k: v for k, v in after.items() if now[k] != v} == {("201", "502"): "1"}, sheet.text
    assert sheet.untouched == ["Lee, Fay (fay)", "Noshow, Nat (nat)"]
    _report_canvas(sheet)
    err = " ".join(capsys.readouterr().err.split())
    assert "1 roster student who handed in only another chapter" in err and err.count("Noshow, Nat") == 1, err
    zero = lms.canvas_csv(rows, ["ana", "fay"], ch2, roster=roster, zero_missing=True)
    after = canvas_import(now, people_of(W4_GRADEBOOK), zero.text)  # a 0 only where the export's cell was empty
    assert {k: v for k, v in after.items() if now[k] != v} == {("201", "502"): "1"}  # none for Test Student


def test_without_a_roster_the_messages_say_what_an_empty_cell_does(capsys):
    """W6: "each cell holds the roster's current grade" was printed with no --roster, where the cell is empty."""
    from utils.grading.batch import _report_canvas

    _report_canvas(lms.CanvasSheet("", [], [], kept=[("davisdave", "01_toy")], from_roster=False,
                                   untouched=["davisdave (1005)"], elsewhere=["davisdave (1005)"]))
    err = " ".join(capsys.readouterr().err.split())
    assert "roster" not in err.replace("--roster", "") and "1 student who handed in only another chapter" in err, err
    assert "no --roster, so each is EMPTY and importing canvas.csv removes a grade Canvas holds there" in err, err
    rows = [Row("dave", "ch1.add_one", 0, 2, "missing", ""), Row("dave", "ch1.attend", 0, 3, "missing", ""),
            Row("dave", "ch2.total", 1, 1, "passed", "")]
    sheet = lms.canvas_csv(rows, ["dave"], CHAPTERS, canvas_ids={"dave": "1005"})
    assert sheet.kept == [("dave", "01_toy")] and not sheet.from_roster and sheet.untouched == []
    only_ch1 = lms.canvas_csv(rows[:2], ["dave"], CHAPTERS[:2], canvas_ids={"dave": "1005"})
    assert len(table_of(only_ch1.text)) == 2 and only_ch1.untouched == only_ch1.elsewhere == ["dave (1005)"]  # W6


def table_of(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_every_student_left_out_is_named_and_canvas_s_test_student_is_no_student(tmp_path, capsys):
    """W8 (issue 35): Eve handed in chapter 1 only, so the chapter 2 run left her out of canvas.csv, but stderr
    named only the students without a submission; and --zero-missing gave Canvas's Test Student (its student
    view, exported as "Student, Test" or "Test Student") a 0."""
    from utils.grading.batch import _report_canvas

    gradebook = W4_GRADEBOOK + '"Test Student",209,,f5e6d7c8,,,,,\n'
    (tmp_path / "gradebook.csv").write_text(gradebook, encoding="utf-8")
    rows = [r for r in rows_of("ana", {"ch1.add_one": "missing", "ch1.attend": "missing", "ch2.total": "passed"})
            + rows_of("fay", {"ch1.add_one": "passed", "ch1.attend": "passed", "ch2.total": "missing"})
            if r.exercise == "ch2.total"]
    ch2 = [e for e in CHAPTERS if e.chapter == 2]
    for zero_missing in (False, True):
        sheet = lms.canvas_csv(rows, ["ana", "fay"], ch2, roster=lms.read_roster(tmp_path / "gradebook.csv"),
                               zero_missing=zero_missing)
        ids = [line[1] for line in table_of(sheet.text)[2:]]
        assert "208" not in ids and "209" not in ids, sheet.text
        assert sheet.test_student == ["Student, Test", "Test Student"]
        assert sheet.untouched == ["Lee, Fay (fay)", "Noshow, Nat (nat)"] and sheet.absent == ["Noshow, Nat"]
        _report_canvas(sheet)
        err = capsys.readouterr().err
        [line] = [line for line in err.splitlines() if "handed in only another chapter" in line]
        assert line.endswith(": Lee, Fay (fay)"), line  # Fay has a submission: named too, apart from Nat (W10)
        assert sum("Noshow, Nat" in line for line in err.splitlines()) == 1, err
        [line] = [line for line in err.splitlines() if "Student, Test" in line]
        assert line == ("grader: canvas.csv: Canvas's Test Student (the student view, not a student) is left out: "
                        "Student, Test; Test Student"), err
