"""The course's judge inside ``nbgrader autograde``.

``python -m utils.build --nbgrader DIR`` copies this file to ``DIR/nbgrader_hook.py``, and
``DIR/nbgrader_config.py`` calls :func:`install`. It runs in nbgrader's own process (its environment needs
nothing but nbgrader; this file uses the standard library only), never in the student's kernel.

Why: nbgrader executes a submission in the student's kernel, where code from any cell may replace the
check function, rewrite later cells before they run (IPython's input transformers) or forge their
outputs. So the export's test cells decide nothing. :func:`install` adds two steps to autograding:

* before nbgrader starts the kernel, :meth:`CourseJudge.preflight` checks that the course's Python and
  the grading secret are there, so a missing secret stops autograde at once, with the reason, instead
  of grading anyone with a default;
* after the kernel has run and is gone, :meth:`CourseJudge.__call__` runs the course's grader on the
  submitted notebook, in a fresh process of the course's Python
  (``python -I -m utils.grading.nbgrader_judge``: the sandboxed runner of ``python -m utils.grade``), and
  replaces each test cell's outputs with its verdict: the feedback, and the points as the cell's value,
  which nbgrader reads as partial credit. nbgrader's score is then the grader's, whatever the kernel did.

When the judge cannot run, the step raises: nbgrader reports that submission as failed and records no grade.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

__all__ = ["TESTS_SUFFIX", "CourseJudge", "exercise_of", "install"]

TESTS_SUFFIX = "-tests"
"""The export names a test cell ``<exercise id with - for .>-tests``, e.g. ``ch1-project_qkv-tests``."""


def exercise_of(grade_id: str) -> str | None:
    """The exercise id of a test cell's ``grade_id``, or None for another cell.

    >>> exercise_of("ch1-project_qkv-tests"), exercise_of("cell-abc")
    ('ch1.project_qkv', None)
    """
    if not grade_id.endswith(TESTS_SUFFIX) or not grade_id.startswith("ch") or "-" not in grade_id:
        return None
    chapter, _, name = grade_id[: -len(TESTS_SUFFIX)].partition("-")
    return f"{chapter}.{name}" if chapter[2:].isdigit() and name.isidentifier() else None


def _tests(nb) -> dict[int, str]:
    """Cell index -> exercise id, for the notebook's graded test cells."""
    found = {}
    for index, cell in enumerate(nb.cells):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.get("cell_type") == "code" and meta.get("grade") and not meta.get("solution"):
            exercise_id = exercise_of(str(meta.get("grade_id", "")))
            if exercise_id is not None:
                found[index] = exercise_id
    return found


def _report(exercise_id: str, verdict: dict) -> str:
    lines = [
        f"{exercise_id}: {verdict['points']} of {verdict['max_points']} points ({verdict['status']}), "
        "graded by the course's grader outside this notebook's kernel"
    ]
    parts = verdict.get("parts", [])
    if len(parts) > 1:
        lines += [f"- {p['part']}: {p['points']} of {p['max_points']}: {p['feedback']}" for p in parts]
    else:
        lines.append(verdict["feedback"])
    return "\n".join(lines) + "\n"


class CourseJudge:
    """Two autograde steps (see the module docstring).

    Args:
        python: a Python in which the course package is installed (``make lab``'s ``.venv/bin/python``).
        course_dir: the nbgrader course directory; submissions are read from
            ``course_dir/submitted/<student>/<assignment>/<notebook>.ipynb`` (nbgrader's default layout).
        secret: the grading secret's path (``grading_secret.txt``), relative to ``course_dir`` or absolute.
        timeout: seconds the judge may take for one notebook before autograde fails it.
    """

    def __init__(self, python: str, course_dir: str, secret: str, timeout: float = 3600.0) -> None:
        self.python = str(python)
        self.course_dir = os.path.abspath(course_dir)
        self.secret = os.path.join(self.course_dir, secret)
        self.timeout = float(timeout)

    def check_ready(self) -> None:
        """Raise ``RuntimeError`` naming what is missing: the course's Python or the grading secret."""
        if not (os.path.isfile(self.python) and os.access(self.python, os.X_OK)):
            raise RuntimeError(
                f"course judge: the course's Python {self.python} is missing; set COURSE_PYTHON in "
                f"{self.course_dir}/nbgrader_config.py to a Python with the course installed"
            )
        if not os.path.isfile(self.secret):
            raise RuntimeError(
                f"course judge: the course's grading secret {self.secret} is missing, so no "
                "hidden case can be drawn and nothing was graded; restore your copy of it, or "
                "export again with `python -m utils.build --nbgrader DIR --seed SEED`"
            )

    def preflight(self, nb, resources):
        """Before the kernel starts: fail at once when the judge could not run."""
        self.check_ready()
        return nb, resources

    def submitted(self, resources) -> str:
        info = resources["nbgrader"]
        path = os.path.join(
            self.course_dir, "submitted", info["student"], info["assignment"], f"{info['notebook']}.ipynb"
        )
        if not os.path.isfile(path):
            raise RuntimeError(f"course judge: expected the submission at {path} (nbgrader's default layout)")
        return path

    def judge(self, notebook: str, student: str, exercise_ids: list[str]) -> dict:
        """The course grader's verdicts (see :mod:`utils.grading.nbgrader_judge`); raises when it fails."""
        self.check_ready()
        command = [
            self.python,
            "-I",
            "-m",
            "utils.grading.nbgrader_judge",
            notebook,
            "--student",
            student,
            "--secret",
            self.secret,
        ]
        for exercise_id in exercise_ids:
            command += ["--exercise", exercise_id]
        try:
            done = subprocess.run(
                command,
                cwd=self.course_dir,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=self.timeout,
            )
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"course judge: grading {notebook} took more than {self.timeout:.0f} s") from None
        for line in done.stderr.splitlines()[-20:]:
            print(f"course judge: {line}", file=sys.stderr)
        if done.returncode != 0:
            raise RuntimeError(
                f"course judge: grading {notebook} failed (exit status {done.returncode}): "
                f"{done.stderr.strip()[-2000:]}"
            )
        return json.loads(done.stdout)

    def __call__(self, nb, resources):
        """After the kernel: each test cell's outputs become the grader's verdict and its points."""
        from nbformat.v4 import new_output

        tests = _tests(nb)
        if not tests:
            return nb, resources
        self.check_ready()
        verdicts = self.judge(self.submitted(resources), resources["nbgrader"]["student"], sorted(set(tests.values())))[
            "exercises"
        ]
        for index, exercise_id in tests.items():
            cell, verdict = nb.cells[index], verdicts[exercise_id]
            if float(verdict["max_points"]) != float(cell.metadata.nbgrader.get("points", -1)):
                raise RuntimeError(
                    f"course judge: {exercise_id} is worth {verdict['max_points']} points in the "
                    f"course but {cell.metadata.nbgrader.get('points')} in nbgrader's gradebook; "
                    f"export and generate the assignment again"
                )
            cell.outputs = [
                new_output("stream", name="stdout", text=_report(exercise_id, verdict)),
                new_output(
                    "execute_result",
                    data={"text/plain": verdict["points"]},
                    execution_count=cell.get("execution_count"),
                ),
            ]
        return nb, resources


def install(c, *, python: str, course_dir: str, secret: str, timeout: float = 3600.0) -> CourseJudge:
    """Add the judge's two steps to nbgrader's ``Autograde.autograde_preprocessors`` in config ``c``."""
    from nbgrader.converters import Autograde
    from nbgrader.preprocessors import Execute, SaveAutoGrades

    judge = CourseJudge(python, course_dir, secret, timeout)
    steps = list(Autograde.class_traits()["autograde_preprocessors"].default())
    steps.insert(steps.index(SaveAutoGrades), judge)
    steps.insert(steps.index(Execute), judge.preflight)
    c.Autograde.autograde_preprocessors = steps
    return judge
