"""``python -m utils.grade SUBMISSIONS [--out DIR] [--jobs N] [--timeout SECONDS] [--seed N | --seed-file F]
[--layout L] [--roster CSV --format canvas] [--course DIR] [--lang en|zh]``: the grader's command line over
:func:`utils.grading.batch.grade`.

(``python -m utils.grade gradescope-bundle OUT.zip``, which writes a Gradescope autograder, is
:mod:`utils.builder.gradescope_bundle`: :mod:`utils.grade` sends it there.)
Exit status: 0 when the batch completed, whatever the scores; 2 for bad arguments, no submissions, a
course with no exercises, no submission holding an exercise of the graded chapters, an ``--out`` that
holds an earlier run (without ``--overwrite``) or an unusable roster: two roster assignments named like one
graded column, or Points Possible other than the course's points for a graded column. Each of these is found
before any student is graded, and nothing is written.
"""

from __future__ import annotations

import argparse
import secrets
import sys
from pathlib import Path

from utils.grading import course, intake, lms, report, sandbox
from utils.grading.batch import (
    NoExercises,
    NoSubmissions,
    NothingToGrade,
    OutputExists,
    default_course,
    default_jobs,
    grade,
)
from utils.grading.course_secret import SecretError, read_secret
from utils.i18n.messages import LANGUAGES

__all__ = ["add_intake_arguments", "main"]


EPILOG = """\
other command:
  python -m utils.grade gradescope-bundle OUT.zip [options]
                        write a Gradescope autograder zip for the course (the same grader, run by
                        Gradescope for each submission); see: python -m utils.grade gradescope-bundle --help

environment variables (read by the Gradescope autograder's setup.sh and run_autograder, e.g. to try
a bundle on your own machine before uploading it):
  AUTOGRADER_ROOT       the folder the autograder works in, laid out as Gradescope's (source/, submission/,
                        results/); default /autograder. setup.sh makes its venv/ there; run_autograder grades
                        submission/ and writes results/results.json there
  AUTOGRADER_PYTHON     the Python that run_autograder grades with; default $AUTOGRADER_ROOT/venv/bin/python
                        (the venv setup.sh built)
"""


def _positive(kind):
    def parse(text: str):
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value
    return parse


def add_intake_arguments(parser: argparse.ArgumentParser) -> None:
    """``--layout``, ``--roster``, ``--format``, ``--columns`` and ``--course``: where submissions and the
    course come from, and the LMS export."""
    parser.add_argument("--layout", choices=intake.LAYOUTS, default="auto", help=(
        "how SUBMISSIONS is laid out: folders (SUBMISSIONS/<student>/, nested folders allowed, or "
        "<student>.zip), canvas (a Canvas download: <name>_<user id>_<submission id>_<file>), flat (one "
        "<student>.ipynb or .zip each), or auto (default: choose from what is there, and say which)"))
    parser.add_argument("--roster", type=Path, default=None, help=(
        "CSV mapping submissions to LMS identities (Canvas's gradebook export works as it is); used by --format"))
    parser.add_argument("--format", dest="lms_format", choices=("canvas",), default=None, help=(
        "also write an LMS gradebook: canvas writes OUT/canvas.csv for Canvas's grade import"))
    parser.add_argument("--columns", choices=lms.COLUMNS, default="chapter", help=(
        "gradebook columns of --format: one per chapter (default) or one per exercise"))
    parser.add_argument("--zero-missing", action="store_true", help=(
        "canvas.csv: write 0 where a roster student has no graded submission for a column (who handed in nothing, "
        "or nothing of that chapter) and the roster's cell is EMPTY; a cell holding anything (a grade, EX, a late "
        "penalty entered by hand) keeps it; Canvas's Test Student (the student view) gets no row, not even a 0; "
        "default: a student with nothing graded gets no row (Canvas keeps what it "
        "has), and in a written row copy the roster's current grade into that cell (an empty cell would remove the "
        "grade on import; a cell empty in the roster stays empty)"))
    parser.add_argument("--keep-existing", action="store_true", help=(
        "canvas.csv: where the roster's cell already holds a grade (or EX) and this run's grade differs, keep the "
        "roster's value, unless the cell still holds the grade the previous run's canvas.csv in --out gave it (read "
        "with --overwrite and kept as canvas.previous.csv): not edited in Canvas since the last import, so a "
        "resubmission or late submission gets this run's grade (listed apart as updated); default: write this "
        "run's grade (a regrade replaces the old one on import); either way "
        "stderr lists each such cell (Name, column: old → new) and their count"))
    parser.add_argument("--course", type=Path, default=None, help=(
        "the course folder whose solutions/*.ipynb give the exercises and their points (default: this "
        "checkout's solutions/ when present, else the exercise list installed with the package)"))
    parser.add_argument("--chapters", default=None, metavar="LIST", help=(
        "grade only these chapters, as one assignment out of their own points: a number, a range or a list "
        "(2, 2-3, 1,3,5-6); other chapters' exercises are not graded or reported (default: every chapter)"))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m utils.grade", description=(
        "Grade a class: SUBMISSIONS (one folder, zip or Canvas download per student) -> results.csv, "
        "grades.csv, feedback/<student>.md"), epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("submissions", type=Path, help="folder of submissions, laid out as --layout says")
    parser.add_argument("--out", type=Path, default=Path("grades"), help="output folder (default: grades)")
    parser.add_argument("--jobs", type=_positive(int), default=default_jobs(),
                        help="students graded in parallel (default: number of cores)")
    parser.add_argument("--timeout", type=_positive(float), default=10.0,
                        help="CPU seconds per exercise (a wall-clock backstop stops code that only waits; default: 10)")
    seeds = parser.add_mutually_exclusive_group()
    seeds.add_argument("--seed", type=int, default=None,
                       help="seed of the random test inputs (default: random, printed; reuse it to reproduce)")
    seeds.add_argument("--seed-file", type=Path, default=None, metavar="FILE", help=(
        "read the seed from FILE, mode 0600: one non-negative integer on a line of its own; lines starting with "
        "'#' are comments and blank lines are skipped (the grading_secret.txt that python -m utils.build --nbgrader "
        "writes is such a file); unlike --seed it is not on the command line, which any process on this machine "
        "can read"))
    parser.add_argument("--memory", type=_positive(int), default=2048, help=(
        "MiB of RAM per student: all of a student's processes together, above what its worker holds once torch is "
        "imported (and the size of its tmpfs work folder where the grader mounts one; default: 2048)"))
    parser.add_argument("--overwrite", action="store_true", help=(
        "replace an earlier run in --out (its grades.csv and hand edits there are lost); without it the grader "
        "refuses an --out that holds results.csv, grades.csv, canvas.csv or feedback/"))
    add_intake_arguments(parser)
    parser.add_argument("--feedback", choices=("full", "public", "score"), default="public", help=(
        "what the reports say: full (every diagnosis), public (default: full diagnoses for public cases; for "
        "hidden cases only how many pass and the diagnosis category), score (points only)"))
    parser.add_argument("--allow-weak-isolation", action="store_true", help=(
        "grade even where only a weak sandbox works on this machine (student code as root, or not contained); "
        "without it the grader refuses such a machine before reading any submission, and says why"))
    parser.add_argument("--lang", choices=tuple(LANGUAGES), default="en", help=(
        "language of the feedback: en (default) or zh (简体中文); ids, statuses and points are the same"))
    args = parser.parse_args(argv)
    if args.roster is not None and args.lms_format is None:
        parser.error("--roster is read only for an LMS gradebook: add --format canvas")
    for flag in ("zero_missing", "keep_existing"):
        if getattr(args, flag) and args.lms_format is None:
            parser.error(f"--{flag.replace('_', '-')} changes only canvas.csv: add --format canvas")
    chapters = None
    if args.chapters is not None:
        try:
            root = args.course if args.course is not None else default_course()
            chapters = course.parse_chapters(args.chapters, course.course_chapters(root))
        except (course.ChapterError, course.InvalidNotebook, ValueError, OSError) as exc:
            print(report.console(f"grader: {exc}"), file=sys.stderr)
            return 2
    if args.seed_file is not None:
        try:
            seed = read_secret(args.seed_file)
        except SecretError as exc:
            print(report.console(f"grader: --seed-file: {exc}"), file=sys.stderr)
            return 2
    else:
        seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
        print(f"grader: seed {seed} (keep it secret; pass it back in a --seed-file to reproduce these results)",
              file=sys.stderr)
    if args.seed is not None and not sandbox.isolation(check=False).pidns:
        print("grader: WARNING: without a PID namespace the students' code can read every command line on this "
              "machine, --seed's included: pass the seed in a --seed-file (mode 0600) instead", file=sys.stderr)
    try:
        summary = grade(args.submissions, args.out, jobs=args.jobs, timeout=args.timeout, seed=seed,
                        course_root=args.course, memory_mb=args.memory, layout=args.layout, roster=args.roster,
                        lms_format=args.lms_format, columns=args.columns, feedback=args.feedback,
                        lang=args.lang, chapters=chapters, allow_weak_isolation=args.allow_weak_isolation,
                        overwrite=args.overwrite, refuse_empty=True, zero_missing=args.zero_missing,
                        keep_existing=args.keep_existing)
    except (NoSubmissions, NoExercises, NothingToGrade, OutputExists, lms.RosterError, course.ChapterError,
            sandbox.WeakIsolation) as exc:
        print(report.console(str(exc) if isinstance(exc, sandbox.WeakIsolation) else f"grader: {exc}"),
              file=sys.stderr)
        return 2
    print(report.summary_table(summary["rows"], summary["exercises"]))
    canvas = ", canvas.csv" if summary["canvas"] is not None else ""
    students, exercises = report.plural(len(summary["students"]), "student"), report.plural(
        len(summary["exercises"]), "exercise")
    print(f"\n{students} and {exercises}: ran the cells of {report.plural(summary['units'], 'student')} in "
          f"{summary['seconds']:.1f} s; wrote "
          f"{args.out}/results.csv, grades.csv{canvas}, feedback/")
    print(f"grader isolation: {summary['isolation_summary']}")
    return 0
