"""Gradescope, the grading side: ``run_autograder`` runs ``python -m utils.grading.gradescope --root ROOT``,
which grades one submission with the course grader and writes ``results.json``.

The autograder zip itself (``setup.sh``, ``run_autograder``, ``gradescope.json`` and ``course/``) is written
by :mod:`utils.builder.gradescope_bundle` (``python -m utils.grade gradescope-bundle OUT.zip``).
:func:`run_gradescope` grades the notebooks in ``$AUTOGRADER_ROOT/submission`` (the same sandbox, cases and
judging as ``python -m utils.grade``: :func:`utils.grading.batch.grade`) with the settings of the bundle's
``gradescope.json`` (:data:`CONFIG_FILE`) and writes ``$AUTOGRADER_ROOT/results/results.json``.
``AUTOGRADER_ROOT`` defaults to ``/autograder``; the tests set it to a temporary folder laid out like
Gradescope's.

``results.json`` follows the specification: top-level ``score`` (the sum of the tests' scores),
``execution_time`` (seconds), ``output`` and ``stdout_visibility``, and ``tests[]``, one per grader row
(``name``, ``score``, ``max_score``, ``status`` ``passed``/``failed``, ``output``, ``visibility``). A row
that carries a ``part`` (partial credit by named parts) becomes a test named ``"<exercise> · <part>"``.
A part's points depend on its hidden cases, so (unless the bundle's hidden visibility is ``visible``) a
part that ran hidden cases is two tests: ``"… · public cases"`` (0 points, ``visible``: what the
learner's own check already says) and the part's points under the hidden visibility (default
``after_published``), so resubmitting cannot be used to probe the hidden cases before grades are out.
The cases depend on the seed, the exercise and the student, whom Gradescope names in
``submission_metadata.json`` (their user ids).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from utils.exercises.common import Status, one_line
from utils.grading.batch import grade
from utils.i18n.messages import tr, using_language

__all__ = ["CONFIG_FILE", "GRADESCOPE_VISIBILITIES", "check_visibility", "gradescope_results", "gradescope_test",
           "run_gradescope"]

GRADESCOPE_VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")
"""The values Gradescope accepts for a test's ``visibility``."""
CONFIG_FILE = "gradescope.json"
"""The grading settings in the bundle (seed, timeout, memory, hidden visibility, language)."""


# --------------------------------------------------------------------------------------------------
# results.json
# --------------------------------------------------------------------------------------------------


def gradescope_test(row: Any, hidden_visibility: str = "after_published") -> dict[str, Any]:
    """One grader row (:class:`utils.grading.unit.Row`) as one entry of ``results.json``'s ``tests``.

    Args:
        row: has ``exercise``, ``points``, ``max_points``, ``status``, ``feedback``, and optionally
            ``part`` (a named part of the exercise) and ``hidden`` (true: the part runs hidden cases).
        hidden_visibility: the visibility of hidden rows. Default: ``"after_published"``.

    >>> from utils.grading.unit import Row
    >>> gradescope_test(Row("ann", "ch2.causal_mask", 2, 2, Status.PASSED, "✅ causal_mask"))["status"]
    'passed'
    """
    part = getattr(row, "part", None)
    hidden = bool(getattr(row, "hidden", False))
    return {
        "name": f"{row.exercise} · {part}" if part else str(row.exercise),
        "score": float(row.points),
        "max_score": float(row.max_points),
        "status": "passed" if row.status == Status.PASSED else "failed",
        "output": f"{row.status}: {row.feedback}" if row.feedback else str(row.status),
        "visibility": hidden_visibility if hidden else "visible",
    }


class _Entry:
    """One Gradescope test, shaped like a row for :func:`gradescope_test`."""

    def __init__(self, exercise: str, part: str | None, points: Any, max_points: Any, status: Any, feedback: str,
                 hidden: bool) -> None:
        self.exercise, self.part, self.points, self.max_points = exercise, part, points, max_points
        self.status, self.feedback, self.hidden = status, feedback, hidden


def _entries(row: Any, split_hidden: bool) -> list[Any]:
    """The tests of one row: one per named part when it has two or more (partial credit, each with its
    reason), else one. A part's credit depends on its hidden cases too, so with ``split_hidden`` (any hidden
    visibility but ``visible``) a part that ran hidden cases becomes two tests: its public cases alone
    (0 points, shown at once: what the learner's own check says), and its points under the hidden
    visibility. Reasons are already in the batch's feedback mode."""
    parts = getattr(row, "parts", ())
    if not parts:
        return [row]
    named = len(parts) > 1
    entries = []
    for part in parts if named else parts[:1]:
        source = part if named else row
        name = part.part if named else None
        if split_hidden and getattr(part, "hidden_cases", 0) and part.public_status is not None:
            label = tr("{name} · public cases", name=name) if name else tr("public cases")
            entries.append(_Entry(row.exercise, label, 0, 0, part.public_status, part.public_feedback, False))
            entries.append(_Entry(row.exercise, name, source.points, source.max_points, source.status,
                                  source.feedback, True))
        else:
            entries.append(source if not named else _Entry(row.exercise, name, part.points, part.max_points,
                                                           part.status, part.feedback, False))
    return entries


def gradescope_results(rows: Sequence[Any], seconds: float, hidden_visibility: str = "after_published",
                       output: str = "") -> dict[str, Any]:
    """The whole ``results.json`` for one submission's rows.

    Args:
        rows: the grader's rows for one student.
        seconds: how long grading took (``execution_time``, whole seconds).
        hidden_visibility: see :func:`gradescope_test`. Default: ``"after_published"``.
        output: text shown above the tests (e.g. files that were not graded). Default: ``""``.

    >>> from utils.grading.unit import Row
    >>> gradescope_results([Row("ann", "ch1.f", 0, 3, Status.FAILED, "wrong")], 2.4)["score"]
    0.0
    """
    check_visibility(hidden_visibility)
    split = hidden_visibility != "visible"
    tests = [gradescope_test(entry, hidden_visibility) for row in rows for entry in _entries(row, split)]
    score = sum(t["score"] for t in tests)
    maximum = sum(t["max_score"] for t in tests)
    passed = sum(t["status"] == "passed" for t in tests)
    summary = tr("{score:g} / {maximum:g} points; {passed} of {total} tests passed.", score=score, maximum=maximum,
                 passed=passed, total=len(tests))
    return {
        "score": score,
        "execution_time": int(round(seconds)),
        "output": "\n".join(line for line in (summary, output) if line),
        "stdout_visibility": "hidden",
        "tests": tests,
    }


def check_visibility(value: str) -> None:
    """Refuse (``ValueError``) a hidden visibility that Gradescope does not know."""
    if value not in GRADESCOPE_VISIBILITIES:
        raise ValueError(f"hidden_visibility must be one of {', '.join(GRADESCOPE_VISIBILITIES)}, got {value!r}")


# --------------------------------------------------------------------------------------------------
# run_autograder
# --------------------------------------------------------------------------------------------------


def _student_name(root: Path) -> str:
    """A folder name from the user ids in ``submission_metadata.json`` (the cases depend on it)."""
    try:
        users = json.loads((root / "submission_metadata.json").read_text(encoding="utf-8")).get("users") or []
        ids = sorted(str(user["id"]) for user in users if isinstance(user, Mapping) and "id" in user)
    except (OSError, ValueError, AttributeError, TypeError):
        ids = []
    name = "-".join(re.sub(r"[^A-Za-z0-9_.-]", "_", i) for i in ids)[:100]
    return f"user-{name}" if name else "submission"


def _gather(submission: Path, folder: Path) -> list[str]:
    """Copy every notebook under ``submission`` into ``folder`` (flat); return what was not taken, with why."""
    folder.mkdir(parents=True)
    skipped = []
    for path in sorted(submission.rglob("*")) if submission.is_dir() else []:
        rel = path.relative_to(submission)
        if any(part.startswith(".") for part in rel.parts) or (path.is_dir() and not path.is_symlink()):
            continue  # .ipynb_checkpoints and other hidden copies; folders are walked
        if path.suffix != ".ipynb":
            skipped.append(f"{rel.as_posix()} (not a notebook)")
            continue
        if path.is_symlink() or not path.is_file():
            skipped.append(f"{rel.as_posix()} (not a regular file)")
            continue
        target = folder / "__".join(rel.parts)
        while target.exists():  # a/b.ipynb and a__b.ipynb
            target = target.with_name("_" + target.name)
        shutil.copyfile(path, target)
    return skipped


def run_gradescope(root: str | Path, *, registry: Mapping[str, Any] | None = None, jobs: int = 1) -> dict[str, Any]:
    """Grade ``root/submission`` and write ``root/results/results.json``; return what was written.

    Args:
        root: the autograder root (``/autograder`` on Gradescope), holding ``source/`` (the bundle),
            ``submission/`` and ``results/``.
        registry: exercise id -> ``Exercise``; default :func:`utils.exercises.all_exercises` (tests inject).
        jobs: students graded in parallel (one here). Default: ``1``.

    Whatever goes wrong, a ``results.json`` with score 0 and the reason is written.
    """
    started = time.perf_counter()
    root = Path(root)
    results = root / "results" / "results.json"
    visibility = "after_published"
    try:
        config = json.loads((root / "source" / CONFIG_FILE).read_text(encoding="utf-8"))
        visibility = config.get("hidden_visibility", visibility)
        with tempfile.TemporaryDirectory(prefix="gradescope-") as tmp:
            student = _student_name(root)
            skipped = _gather(root / "submission", Path(tmp) / "submissions" / student)
            summary = grade(Path(tmp) / "submissions", Path(tmp) / "out", jobs=jobs, timeout=config["timeout"],
                            seed=int(config["seed"]), course_root=root / "source" / config.get("course", "course"),
                            registry=registry, memory_mb=config["memory_mb"], progress=False,
                            lang=config.get("lang", "en"))
        with using_language(config.get("lang", "en")):
            notes = [tr("Not graded: {files}.", files=", ".join(skipped))] if skipped else []
            if not any(row.status != Status.MISSING for row in summary["rows"]):
                notes.append(tr("No exercise cell was found: submit the chapter notebooks (.ipynb) as Jupyter "
                                "saved them."))
            data = gradescope_results(summary["rows"], time.perf_counter() - started, visibility, "\n".join(notes))
        print(f"gradescope: graded {student}: {data['score']:g} points, isolation {summary['isolation']}")
    except Exception as exc:  # noqa: BLE001  (Gradescope must get a results.json, with the reason)
        data = gradescope_results([], time.perf_counter() - started, visibility, (
            f"The autograder failed ({type(exc).__name__}: {one_line(exc, 200)}); ask your instructor."))
        print(f"gradescope: the grader failed: {exc!r}", file=sys.stderr)
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return data


def _registry(spec: str | None) -> Mapping[str, Any] | None:
    if not spec:
        return None
    import importlib

    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def main(argv: list[str] | None = None) -> int:
    """``python -m utils.grading.gradescope --root ROOT`` (what ``run_autograder`` runs)."""
    parser = argparse.ArgumentParser(prog="python -m utils.grading.gradescope",
                                     description="Grade a Gradescope submission into results/results.json.")
    parser.add_argument("--root", type=Path, default=Path(os.environ.get("AUTOGRADER_ROOT", "/autograder")))
    parser.add_argument("--registry", default=None, help=argparse.SUPPRESS)  # tests: "module:NAME"
    args = parser.parse_args(argv)
    run_gradescope(args.root, registry=_registry(args.registry))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
