"""The course's judge inside ``nbgrader autograde``.

``python -m utils.build --nbgrader DIR`` copies this file to ``DIR/nbgrader_hook.py``, and
``DIR/nbgrader_config.py`` calls :func:`install`. It runs in nbgrader's own process (its environment needs
nothing but nbgrader; this file uses the standard library only), never in the student's kernel.

Why: nbgrader executes a submission in the student's kernel, where code from any cell may replace the
check function, rewrite later cells before they run (IPython's input transformers) or forge their
outputs. So the export's test cells decide nothing. :func:`install` adds two steps to autograding:

* before nbgrader starts the kernel, :meth:`CourseJudge.preflight` checks that the course's Python and
  the grading secret are there, so a missing secret stops autograde at once, with the reason, instead
  of grading anyone with a default; that the secret is the one the assignment was exported with (its
  fingerprint, recorded by the export in ``secret_fingerprints.json``), since another secret draws other
  hidden cases for students already graded; and it reads the submission's bytes (``submitted/...``), the copy
  handed in, before any of the student's code has run. The kernel runs as the instructor and can rewrite
  that file; it is the handed-in copy that is graded. A submission that another notebook's kernel changed
  after this autograde started (each file's digest is taken before the first kernel) is refused;
* after the kernel has run and is gone, :meth:`CourseJudge.__call__` replaces every output that shows the
  grading secret's value with a fixed notice (the kernel can read the secret), then runs the course's
  grader on the handed-in copy, sent on stdin to a fresh process of the course's Python
  (``python -I -m utils.grading.nbgrader_judge - --name NB.ipynb``: the sandboxed runner of
  ``python -m utils.grade``), and replaces each test cell's outputs with its verdict: the feedback, and
  the points as the cell's value, which nbgrader reads as partial credit. nbgrader's score is then the
  grader's, whatever the kernel did. When the file on disk changed while the notebook ran, nbgrader's log
  and each test cell say so, and the handed-in bytes are put back in ``submitted/``.

When the judge cannot run, the step raises: nbgrader reports that submission as failed and records no grade.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import stat
import subprocess
import sys
import tempfile

__all__ = [
    "CHANGED",
    "FINGERPRINTS_NAME",
    "SECRET_NOTICE",
    "TESTS_SUFFIX",
    "CourseJudge",
    "exercise_of",
    "fingerprint",
    "install",
]

CHANGED = "the notebook was changed while it ran; the copy handed in is graded"
"""Said in nbgrader's log and in each test cell when the kernel rewrote the submitted notebook."""
SECRET_NOTICE = "[the course's judge removed this output: it showed the course's grading secret]\n"
"""What replaces an output that shows the grading secret's value."""
MIN_SECRET_DIGITS = 6
"""A shorter seed is found in too many outputs to be removed (and is guessable anyway): it is not looked for."""
FINGERPRINTS_NAME = "secret_fingerprints.json"
"""In the course directory: assignment -> the :func:`fingerprint` of the secret it was exported with."""
_MAX_NOTEBOOK_BYTES = 20 * 2**20  # as the course's grader (utils.grading.course.MAX_NOTEBOOK_BYTES)

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


def _warn(message: str) -> None:
    """A warning in nbgrader's log (the running application's logger), or on stderr without one."""
    try:
        from traitlets.log import get_logger
    except ImportError:
        print(f"[course judge | WARNING] {message}", file=sys.stderr)
    else:
        get_logger().warning("course judge: %s", message)


def fingerprint(seed: int | str) -> str:
    """A name for the secret seed that does not reveal it (PBKDF2, so trying seeds against it is slow).

    >>> fingerprint(12345) == fingerprint("012345") != fingerprint(12346)
    True
    """
    digest = hashlib.pbkdf2_hmac("sha256", str(int(seed)).encode("ascii"), b"attention-step-by-step secret", 100_000)
    return digest.hex()[:16]


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_submission(path: str) -> bytes:
    """The bytes of the submitted notebook ``path`` (a regular file, at most the grader's size limit)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise RuntimeError(f"course judge: the submission {path} is not a regular file")
        data = handle.read(_MAX_NOTEBOOK_BYTES + 1)
    if len(data) > _MAX_NOTEBOOK_BYTES:
        raise RuntimeError(f"course judge: the submission {path} is larger than {_MAX_NOTEBOOK_BYTES} bytes")
    return data


def _shows(value, secret: str) -> bool:
    """Whether ``secret`` occurs in any string inside an output (its text, data, traceback, name, value)."""
    if isinstance(value, str):
        return secret in value
    if isinstance(value, dict):
        return any(_shows(v, secret) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_shows(v, secret) for v in value)
    return False


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
        self._handed_in: dict[str, bytes] = {}  # submitted path -> its bytes, read before its kernel started
        self._at_start: dict[str, str] | None = None  # every submitted notebook's digest, before any kernel
        self._fingerprint: str | None = None  # the secret's, computed once

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

    def secret_text(self) -> str:
        """The secret's value as written in its file (its one line that is not a comment)."""
        with open(self.secret, encoding="ascii", errors="replace") as handle:
            values = [line.strip() for line in handle.read(4097).splitlines()]
        values = [v for v in values if v and not v.startswith("#")]
        return values[0] if len(values) == 1 else ""

    def check_exported_with(self, assignment: str) -> None:
        """Raise ``RuntimeError`` when ``assignment`` was exported with another secret than the current one
        (both fingerprints named); nothing to check for an export that recorded none."""
        try:
            with open(os.path.join(self.course_dir, FINGERPRINTS_NAME), encoding="utf-8") as handle:
                recorded = json.load(handle).get(assignment)
        except FileNotFoundError:
            return
        except (OSError, ValueError, AttributeError) as exc:
            raise RuntimeError(f"course judge: cannot read {FINGERPRINTS_NAME} in {self.course_dir}: {exc}") from None
        text = self.secret_text()
        if recorded is None or not text.isdigit():  # a malformed secret: the judge refuses it with the reason
            return
        if self._fingerprint is None:
            self._fingerprint = fingerprint(text)
        if recorded != self._fingerprint:
            raise RuntimeError(
                f"course judge: {assignment} was exported with the grading secret whose fingerprint is "
                f"{recorded}, but {self.secret} has fingerprint {self._fingerprint}: its students would get "
                "other hidden cases than when it was exported, and nothing was graded. Put that secret back "
                f"in {self.secret}, or export {assignment} again with this one (`python -m utils.build "
                f"--nbgrader DIR --force`), generate it again and autograde all its students"
            )

    def _digests(self) -> dict[str, str]:
        """Each submitted notebook's digest (``submitted/<student>/<assignment>/<notebook>.ipynb``)."""
        found = {}
        for path in sorted(glob.glob(os.path.join(self.course_dir, "submitted", "*", "*", "*.ipynb"))):
            try:
                found[path] = _digest(_read_submission(path))
            except (OSError, RuntimeError):
                continue  # refused with its reason when its own turn comes
        return found

    def preflight(self, nb, resources):
        """Before the kernel starts: fail at once when the judge could not run; keep the handed-in bytes."""
        self.check_ready()
        self.check_exported_with(resources["nbgrader"]["assignment"])
        if self._at_start is None:  # the first notebook of this autograde: no kernel has run yet
            self._at_start = self._digests()
        path = self.submitted(resources)
        data = _read_submission(path)
        before = self._at_start.get(path)
        if before is not None and before != _digest(data):
            raise RuntimeError(
                f"course judge: {path} changed after this autograde started, before its own kernel ran "
                "(another student's notebook may have rewritten it); nothing was graded for it: check the "
                "file against the student's hand-in, then autograde this student again"
            )
        self._handed_in[path] = data
        return nb, resources

    def submitted(self, resources) -> str:
        info = resources["nbgrader"]
        path = os.path.join(
            self.course_dir, "submitted", info["student"], info["assignment"], f"{info['notebook']}.ipynb"
        )
        if not os.path.isfile(path):
            raise RuntimeError(f"course judge: expected the submission at {path} (nbgrader's default layout)")
        return path

    def judge(self, data: bytes, name: str, student: str, exercise_ids: list[str]) -> dict:
        """The course grader's verdicts on the notebook ``data`` (file name ``name``), sent on stdin (see
        :mod:`utils.grading.nbgrader_judge`); raises when it fails."""
        self.check_ready()
        command = [
            self.python,
            "-I",
            "-m",
            "utils.grading.nbgrader_judge",
            "-",
            "--name",
            name,
            "--student",
            student,
            "--secret",
            self.secret,
        ]
        for exercise_id in exercise_ids:
            command += ["--exercise", exercise_id]
        try:
            done = subprocess.run(
                command, cwd=self.course_dir, input=data, capture_output=True, timeout=self.timeout
            )
        except subprocess.TimeoutExpired:
            raise RuntimeError(
                f"course judge: grading {name} of {student} took more than {self.timeout:.0f} s"
            ) from None
        stderr = done.stderr.decode("utf-8", "replace")
        for line in stderr.splitlines()[-20:]:
            print(f"course judge: {line}", file=sys.stderr)
        if done.returncode != 0:
            raise RuntimeError(
                f"course judge: grading {name} of {student} failed (exit status {done.returncode}): "
                f"{stderr.strip()[-2000:]}"
            )
        return json.loads(done.stdout.decode("utf-8"))

    def scrub(self, nb, student: str, notebook: str) -> int:
        """Replace every output that shows the secret's value with :data:`SECRET_NOTICE`, saying in nbgrader's
        log which student and cell; return how many outputs were replaced."""
        from nbformat.v4 import new_output

        secret = self.secret_text()
        if len(secret) < MIN_SECRET_DIGITS:
            _warn(
                f"the grading secret has fewer than {MIN_SECRET_DIGITS} digits, so outputs that show it "
                "cannot be told apart and are not removed; export a course with a drawn seed"
            )
            return 0
        replaced = 0
        for index, cell in enumerate(nb.cells):
            outputs = cell.get("outputs", [])
            shown = [i for i, output in enumerate(outputs) if _shows(output, secret)]
            for i in shown:
                outputs[i] = new_output("stream", name="stdout", text=SECRET_NOTICE)
            if shown:
                replaced += len(shown)
                _warn(
                    f"{student} {notebook}.ipynb cell {index}: {len(shown)} output(s) showed the grading "
                    "secret and were removed; this student's code read the secret"
                )
        return replaced

    def _handed_in_copy(self, path: str, student: str) -> tuple[bytes, bool]:
        """The bytes read before the kernel started, and whether the file changed since (then they are put
        back, and nbgrader's log says so)."""
        data = self._handed_in.pop(path, None)
        if data is None:
            raise RuntimeError(
                f"course judge: {path} was not read before its kernel started; nbgrader_config.py must "
                "call install(), which runs the judge's preflight before nbgrader's Execute"
            )
        try:
            now = _read_submission(path)
        except (OSError, RuntimeError):
            now = None
        if now == data:
            return data, False
        _warn(f"{student}: {CHANGED} ({path}; the handed-in bytes are put back)")
        fd, temporary = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".handed-in-")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temporary, path)
        return data, True

    def __call__(self, nb, resources):
        """After the kernel: outputs that show the secret go; each test cell's outputs become the grader's
        verdict on the handed-in copy, and its points."""
        from nbformat.v4 import new_output

        self.check_ready()
        info = resources["nbgrader"]
        path = self.submitted(resources)
        data, changed = self._handed_in_copy(path, info["student"])
        self.scrub(nb, info["student"], info["notebook"])
        tests = _tests(nb)
        if not tests:
            return nb, resources
        verdicts = self.judge(data, os.path.basename(path), info["student"], sorted(set(tests.values())))
        for index, exercise_id in tests.items():
            cell, verdict = nb.cells[index], verdicts["exercises"][exercise_id]
            if float(verdict["max_points"]) != float(cell.metadata.nbgrader.get("points", -1)):
                raise RuntimeError(
                    f"course judge: {exercise_id} is worth {verdict['max_points']} points in the "
                    f"course but {cell.metadata.nbgrader.get('points')} in nbgrader's gradebook; "
                    f"export and generate the assignment again"
                )
            report = _report(exercise_id, verdict)
            cell.outputs = [
                new_output("stream", name="stdout", text=f"WARNING: {CHANGED}\n{report}" if changed else report),
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
