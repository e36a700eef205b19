"""The course's judge inside ``nbgrader autograde``.

``python -m utils.build --nbgrader DIR`` copies this file to ``DIR/nbgrader_hook.py``; ``DIR/nbgrader_config.py``
calls :func:`install`. It runs in nbgrader's process (standard library only). Why: nbgrader would run a
submission in a kernel, as the instructor: its code could patch the check, forge outputs, rewrite any file,
edit ``gradebook.db``, or leave the secret for ``generate_feedback`` to hand back (W11). So :func:`install`
takes ``Execute`` out of autograde: **no submission's code runs outside the course's sandbox**. The judge:

* :meth:`CourseJudge.drop_copies`, before nbgrader's sanitizing: a copy of a locked cell (its ``grade_id``) goes,
  nbgrader metadata the assignment does not have is dropped;
* :meth:`CourseJudge.preflight`, in ``Execute``'s place: the first one checks the course's Python, the secret
  (the one the assignment was exported with: ``secret_fingerprints.json``) and grades every notebook this
  autograde converts at once, in one fresh process of the course's Python (``python -I -c`` :data:`BOOTSTRAP`:
  the sandboxed runner of ``python -m utils.grade``, from sources checked against ``judge_code.json``);
* :meth:`CourseJudge.__call__`, before ``SaveAutoGrades``: each test cell (put back from ``source/`` if
  missing) gets the stored verdict as its output and its points as its value; other outputs go; a file
  changed since it was read gets its handed-in bytes back, and a warning.

When the judge cannot run, the step raises: nbgrader fails that submission and records no grade for it.
"""

from __future__ import annotations

import base64
import copy
import fnmatch
import glob
import hashlib
import json
import os
import stat
import subprocess
import sys
import tempfile

__all__ = ["BOOTSTRAP", "CHANGED", "FINGERPRINTS_NAME", "JUDGE_CODE_NAME", "TESTS_SUFFIX", "CourseJudge", "exercise_of",
           "fingerprint", "install"]

CHANGED = "the submitted notebook was changed while autograde ran; the copy handed in is graded"
"""Said in nbgrader's log and in each test cell when a submission's file changed while autograde ran."""
MIN_SECRET_DIGITS = 6
"""A shorter seed is found in too many outputs to be named (and is guessable anyway): it is not looked for."""
FINGERPRINTS_NAME = "secret_fingerprints.json"
"""In the course directory: assignment -> the :func:`fingerprint` of the secret it was exported with."""
JUDGE_CODE_NAME = "judge_code.json"
"""In the course directory (0600): the course package's folder and each of its files' digests at export."""
BOOTSTRAP = r"""import hashlib, importlib.util, json, os, sys
import _frozen_importlib_external as external
spec = importlib.util.find_spec("utils")
if spec is None or not spec.submodule_search_locations:
    sys.exit("course judge: this Python has no course package (utils)")
root = os.path.realpath(list(spec.submodule_search_locations)[0])
files = {}
for folder, subfolders, names in os.walk(root):
    subfolders[:] = [d for d in subfolders if d != "__pycache__"]
    for path in [os.path.join(folder, n) for n in names if not n.endswith((".pyc", ".pyo"))]:
        with open(path, "rb") as handle:
            files[os.path.relpath(path, root)] = hashlib.sha256(handle.read()).hexdigest()
if sys.argv[1:] == ["digest"]:
    print(json.dumps({"package": root, "files": files}))
    sys.exit(0)
payload = json.loads(sys.stdin.buffer.read())
expected = payload.pop("code")
changed = sorted(n for n in set(files) | set(expected["files"]) if files.get(n) != expected["files"].get(n))
if changed or root != expected["package"]:
    print(json.dumps({"package": root, "changed": changed}))
    sys.exit(3)
cached = external.cache_from_source
def from_source_only(path, *args, **kwargs):
    if os.path.realpath(path).startswith(root + os.sep):
        raise NotImplementedError("the course's code is compiled from the sources just checked")
    return cached(path, *args, **kwargs)
external.cache_from_source = from_source_only
from utils.grading.nbgrader_judge import batch_main
sys.exit(batch_main(payload))
"""
"""``python -I -c BOOTSTRAP digest``: the course package's digests as that Python imports it; with the batch
on stdin: exit 3 naming the files that differ from the export's, else grade it, compiled from those sources."""
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
    found = {}  # cell index -> exercise id, for the notebook's graded test cells
    for index, cell in enumerate(nb.cells):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.get("cell_type") == "code" and meta.get("grade") and not meta.get("solution"):
            exercise_id = exercise_of(str(meta.get("grade_id", "")))
            if exercise_id is not None:
                found[index] = exercise_id
    return found


def _warn(message: str, level: str = "warning") -> None:
    """A line in nbgrader's log (the running application's logger), or on stderr without one."""
    try:
        from traitlets.log import get_logger
    except ImportError:
        print(f"[course judge | {level.upper()}] {message}", file=sys.stderr)
    else:
        getattr(get_logger(), level)("course judge: %s", message)


def fingerprint(seed: int | str) -> str:
    """A name for the secret seed that does not reveal it (PBKDF2, so trying seeds against it is slow).

    >>> fingerprint(12345) == fingerprint("012345") != fingerprint(12346)
    True
    """
    digest = hashlib.pbkdf2_hmac("sha256", str(int(seed)).encode("ascii"), b"attention-step-by-step secret", 100_000)
    return digest.hex()[:16]


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
    if isinstance(value, (dict, list, tuple)):
        return any(_shows(v, secret) for v in (value.values() if isinstance(value, dict) else value))
    return isinstance(value, str) and secret in value


def _report(exercise_id: str, verdict: dict) -> str:
    lines = [f"{exercise_id}: {verdict['points']} of {verdict['max_points']} points ({verdict['status']}), "
             "graded by the course's grader in its sandbox (nbgrader ran none of this notebook's code)"]
    parts = verdict.get("parts", [])
    lines += [f"- {p['part']}: {p['points']} of {p['max_points']}: {p['feedback']}" for p in parts] \
        if len(parts) > 1 else [verdict["feedback"]]
    return "\n".join(lines) + "\n"


def _patterns(assignment: str) -> tuple[str, str]:
    """The students and assignments this autograde converts (nbgrader's ``--student``, its assignment)."""
    try:
        from traitlets.config import Application
    except ImportError:
        return "*", assignment
    coursedir = getattr(Application.instance(), "coursedir", None) if Application.initialized() else None
    student = getattr(coursedir, "student_id", "") or "*"
    pattern = getattr(coursedir, "assignment_id", "") or assignment
    return (student, pattern) if fnmatch.fnmatchcase(assignment, pattern) else (student, assignment)


class CourseJudge:
    """Two autograde steps (see the module docstring). ``python``: a Python with the course package installed;
    ``course_dir``: nbgrader's course directory (its default layout, ``submitted/<student>/<assignment>/``);
    ``secret``: ``grading_secret.txt``'s path, relative to it or absolute; ``timeout``: seconds per notebook."""

    def __init__(self, python: str, course_dir: str, secret: str, timeout: float = 3600.0) -> None:
        self.python, self.course_dir, self.timeout = str(python), os.path.abspath(course_dir), float(timeout)
        self.secret = os.path.join(self.course_dir, secret)
        self._handed_in: dict[str, bytes] = {}  # submitted path -> its bytes, read by the first preflight
        self._verdicts: dict[str, dict] | None = None  # submitted path -> the verdict on those bytes
        self._batch_error: str | None = None  # why the batch could not be graded
        self._fingerprint: str | None = None  # the secret's, computed once

    def check_ready(self) -> None:
        """Raise ``RuntimeError`` naming what is missing: the course's Python or the grading secret."""
        if not (os.path.isfile(self.python) and os.access(self.python, os.X_OK)):
            raise RuntimeError(f"course judge: the course's Python {self.python} is missing; set COURSE_PYTHON in "
                               f"{self.course_dir}/nbgrader_config.py to a Python with the course installed")
        if not os.path.isfile(self.secret):
            raise RuntimeError(f"course judge: the course's grading secret {self.secret} is missing, so no hidden case "
                               "can be drawn and nothing was graded; restore your copy of it, or export again with "
                               "`python -m utils.build --nbgrader DIR --seed SEED`")

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
            raise RuntimeError(f"course judge: {assignment} was exported with the grading secret whose fingerprint is "
                               f"{recorded}, but {self.secret} has fingerprint {self._fingerprint}: its students would "
                               "get other hidden cases than when it was exported, and nothing was graded. Put that "
                               f"secret back in {self.secret}, or export {assignment} again with this one (`python -m "
                               "utils.build --nbgrader DIR --force`), generate it again and autograde all its students")

    def _judge_all(self, assignment: str) -> None:
        """Read every submission this autograde converts and grade them all in one process of the course's
        Python (before any kernel has run); keep the bytes and the verdicts."""
        students, assignments = _patterns(assignment)
        pattern = os.path.join(glob.escape(self.course_dir), "submitted", students, assignments, "*.ipynb")
        notebooks, paths = [], {}
        for path in sorted(glob.glob(pattern)):
            student = path.split(os.sep)[-3]
            try:
                data = _read_submission(path)
            except (OSError, RuntimeError) as exc:
                self._verdicts[path] = {"error": str(exc)}
                continue
            self._handed_in[path], paths[path] = data, student
            notebooks.append({"student": student, "name": os.path.basename(path), "data": base64.b64encode(data).decode(
                "ascii"), "mtime_ns": os.stat(path, follow_symlinks=False).st_mtime_ns})  # which copy is newest
        try:
            with open(os.path.join(self.course_dir, JUDGE_CODE_NAME), encoding="utf-8") as handle:
                code = json.load(handle)
        except (OSError, ValueError) as exc:
            raise RuntimeError(f"course judge: cannot read {JUDGE_CODE_NAME} in {self.course_dir} ({exc}), the digests "
                               "of the judge's code recorded at export; nothing was graded. Export again (python -m "
                               "utils.build --nbgrader)") from None
        payload = json.dumps({"code": code, "secret": self.secret, "notebooks": notebooks}).encode("utf-8")
        try:
            done = subprocess.run(
                [self.python, "-I", "-c", BOOTSTRAP], cwd=self.course_dir, input=payload, capture_output=True,
                timeout=self.timeout * max(1, len(notebooks)),
            )
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"course judge: grading {len(notebooks)} notebook(s) took too long") from None
        stderr = done.stderr.decode("utf-8", "replace")
        print("".join(f"course judge: {line}\n" for line in stderr.splitlines()[-20:]), end="", file=sys.stderr)
        if done.returncode == 3:
            found = json.loads(done.stdout)
            moved = "" if found["package"] == code["package"] else f"; the package is now {found['package']}"
            raise RuntimeError(f"course judge: the course's judge code differs from what the export recorded in "
                               f"{JUDGE_CODE_NAME}: {', '.join(found['changed'][:20]) or 'none'} (in {code['package']}"
                               f"{moved}); something that ran as you may have rewritten it, and nothing was graded. "
                               "Compare those files with the course's repository (git status, git diff), restore them "
                               "and autograde again; if you changed them, export again (`python -m utils.build "
                               "--nbgrader DIR`)")
        if done.returncode != 0:
            raise RuntimeError(f"course judge: grading failed (exit status {done.returncode}): {stderr[-2000:]}")
        result = json.loads(done.stdout.decode("utf-8"))["students"]
        for path, student in paths.items():
            self._verdicts[path] = result.get(student, {"error": f"the judge returned nothing for {student}"})

    def preflight(self, nb, resources):
        """In place of nbgrader's Execute: fail at once when the judge cannot run; the first time, grade everything."""
        self.check_ready()
        info = resources["nbgrader"]
        self.check_exported_with(info["assignment"])
        if self._verdicts is None:  # the first notebook of this autograde
            self._verdicts = {}
            try:
                self._judge_all(info["assignment"])
            except RuntimeError as exc:
                self._batch_error = str(exc)
        if self._batch_error is not None:
            raise RuntimeError(self._batch_error)
        path = self.submitted(resources)
        verdict = self._verdicts.get(path)
        if verdict is None:
            raise RuntimeError(f"course judge: {path} was not in submitted/ when this autograde began (something wrote "
                               "it meanwhile); nothing was graded for it: check it, then autograde this student again")
        if "error" in verdict:
            raise RuntimeError(f"course judge: {path} cannot be graded: {verdict['error']}")
        return nb, resources

    def submitted(self, resources) -> str:
        info = resources["nbgrader"]  # nbgrader's default layout
        path = os.path.join(
            self.course_dir, "submitted", info["student"], info["assignment"], f"{info['notebook']}.ipynb"
        )
        if not os.path.isfile(path) and path not in self._handed_in:
            raise RuntimeError(f"course judge: expected the submission at {path} (nbgrader's default layout)")
        return path

    def strip(self, nb, student: str, notebook: str) -> int:
        """Remove the outputs of every code cell that is not a test cell (nbgrader's ClearOutput did already);
        log how many had some, and each that showed the grading secret. Return how many were removed."""
        secret, tests, stripped = self.secret_text(), _tests(nb), 0
        for index, cell in enumerate(nb.cells):
            if cell.get("cell_type") != "code" or index in tests or not cell.get("outputs"):
                continue
            shown = sum(len(secret) >= MIN_SECRET_DIGITS and _shows(output, secret) for output in cell.outputs)
            if shown:
                _warn(f"{student} {notebook}.ipynb cell {index}: {shown} output(s) showed the grading secret")
            cell.outputs, stripped = [], stripped + 1
        _warn(
            f"{student} {notebook}.ipynb: the outputs of {stripped} code cell(s) that are not test cells were "
            "removed (the feedback shows the test cells' verdicts only)",
            "info",
        )
        return stripped

    def _handed_in_copy(self, path: str, student: str) -> tuple[bytes, bool]:
        """The bytes the preflight read, and whether the file changed since (then they are put back, logged)."""
        data = self._handed_in.get(path)
        if data is None:
            raise RuntimeError(f"course judge: {path} was not read by the judge's preflight; nbgrader_config.py must "
                               "call install(), which puts the preflight in the place of nbgrader's Execute")
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

    def drop_copies(self, nb, resources):
        """Before nbgrader's sanitizing, drop a later copy of a locked cell (nbgrader stopped the whole run, W14) and
        nbgrader metadata the assignment does not have (nbgrader recorded 0 for the notebook, W28)."""
        info, seen, kept = resources["nbgrader"], set(), []
        known = {c.get("metadata", {}).get("nbgrader", {}).get("grade_id"): c.get("cell_type")
                 for c in self._source(info).cells}  # grade_id -> its cell's type (R26: a markdown cell's copy)
        for cell in nb.cells:
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
            if grade_id in seen:
                _warn(f"{info['student']}: a copy of the locked cell {grade_id} was removed")
                continue
            if "nbgrader" in cell.get("metadata", {}) and (grade_id is None or known.get(grade_id) != cell.get(
                    "cell_type")):
                _warn(f"{info['student']}: nbgrader metadata not the assignment's ({grade_id or 'no grade_id'}) gone")
                del cell["metadata"]["nbgrader"]
            seen |= {grade_id} - {None} if "nbgrader" in cell.get("metadata", {}) else set()
            kept.append(cell)
        nb.cells = kept
        return nb, resources

    def _source(self, info):
        import nbformat  # nbgrader's own dependency
        return nbformat.read(os.path.join(self.course_dir, "source", info["assignment"], f"{info['notebook']}.ipynb"),
                             as_version=4)

    def restore_tests(self, nb, info) -> None:
        """Put back from ``source/``, after its exercise's cell, each test cell the notebook lacks (deleted, or not
        the released notebook: chapters/, Colab): else nbgrader records no points for what the judge graded (W12)."""
        have, source = set(_tests(nb).values()), self._source(info)
        for index, exercise_id in sorted((i, e) for i, e in _tests(source).items() if e not in have):
            at = [i for i, c in enumerate(nb.cells)
                  if c.get("metadata", {}).get("course", {}).get("exercise") == exercise_id]
            cell = copy.deepcopy(source.cells[index])
            cell.pop("id", None)  # a notebook before format 4.5 has no ids; a newer one gets a fresh one
            if (nb.get("nbformat"), nb.get("nbformat_minor", 0)) >= (4, 5):
                cell["id"] = f"{exercise_id.replace('.', '-')}-restored"
            nb.cells.insert(at[-1] + 1 if at else len(nb.cells), cell)
            _warn(f"{info['student']} {info['notebook']}.ipynb had no test cell for {exercise_id} (deleted, or not "
                  "the released notebook): the source's was put back, with the judge's verdict")

    def __call__(self, nb, resources):
        """Each test cell's outputs become the stored verdict on the handed-in copy, and its points; every other
        code cell's outputs go."""
        from nbformat.v4 import new_output

        self.check_ready()
        info = resources["nbgrader"]
        path = self.submitted(resources)
        _, changed = self._handed_in_copy(path, info["student"])
        exercises = self._verdicts[path]["exercises"]
        self.strip(nb, info["student"], info["notebook"])
        self.restore_tests(nb, info)
        for index, exercise_id in _tests(nb).items():
            cell, verdict = nb.cells[index], exercises.get(exercise_id)
            if verdict is None:
                raise RuntimeError(f"course judge: the course has no exercise {exercise_id!r} (it grades "
                                   f"{', '.join(exercises) or 'none'} here); export the nbgrader course again")
            if float(verdict["max_points"]) != float(cell.metadata.nbgrader.get("points", -1)):
                raise RuntimeError(f"course judge: {exercise_id} is worth {verdict['max_points']} points in the course "
                                   f"but {cell.metadata.nbgrader.get('points')} in nbgrader's gradebook; export and "
                                   "generate the assignment again")
            report = "".join(f"NOTE: {why}\n" for name, why in self._verdicts[path].get("not_graded", [])
                             if name == os.path.basename(path) and exercise_id in why) + _report(exercise_id, verdict)
            cell.outputs = [
                new_output("stream", name="stdout", text=f"WARNING: {CHANGED}\n{report}" if changed else report),
                new_output("execute_result", data={"text/plain": verdict["points"]}, execution_count=cell.get(
                    "execution_count")),
            ]
        return nb, resources


def install(c, *, python: str, course_dir: str, secret: str, timeout: float = 3600.0) -> CourseJudge:
    """Set nbgrader's autograde steps in config ``c``: the judge's preflight in ``Execute``'s place (no kernel runs
    a submission), its verdicts before ``SaveAutoGrades``, and ``drop_copies`` before sanitizing."""
    from nbgrader.converters import Autograde
    from nbgrader.preprocessors import Execute, SaveAutoGrades

    judge = CourseJudge(python, course_dir, secret, timeout)
    traits = Autograde.class_traits()
    steps = list(traits["autograde_preprocessors"].default())
    steps[steps.index(Execute)] = judge.preflight
    steps.insert(steps.index(SaveAutoGrades), judge)
    c.Autograde.autograde_preprocessors, c.Autograde.sanitize_preprocessors = steps, [
        judge.drop_copies, *traits["sanitize_preprocessors"].default()]
    return judge
