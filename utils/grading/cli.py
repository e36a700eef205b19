"""``python -m utils.grade SUBMISSIONS [--out DIR] [--jobs N] [--timeout SECONDS] [--seed N]``.

``python -m utils.grade gradescope-bundle OUT.zip`` writes a Gradescope autograder (:mod:`utils.grading.gradescope`).

Also :func:`grade`, the same as a function (``utils.benchmark`` times it).
Exit status: 0 when the batch completed, whatever the scores; 2 for bad arguments or no submissions.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from utils.grading import engine, report, sandbox
from utils.paths import REPO_ROOT as COURSE_ROOT


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


class NoSubmissions(ValueError):
    pass


def grade(submissions_dir: str | Path, out_dir: str | Path, *, jobs: int | None = None, timeout: float = 10.0,
          seed: int = 0, course_root: str | Path | None = None, registry: Mapping[str, Any] | None = None,
          memory_mb: int = 2048, progress: bool = True) -> dict[str, Any]:
    """Grade every student folder in ``submissions_dir`` and write the reports into ``out_dir``.

    Args:
        registry: exercise id -> :class:`~utils.exercises.definition.Exercise`; default
            :func:`utils.exercises.all_exercises` (tests inject their own).
        course_root: where ``solutions/`` lives (points and the exercise list come from there).

    Returns a summary: ``students``, ``exercises``, ``rows`` (list of :class:`engine.Row`),
    ``totals`` (student -> points), ``max_total``, ``seconds``, ``isolation``, ``seed``, ``skipped``
    (entries of ``submissions_dir`` that are not graded, each with the reason, also printed on stderr).
    Raises :class:`NoSubmissions` when there is no student folder.
    """
    started = time.perf_counter()
    submissions = Path(submissions_dir)
    if not submissions.is_dir() or not any(True for _ in _students(submissions)):
        raise NoSubmissions(f"no student folders found in {submissions}")
    if registry is None:
        from utils.exercises import all_exercises

        registry = all_exercises()
    root = Path(course_root) if course_root is not None else COURSE_ROOT
    from utils.grading.course import skipped_entries

    skipped = skipped_entries(submissions)
    if skipped:
        print(f"grader: not graded (not a student folder): {', '.join(skipped)}", file=sys.stderr)
    the_plan = engine.plan(submissions, root, registry)
    settings = engine.Settings(timeout=float(timeout), seed=int(seed), memory_mb=int(memory_mb))
    jobs = jobs or default_jobs()
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(the_plan.units), desc="grading", unit="student", file=sys.stderr)
    try:
        rows = engine.run_plan(the_plan, settings, jobs, progress=bar.update if bar else None)
    finally:
        if bar is not None:
            bar.close()
    ids = [e.id for e in the_plan.exercises]
    report.write_all(Path(out_dir), rows, the_plan.students, ids)
    totals = {s: sum(r.points for r in rows if r.student == s) for s in the_plan.students}
    return {
        "students": the_plan.students, "exercises": ids, "rows": rows, "totals": totals,
        "max_total": sum(e.points for e in the_plan.exercises), "seconds": time.perf_counter() - started,
        "isolation": sandbox.isolation().level, "seed": settings.seed, "units": len(the_plan.units),
        "skipped": skipped,
    }


def _students(submissions: Path):
    from utils.grading.course import find_students

    return find_students(submissions)


def _positive(kind):
    def parse(text: str):
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value
    return parse


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["gradescope-bundle"]:  # python -m utils.grade gradescope-bundle OUT.zip
        from utils.grading.gradescope import bundle_main

        return bundle_main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m utils.grade", description=(
        "Grade a class: SUBMISSIONS/<student>/*.ipynb -> results.csv, grades.csv, feedback/<student>.md"))
    parser.add_argument("submissions", type=Path, help="folder with one sub-folder per student")
    parser.add_argument("--out", type=Path, default=Path("grades"), help="output folder (default: grades)")
    parser.add_argument("--jobs", type=_positive(int), default=default_jobs(),
                        help="notebooks graded in parallel (default: number of cores)")
    parser.add_argument("--timeout", type=_positive(float), default=10.0,
                        help="wall-clock seconds per exercise (default: 10)")
    parser.add_argument("--seed", type=int, default=None,
                        help="seed of the random test inputs (default: random, printed; reuse it to reproduce)")
    parser.add_argument("--memory", type=_positive(int), default=2048, help="MiB per exercise (default: 2048)")
    parser.add_argument("--course", type=Path, default=COURSE_ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    print(f"grader: seed {seed} (pass --seed {seed} to reproduce these results)", file=sys.stderr)
    try:
        summary = grade(args.submissions, args.out, jobs=args.jobs, timeout=args.timeout, seed=seed,
                        course_root=args.course, memory_mb=args.memory)
    except NoSubmissions as exc:
        print(f"grader: {exc}", file=sys.stderr)
        return 2
    print(report.summary_table(summary["rows"], summary["exercises"]))
    print(f"\n{len(summary['students'])} students, {len(summary['exercises'])} exercises, "
          f"{summary['units']} students' notebooks in {summary['seconds']:.1f} s; wrote {args.out}/results.csv, "
          f"grades.csv, feedback/")
    return 0
