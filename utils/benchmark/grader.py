"""``python -m utils.benchmark grader``: ``utils.grading.grade`` against running the same notebooks top to bottom."""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from utils.benchmark.common import environment_line, text_table
from utils.notebook_run import execute_notebook

__all__ = ["grader_benchmark", "format_grader_table", "add_grader_command"]


def grader_benchmark(notebooks: Sequence[str | Path], *, students: int = 1, jobs: int | None = None,
                     seed: int = 0) -> list[dict]:
    """Time ``utils.grading.grade`` on ``students`` copies of ``notebooks`` against executing each notebook
    top to bottom with nbclient (:func:`utils.notebook_run.execute_notebook`), once per student.

    Returns two rows, ``nbclient`` (the baseline) and ``utils.grading.grade``, with ``seconds`` and
    ``ratio`` (grader / nbclient).
    """
    from utils.grading.batch import grade  # here: `grader` reports, rather than fails, when the package is missing

    paths = [Path(p).resolve() for p in notebooks]
    with tempfile.TemporaryDirectory(prefix="grader-bench-") as tmp:
        submissions = Path(tmp) / "submissions"
        for i in range(students):
            folder = submissions / f"student{i:02d}"
            folder.mkdir(parents=True)
            for p in paths:
                shutil.copy(p, folder / p.name)
        start = time.perf_counter()
        for _ in range(students):
            for p in paths:
                execute_notebook(p)
        run_s = time.perf_counter() - start
        start = time.perf_counter()
        summary = grade(submissions, Path(tmp) / "out", jobs=jobs, seed=seed, progress=False)
        grade_s = time.perf_counter() - start
    units = students * len(paths)
    return [
        {"name": "nbclient, top to bottom", "seconds": run_s, "per_notebook": run_s / units, "ratio": 1.0,
         "notebooks": units, "detail": "sequential"},
        {"name": "utils.grading.grade", "seconds": grade_s, "per_notebook": grade_s / units,
         "ratio": grade_s / run_s, "notebooks": units,
         "detail": f"jobs={jobs or 'default'}, isolation={summary.get('isolation')}, "
                   f"{sum(summary['totals'].values())}/{summary['max_total'] * students} points"},
    ]


def format_grader_table(rows: Sequence[dict]) -> str:
    """A plain-text table of :func:`grader_benchmark` rows.

    >>> print(format_grader_table([{"name": "nbclient", "seconds": 2.0, "per_notebook": 1.0, "ratio": 1.0,
    ...     "notebooks": 2, "detail": "sequential"}]))  # doctest: +NORMALIZE_WHITESPACE
    method    notebooks  total   per notebook  vs nbclient  detail
    nbclient  2          2.0 s   1.00 s        1.00x        sequential
    """
    header = ("method", "notebooks", "total", "per notebook", "vs nbclient", "detail")
    body = [(r["name"], str(r["notebooks"]), f"{r['seconds']:.1f} s", f"{r['per_notebook']:.2f} s",
             f"{r['ratio']:.2f}x", r["detail"]) for r in rows]
    return text_table(header, body)


def _run_grader(args: argparse.Namespace) -> list[dict] | None:
    try:
        import utils.grading  # noqa: F401
    except ImportError:
        print("grader: utils.grading is not available yet, so there is nothing to time "
              "(the grader issue adds it)")
        return None
    notebooks = args.notebooks or sorted(
        str(p) for p in (Path(__file__).resolve().parents[2] / "solutions").glob("*.ipynb")
    )
    if not notebooks:
        print("grader: no notebooks found in solutions/")
        return None
    print(f"grader: {len(notebooks)} notebook(s) x {args.students} student(s): "
          + ", ".join(Path(n).name for n in notebooks))
    print(environment_line())
    rows = grader_benchmark(notebooks, students=args.students, jobs=args.jobs)
    print(format_grader_table(rows))
    return rows


def add_grader_command(subparsers: argparse._SubParsersAction) -> None:
    """Register ``grader``: :func:`grader_benchmark` from the command line."""
    p = subparsers.add_parser("grader", help="utils.grading.grade vs executing the notebooks with nbclient")
    p.add_argument("notebooks", nargs="*", help="solution notebooks (default: every solutions/*.ipynb)")
    p.add_argument("--students", type=int, default=1, help="copies of the notebooks to grade (default 1)")
    p.add_argument("--jobs", type=int, default=None, help="grader parallelism (default: the grader's)")
    p.set_defaults(run=_run_grader)
