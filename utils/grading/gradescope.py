"""Gradescope, the grading side: ``run_autograder`` runs ``python -m utils.grading.gradescope --root ROOT``,
which grades one submission with the course grader and writes ``results.json``.

The autograder zip itself (``setup.sh``, ``run_autograder``, ``gradescope.json`` and ``course/``) is written
by :mod:`utils.builder.gradescope_bundle` (``python -m utils.grade gradescope-bundle OUT.zip``).
:func:`run_gradescope` grades the notebooks in ``$AUTOGRADER_ROOT/submission`` (the same sandbox, cases and
judging as ``python -m utils.grade``: :func:`utils.grading.batch.grade`) with the settings of the bundle's
``gradescope.json`` (:data:`CONFIG_FILE`) and writes ``$AUTOGRADER_ROOT/results/results.json``, shaped by
:mod:`utils.grading.gradescope_results` (what students see, and when). ``AUTOGRADER_ROOT`` defaults to
``/autograder``; the tests set it to a temporary folder laid out like Gradescope's.

**Trust.** This process is the trusted parent: Gradescope runs it as root. Before any of the student's code
runs it reads ``submission_metadata.json`` (the user ids that seed the student's hidden cases), then makes it
and ``source/`` (the seed in ``gradescope.json``, the course's reference code) readable by root only, and the
results folder writable by root only (:func:`lock_down`). The student's code runs in the grader's sandbox,
which must switch it to an unprivileged uid of its own (``setpriv``; :mod:`utils.grading.isolation`): that
uid can read neither the seed, nor the metadata (where Gradescope lists earlier submissions and their
results), nor the reference code, and cannot write ``results.json``. When the sandbox's level is weak on
this machine, grading is refused with a reason for the instructor (:class:`WeakIsolationRefused`), unless the bundle (or
``--allow-weak-isolation``) accepts it. After grading, every process of the sandbox's uids is killed
(:func:`end_student_processes`), and only then is ``results.json`` written, atomically. The level reached
is in every ``results.json``, in a test only instructors see.

**Time.** Grading one submission has a wall-clock budget (``budget`` in ``gradescope.json``, default
:data:`DEFAULT_BUDGET`; the bundle's ``--budget``). Once spent, no exercise starts, one still running is
stopped, every exercise left is a ``timeout`` row that says why, and ``results.json`` is written all the
same, with a note students read at once. Each run's wall-clock backstop is :func:`gradescope_wall`.

The cases depend on the seed, the exercise and the student, whom Gradescope names in
``submission_metadata.json`` (their user ids).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from utils.exercises.common import Status
from utils.exercises.definition import points_text
from utils.grading import sandbox
from utils.grading.batch import grade
from utils.grading.course import chapters_text
from utils.grading.gradescope_processes import SANDBOX_UIDS as SANDBOX_UIDS  # re-exported
from utils.grading.gradescope_processes import become_subreaper, end_student_processes
from utils.grading.gradescope_processes import student_processes as student_processes  # re-exported
from utils.grading.gradescope_results import (
    GRADESCOPE_VISIBILITIES,
    HIDDEN_VISIBILITIES,
    check_visibility,
    gradescope_results,
    gradescope_test,
    instructor_test,
)
from utils.grading.report import console
from utils.i18n.messages import normalize_language, tr, using_language

__all__ = [
    "CONFIG_FILE",
    "GRADESCOPE_VISIBILITIES",
    "HIDDEN_VISIBILITIES",
    "DEFAULT_BUDGET",
    "WeakIsolationRefused",
    "check_budget",
    "check_visibility",
    "end_student_processes",
    "gradescope_results",
    "gradescope_test",
    "lock_down",
    "run_gradescope",
]

CONFIG_FILE = "gradescope.json"
"""The grading settings in the bundle (seed, timeout, budget, memory, hidden visibility, language, chapters)."""
ISOLATION_TEST = "grader isolation (instructors only)"
DEFAULT_BUDGET = 420.0
"""Wall-clock seconds to grade one submission (``budget`` in ``gradescope.json``): an honest submission of all
seven chapters takes far less, and a submission that waits in every exercise still gets a ``results.json``
within Gradescope's default limit of 10 minutes, with three minutes left for starting and writing it."""
GRADESCOPE_WALL_FACTOR = 2.0
"""On Gradescope one submission has the machine to itself: a run's wall-clock backstop is this many times the
CPU-time limit, at least :data:`GRADESCOPE_WALL_MARGIN` seconds more than it (:func:`gradescope_wall`) ..."""
GRADESCOPE_WALL_MARGIN = 30.0
"""... (the local grader's, shared by a class, is :func:`utils.grading.unit.wall_limit`)."""


def gradescope_wall(timeout: float) -> float:
    """The wall-clock seconds one run of one exercise may take on Gradescope, for a CPU-time limit ``timeout``."""
    return max(GRADESCOPE_WALL_FACTOR * timeout, timeout + GRADESCOPE_WALL_MARGIN)


def check_budget(value: Any) -> float | None:
    """``value`` as the budget in seconds (a positive, finite number; None: no budget), else ``ValueError``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise ValueError(f"budget must be a positive number of seconds (or null in {CONFIG_FILE}: no budget), "
                         f"got {value!r}")
    return float(value)


class WeakIsolationRefused(RuntimeError):
    """Grading was refused: the sandbox cannot run the student's code as an unprivileged uid here."""


# --------------------------------------------------------------------------------------------------
# Before and after the student's code
# --------------------------------------------------------------------------------------------------


def lock_down(root: Path) -> dict[str, Any]:
    """Read ``submission_metadata.json`` ({} when unreadable), then make it, ``source/`` (the bundle: the
    seed in ``gradescope.json``, the course's reference code; the sandboxed worker needs none of it, it runs
    from the grader's worker kit) and ``gradescope.json`` root's alone (0600, 0700) and the results folder
    root's (0755): the sandbox's uid can read none of them and write no result. Not as root: only the modes
    of what this user owns change."""
    metadata_file, source, config_file, results = (
        root / "submission_metadata.json",
        root / "source",
        root / "source" / CONFIG_FILE,
        root / "results",
    )
    try:
        metadata = json.loads(metadata_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        metadata = {}
    results.mkdir(parents=True, exist_ok=True)
    for path, mode in ((metadata_file, 0o600), (source, 0o700), (config_file, 0o600), (results, 0o755)):
        if path.is_symlink() or not path.exists():
            continue
        if os.geteuid() == 0:
            os.chown(path, 0, 0)
        if path.stat().st_uid == os.geteuid():
            os.chmod(path, mode)
    return metadata if isinstance(metadata, dict) else {}


def checked_isolation(allow_weak: bool) -> tuple[Any, str]:
    """The sandbox's isolation here and one line for the instructor. :class:`WeakIsolationRefused` when the level
    is weak (:meth:`~utils.grading.isolation.Isolation.weaknesses`: on Gradescope, where the runner is root, any
    level without an unprivileged uid of its own), unless ``allow_weak``."""
    sandbox.allow_weak_isolation(allow_weak)
    try:
        iso = sandbox.isolation()
        if iso.weaknesses() and not allow_weak:  # the grader refuses these itself; this runner does too
            raise sandbox.WeakIsolation(f"the sandbox's level is {iso.level}: {'; '.join(iso.weaknesses())}.")
    except sandbox.WeakIsolation as exc:
        raise WeakIsolationRefused(
            f"refused to grade. The student's code would be able to read the seed in source/{CONFIG_FILE} and "
            f"submission_metadata.json (earlier submissions' results) and to rewrite results.json. "
            f"{str(exc).removeprefix('grader: ')} On Gradescope: rebuild the bundle with gradescope-bundle "
            f"--allow-weak-isolation, or pass --allow-weak-isolation to run_autograder."
        ) from exc
    line = f"isolation level {iso.level}: {iso.describe()}"
    weak = iso.weaknesses()
    return iso, f"{line}. WEAK, accepted by --allow-weak-isolation: {'; '.join(weak)}" if weak else line


def write_results(results_dir: Path, data: dict[str, Any]) -> Path:
    """Write ``results.json`` atomically (a new file renamed over whatever is there, a link included)."""
    results_dir.mkdir(parents=True, exist_ok=True)
    target = results_dir / "results.json"
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    fd, temporary = tempfile.mkstemp(prefix=".results-", suffix=".json", dir=results_dir)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
        os.chmod(temporary, 0o644)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


# --------------------------------------------------------------------------------------------------
# run_autograder
# --------------------------------------------------------------------------------------------------


def _student_name(metadata: Mapping[str, Any]) -> str:
    """A folder name from the user ids in ``submission_metadata.json`` (the cases depend on it)."""
    users = metadata.get("users") if isinstance(metadata, Mapping) else None
    ids = (
        sorted(str(user["id"]) for user in users or () if isinstance(user, Mapping) and "id" in user)
        if isinstance(users, list)
        else []
    )
    name = "-".join(re.sub(r"[^A-Za-z0-9_.-]", "_", i) for i in ids)[:100]
    return f"user-{name}" if name else "submission"


def _gather(submission: Path, folder: Path) -> list[str]:
    """Copy every notebook and zip under ``submission`` into ``folder``, at the same path below it (so that
    what the student reads names their own ``folder/02_x.ipynb``), each with its modification time (of two
    copies of a chapter, the newer is graded); return what was not taken, with why."""
    folder.mkdir(parents=True)
    skipped = []
    for path in sorted(submission.rglob("*")) if submission.is_dir() else []:
        rel = path.relative_to(submission)
        if any(part.startswith(".") for part in rel.parts) or (path.is_dir() and not path.is_symlink()):
            continue  # .ipynb_checkpoints and other hidden copies; folders are walked
        if path.suffix.lower() not in (".ipynb", ".zip"):
            skipped.append(f"{rel.as_posix()} (not a notebook or zip)")
            continue
        if path.is_symlink() or not path.is_file():
            skipped.append(f"{rel.as_posix()} (not a regular file)")
            continue
        target = folder.joinpath(*rel.parts)  # the student's own folders kept: they read their own paths
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)  # the time too: choose_copy grades the newest of two copies
    return skipped


def _settings(root: Path) -> dict[str, Any]:
    """``gradescope.json``, checked: a setting it cannot use raises ``ValueError`` naming it."""
    config = json.loads((root / "source" / CONFIG_FILE).read_text(encoding="utf-8"))
    check_visibility(config.get("hidden_visibility", "after_published"))
    normalize_language(config.get("lang", "en"))
    check_budget(config.get("budget", DEFAULT_BUDGET))
    chapters = config.get("chapters")
    if chapters is not None and not (isinstance(chapters, list) and all(type(n) is int for n in chapters)):
        raise ValueError(f"chapters in {CONFIG_FILE} must be a list of chapter numbers or null, got {chapters!r}")
    return config


def _grade(
    root: Path, config: Mapping[str, Any], metadata: Mapping[str, Any], registry: Any, jobs: int, began: float
) -> tuple[list[Any], list[str]]:
    """The rows of this submission and the notes students read at once (files not graded...). ``began``: when
    the budget started (``time.monotonic()``)."""
    chapters = config.get("chapters")
    budget = check_budget(config.get("budget", DEFAULT_BUDGET))
    with tempfile.TemporaryDirectory(prefix="gradescope-") as tmp:  # mode 0700: the sandbox's uid stays out
        student = _student_name(metadata)
        skipped = _gather(root / "submission", Path(tmp) / "submissions" / student)
        summary = grade(
            Path(tmp) / "submissions",
            Path(tmp) / "out",
            jobs=jobs,
            timeout=config["timeout"],
            seed=int(config["seed"]),
            course_root=root / "source" / config.get("course", "course"),
            registry=registry,
            memory_mb=config["memory_mb"],
            progress=False,
            lang=config.get("lang", "en"),
            chapters=None if chapters is None else frozenset(chapters),
            budget=budget,
            budget_from=began,
            wall=gradescope_wall(config["timeout"]),
        )
    # decided from names and times before any code ran (which copy of a chapter is graded, and why)
    skipped += [entry.line() for entry in summary.get("unplaced", ())]
    # a name's control or bidirectional characters (ESC, U+202E) shown as escapes, as in the grader's files
    notes = [tr("Not graded: {files}.", files=console("; ".join(skipped)))] if skipped else []
    files, held = summary.get("elsewhere", {}).get(student, ([], []))
    # another chapter's notebook beside this assignment's (W6) is among the entries not graded, named above
    if not any(row.status != Status.MISSING for row in summary["rows"]) and held:  # chapter 7 for chapter 2
        notes.append(tr("{files}: this is chapter {held}; this assignment grades chapter {graded}: submit your "
                        "chapter {graded} notebook (.ipynb) here.", files=console(", ".join(files)),
                        held=chapters_text(held), graded=chapters_text(summary["chapters"])))
    elif not any(row.status != Status.MISSING for row in summary["rows"]):
        notes.append(tr("No exercise cell was found: submit the chapter notebooks (.ipynb) as Jupyter saved them."))
    if summary.get("budget_spent"):
        notes.append(tr("Grading stopped when the time for this submission ran out ({budget:g} s for all its "
                        "exercises): the exercises not graded by then are timeouts, worth 0. Look for code that waits "
                        "or loops (a sleep, input(), an endless loop), then submit again.", budget=budget))
    points = points_text(sum(row.points for row in summary["rows"]))
    print(f"gradescope: graded {student}: {points} points", flush=True)
    return summary["rows"], notes


def run_gradescope(
    root: str | Path,
    *,
    registry: Mapping[str, Any] | None = None,
    jobs: int = 1,
    allow_weak_isolation: bool | None = None,
) -> dict[str, Any] | None:
    """Grade ``root/submission`` and write ``root/results/results.json``; return what was written.

    Args:
        root: the autograder root (``/autograder`` on Gradescope), holding ``source/`` (the bundle),
            ``submission/`` and ``results/``.
        registry: exercise id -> ``Exercise``; default :func:`utils.exercises.all_exercises` (tests inject).
        jobs: students graded in parallel (one here). Default: ``1``.
        allow_weak_isolation: grade even where the sandbox cannot switch to an unprivileged uid. Default:
            ``None``, the bundle's setting (``allow_weak_isolation`` in ``gradescope.json``, false when absent).

    When grading is refused (:class:`WeakIsolationRefused`) or the grader fails, no ``results.json`` is left
    (an earlier one is removed) and None is returned, the reason printed for the instructor: Gradescope
    then shows the submission as an autograder error ("The autograder failed to execute correctly", its
    name for a run without a valid ``results.json``), not as a score of 0, and the instructor can re-run
    it once the cause is fixed. :func:`main` exits 1.
    """
    started, began = time.perf_counter(), time.monotonic()
    root = Path(root)
    (root / "results" / "results.json").unlink(missing_ok=True)  # only this run's verdict may stand
    visibility, lang = "after_published", "en"
    instructor: list[dict[str, Any]] = []
    try:
        try:
            config = _settings(root)
            visibility, lang = config.get("hidden_visibility", visibility), config.get("lang", lang)
            metadata = lock_down(root)
            allow = (
                bool(config.get("allow_weak_isolation", False))
                if allow_weak_isolation is None
                else allow_weak_isolation
            )
            iso, line = checked_isolation(allow)
            print(f"gradescope: {line}", flush=True)
            instructor.append(instructor_test(ISOLATION_TEST, not iso.weaknesses(), line))
            with using_language(lang):
                rows, notes = _grade(root, config, metadata, registry, jobs, began)
        finally:
            sandbox.allow_weak_isolation(False)  # this process's next run decides again
            killed = end_student_processes()
            if killed:
                print(f"gradescope: killed {killed} leftover processes of the sandbox", flush=True)
    except WeakIsolationRefused as exc:
        print(f"gradescope: {exc} No results.json is written: Gradescope shows an autograder error.", flush=True)
        return None
    except Exception as exc:  # noqa: BLE001  (an autograder error, with the reason for the instructor)
        print(f"gradescope: the grader failed: {exc!r}. No results.json is written: Gradescope shows an autograder "
              f"error; re-run the submission once the cause is fixed.", flush=True)
        return None
    seconds = time.perf_counter() - started
    with using_language(lang):
        data = gradescope_results(rows, seconds, visibility, "\n".join(notes), instructor)
    write_results(root / "results", data)
    print(f"gradescope: results.json written after {seconds:.1f} s: {data['score']:g} points", flush=True)
    return data


def _registry(spec: str | None) -> Mapping[str, Any] | None:
    if not spec:
        return None
    import importlib

    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def main(argv: list[str] | None = None) -> int:
    """``python -m utils.grading.gradescope --root ROOT`` (what ``run_autograder`` runs)."""
    parser = argparse.ArgumentParser(
        prog="python -m utils.grading.gradescope",
        description="Grade a Gradescope submission into results/results.json.",
    )
    parser.add_argument("--root", type=Path, default=Path(os.environ.get("AUTOGRADER_ROOT", "/autograder")))
    parser.add_argument(
        "--allow-weak-isolation",
        action="store_const",
        const=True,
        default=None,
        help=(
            "grade even where the sandbox cannot run the student's code as an unprivileged uid (it could then read "
            "the seed and rewrite results.json); default: the bundle's setting"
        ),
    )
    parser.add_argument("--registry", default=None, help=argparse.SUPPRESS)  # tests: "module:NAME"
    args = parser.parse_args(argv)
    become_subreaper()
    data = run_gradescope(args.root, registry=_registry(args.registry), allow_weak_isolation=args.allow_weak_isolation)
    return 0 if data is not None else 1  # no results.json: Gradescope reports an autograder error


if __name__ == "__main__":
    raise SystemExit(main())
