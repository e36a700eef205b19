"""``python -m utils.grading.nbgrader_judge NOTEBOOK --student ID --secret FILE --exercise ID ...``: one
nbgrader submission graded by the course's grader, outside the student's kernel (trusted side).

nbgrader runs a submission in the student's own kernel, where the student's code may replace anything
before a test cell runs: the ``check`` function, :mod:`utils.exercises`, IPython's input transformers
(which rewrite the test cell itself), the cell's output. So no test cell of the nbgrader export decides a
grade. The hook that the export writes next to ``nbgrader_config.py`` (:mod:`utils.builder.nbgrader_hook`)
runs this command, in a fresh process of the course's Python, after nbgrader has executed the notebook,
and writes its verdicts into the test cells' outputs.

This command reads the submitted notebook from disk (through one descriptor, size-capped, as the grader
reads any submission), or from stdin when NOTEBOOK is ``-`` (with ``--name``, its file name: the hook
sends the bytes it read before the student's kernel started, since that kernel may rewrite the file),
and grades it with :func:`utils.grading.batch.grade`, exactly as
``python -m utils.grade SUBMITTED --seed SEED`` grades the student folder named like the nbgrader
student id: the same sandboxed workers, that student's hidden cases drawn from the course's secret seed
(:mod:`utils.grading.course_secret`), partial credit per named part, ``public`` feedback (hidden cases:
how many pass and the diagnosis category only). It prints one JSON object on stdout::

    {"isolation": "...", "exercises": {"ch1.project_qkv": {"points": "1.5", "max_points": 2, "status":
     "failed", "feedback": "...", "parts": [{"part": "...", "points": "1", "max_points": "1",
     "status": "passed", "feedback": "..."}]}}}

Exit status 2, with the reason on stderr, when the secret, the notebook or an exercise cannot be used.

In nbgrader, the hook grades every submission of an autograde run at once, before any student's kernel
has run: :func:`batch_main`, which the hook's bootstrap calls (``python -I -c``) after it has checked the
course package's files against the digests the export recorded.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from utils.grading.course_secret import SecretError, read_secret

__all__ = ["JudgeError", "batch_main", "judge_submission", "main"]


class JudgeError(ValueError):
    """The submission cannot be judged; the message says why."""


def _student_folder(student: str) -> str:
    if (
        not student
        or student in (".", "..")
        or student.startswith(".")
        or "/" in student
        or "\\" in student
        or "\0" in student
        or len(student) > 255
    ):
        raise JudgeError(
            f"--student {student!r} cannot name a student folder (one path component, not starting with '.')"
        )
    return student


def _notebook_name(name: str) -> str:
    if not name.endswith(".ipynb") or name.startswith(".") or any(c in name for c in "/\\\0") or len(name) > 255:
        raise JudgeError(f"--name {name!r} must be a notebook's file name, e.g. 01_queries_keys_values.ipynb")
    return name


def read_stdin(limit: int | None = None) -> bytes:
    """The notebook's bytes from stdin, at most the grader's size limit."""
    from utils.grading.course import MAX_NOTEBOOK_BYTES

    limit = MAX_NOTEBOOK_BYTES if limit is None else limit
    data = sys.stdin.buffer.read(limit + 1)
    if len(data) > limit:
        raise JudgeError(f"the notebook on stdin is larger than {limit} bytes")
    return data


def _row(row) -> dict[str, Any]:
    from utils.exercises.definition import points_text

    return {
        "points": points_text(row.points),
        "max_points": row.max_points,
        "status": str(row.status),
        "feedback": row.feedback,
        "parts": [
            {
                "part": p.part,
                "points": points_text(p.points),
                "max_points": points_text(p.max_points),
                "status": str(p.status),
                "feedback": p.feedback,
            }
            for p in row.parts
        ],
    }


def _grade(notebooks: dict[str, dict[str, bytes]], seed: int, course_root: Path | None,
           times: dict[str, dict[str, int]] | None = None) -> dict[str, Any]:
    """Grade ``{student folder: {notebook file name: bytes}}`` in one run of the grader; return its summary.
    ``times``: ``{student folder: {file name: modification time, ns}}`` of the files handed in, so that of two
    copies of a chapter the newest is graded, as ``python -m utils.grade`` on those files grades it (W14)."""
    from utils.grading import batch

    with tempfile.TemporaryDirectory(prefix="nbgrader-judge-") as work:
        submissions = Path(work) / "submissions"
        for folder, files in notebooks.items():
            (submissions / folder).mkdir(parents=True)
            for name, data in files.items():
                (submissions / folder / name).write_bytes(data)
                mtime = (times or {}).get(folder, {}).get(name)
                if mtime is not None:
                    os.utime(submissions / folder / name, ns=(mtime, mtime))
        try:
            with contextlib.redirect_stdout(sys.stderr):  # stdout carries the JSON only
                summary = batch.grade(
                    submissions,
                    Path(work) / "out",
                    jobs=1 if len(notebooks) == 1 else None,
                    seed=seed,
                    course_root=course_root,
                    progress=False,
                    feedback="public",
                )
        except (batch.NoSubmissions, batch.NoExercises) as exc:
            raise JudgeError(str(exc)) from None
        shutil.rmtree(submissions, ignore_errors=True)
    return summary


def judge_submission(
    notebook: Path,
    student: str,
    seed: int,
    exercise_ids: list[str],
    course_root: Path | None = None,
    data: bytes | None = None,
) -> dict[str, Any]:
    """Grade ``notebook`` as student ``student`` with :func:`~utils.grading.batch.grade` and return the rows
    of ``exercise_ids`` (see the module docstring for the shape). With ``data``, those bytes are graded and
    ``notebook`` only names the file."""
    from utils.grading import files
    from utils.grading.course import MAX_NOTEBOOK_BYTES

    folder = _student_folder(student)
    if not exercise_ids:
        raise JudgeError("no --exercise given: name the exercises of this assignment")
    if data is None:
        try:
            data = files.read_regular(Path(notebook), MAX_NOTEBOOK_BYTES)
        except files.TooLarge as exc:
            raise JudgeError(f"{notebook} is too large ({exc.size} bytes)") from None
        except (files.Refused, OSError) as exc:
            raise JudgeError(f"cannot read the submission {notebook}: {exc}") from None
    summary = _grade({folder: {Path(notebook).name: data}}, seed, course_root)
    rows = {row.exercise: row for row in summary["rows"] if row.student == folder}
    unknown = [i for i in exercise_ids if i not in rows]
    if unknown:
        raise JudgeError(
            f"the course has no exercise {unknown[0]!r} (it grades {', '.join(rows) or 'none'}); "
            f"export the nbgrader course again from this version of the course"
        )
    return {"isolation": summary["isolation"], "exercises": {i: _row(rows[i]) for i in exercise_ids}}


def batch_main(payload: dict[str, Any], course_root: Path | None = None) -> int:
    """Grade the nbgrader hook's batch, every submission of an autograde run at once (see
    :mod:`utils.builder.nbgrader_hook`): ``payload`` is ``{"secret": PATH, "notebooks": [{"student": ID,
    "name": FILE.ipynb, "data": BASE64, "mtime_ns": ITS FILE TIME}, ...]}``. Print ``{"isolation": ...,
    "students": {ID: {"exercises": {EXERCISE: row as above}}}}``, or ``{"error": REASON}`` for a student who
    cannot be graded; exit status 2 when nothing can be (the secret)."""
    import base64

    from utils.grading.course import MAX_NOTEBOOK_BYTES

    try:
        seed = read_secret(Path(payload["secret"]))
    except SecretError as exc:
        print(f"nbgrader judge: {exc}", file=sys.stderr)
        return 2
    students: dict[str, dict[str, Any]] = {}
    notebooks: dict[str, dict[str, bytes]] = {}
    times: dict[str, dict[str, int]] = {}
    for entry in payload["notebooks"]:
        student = str(entry["student"])
        try:
            folder, name = _student_folder(student), _notebook_name(str(entry["name"]))
            data = base64.b64decode(entry["data"], validate=True)
            if len(data) > MAX_NOTEBOOK_BYTES:
                raise JudgeError(f"{name} is larger than {MAX_NOTEBOOK_BYTES} bytes")
        except (JudgeError, ValueError) as exc:
            students[student] = {"error": str(exc)}
            continue
        notebooks.setdefault(folder, {})[name] = data
        if isinstance(entry.get("mtime_ns"), int) and entry["mtime_ns"] >= 0:
            times.setdefault(folder, {})[name] = entry["mtime_ns"]
    isolation = ""
    if notebooks:
        try:
            summary = _grade(notebooks, seed, course_root, times)
        except JudgeError as exc:
            print(f"nbgrader judge: {exc}", file=sys.stderr)
            return 2
        isolation = summary["isolation"]
        for row in summary["rows"]:
            if row.student in notebooks:
                students.setdefault(row.student, {"exercises": {}})["exercises"][row.exercise] = _row(row)
        for item in summary.get("unplaced", []):  # a copy not graded: its test cells say so (W16)
            if item.student in notebooks and "exercises" in students.get(item.student, {}):
                students[item.student].setdefault("not_graded", []).append([Path(item.path).name, item.reason])
    print(json.dumps({"isolation": isolation, "students": students}, ensure_ascii=False))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m utils.grading.nbgrader_judge",
        description=(
            "Grade one nbgrader submission with the course's grader, outside the student's kernel; print JSON"
        ),
    )
    parser.add_argument(
        "notebook", type=Path, help="the submitted notebook (nbgrader's submitted/ copy), or - for stdin"
    )
    parser.add_argument("--name", default=None, help="with -: the notebook's file name")
    parser.add_argument("--student", required=True, help="the nbgrader student id")
    parser.add_argument("--secret", type=Path, required=True, help="the course's grading_secret.txt")
    parser.add_argument("--exercise", action="append", default=[], help="an exercise id to report (repeat)")
    parser.add_argument("--course", type=Path, default=None, help="as python -m utils.grade --course")
    args = parser.parse_args(argv)
    try:
        seed = read_secret(args.secret)  # first: a missing secret fails before anything is run
        if str(args.notebook) == "-":
            if args.name is None:
                raise JudgeError("--name is required when the notebook is read from stdin (-)")
            name, data = _notebook_name(args.name), read_stdin()
            result = judge_submission(Path(name), args.student, seed, args.exercise, args.course, data)
        else:
            if args.name is not None:
                raise JudgeError("--name is only for a notebook read from stdin (-)")
            result = judge_submission(args.notebook, args.student, seed, args.exercise, args.course)
    except (SecretError, JudgeError) as exc:
        print(f"nbgrader judge: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
