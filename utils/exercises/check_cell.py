"""What a notebook's check cell calls: ``check.project_qkv(project_qkv)`` prints one ✅ or ❌ line.

:data:`check` is a :class:`CheckCellAPI`: one attribute per exercise function name, with this contract
(the nbgrader export relies on it)::

    check.<name>(fn, *, cases="public", seed=None, assert_passed=False) -> Verdict

* ``cases="public"`` (default): the public cases (seed 0, or ``seed``), with full diagnoses. A pass
  reads ``✅ <name>: all N public cases pass (the grader also runs hidden cases)``.
* ``cases="hidden"``: the hidden cases for ``seed`` (default
  :data:`~utils.exercises.definition.HIDDEN_CHECK_SEED`), reported as the grader's default ``public``
  feedback reports them: how many pass, and for each failing part the diagnosis categories, never an
  input or an expected value (:mod:`utils.exercises.credit`).
* ``assert_passed=True`` raises ``AssertionError(<the ❌ line>)`` when the verdict is not a pass.

It prints the line either way and returns the :class:`~utils.exercises.judging.Verdict`. The runner
and the judge run in one process here (the kernel); the grader runs the same two halves with a process
boundary between them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from utils.exercises import credit
from utils.exercises.common import Status, with_namesakes
from utils.exercises.definition import HIDDEN_CHECK_SEED, PUBLIC_SEED, Exercise
from utils.exercises.forbidden import forbidden_in_function
from utils.exercises.judging import Verdict, category_text, describe, judge
from utils.exercises.probes import Evidence, evidence_for, probe_inputs
from utils.exercises.registry import exercise_index, exercise_named
from utils.exercises.runner import run_cases
from utils.i18n.messages import tr
from utils.notebook_setup import verify_course_package

CASE_KINDS = ("public", "hidden")


def _static_verdict(exercise: Exercise, fn: Any) -> Verdict | None:
    """The verdict decided without running ``fn``: not a function, or a forbidden name in its source."""
    if not callable(fn):
        return Verdict(False, Status.ERROR, tr("expected your function {name}, got {got}",
                                               name=exercise.func_name, got=describe(fn)), "error")
    name = forbidden_in_function(fn, exercise.forbidden, exercise.func_name)
    if name and name in with_namesakes(exercise.forbidden):
        return Verdict(False, Status.FORBIDDEN,
                       tr("your function uses {name}; this exercise asks you to implement it yourself", name=name),
                       "forbidden")
    if name:  # what no exercise cell may use (an import, a file write...): the grader gives the exercise 0
        return Verdict(False, Status.FORBIDDEN,
                       tr("your cell uses {name}, which no exercise cell may use; the grader gives this exercise 0 "
                          "for it: remove it", name=name), "forbidden")
    return None


def run_probes(exercise: Exercise, fn: Callable[..., Any]) -> Evidence:
    """Run ``fn`` on the exercise's probe inputs (:func:`~utils.exercises.probes.probe_inputs`), after its
    cases, and gather what the probes read; never counted toward points. A ``sys.exit`` or another
    ``BaseException`` there (a ``KeyboardInterrupt`` aside) only loses that evidence, as in the grader (R24)."""
    try:
        outcomes = run_cases(fn, probe_inputs(exercise), exercise.forbidden)
    except KeyboardInterrupt:
        raise
    except BaseException:  # noqa: BLE001  (SystemExit, a learner's BaseException: the verdict stands on the cases)
        return Evidence()
    return evidence_for(exercise, outcomes, fn)


def run_public_check(exercise: Exercise, fn: Callable[..., Any], *, seed: int = PUBLIC_SEED,
                     quiet: bool = False) -> Verdict:
    """Check ``fn`` on the public cases (``exercise.cases(seed)``) and print one ``✅``/``❌`` line."""
    verdict = _static_verdict(exercise, fn)
    if verdict is None:
        cases = exercise.cases(seed)
        outcomes = run_cases(fn, cases, exercise.forbidden, exercise.gradients)
        verdict = judge(exercise, cases, outcomes, diagnose=False)  # pass or fail, without the mistake search
        if not verdict.passed:  # the probes and the search run only for a wrong answer, once
            verdict = judge(exercise, cases, outcomes, evidence=run_probes(exercise, fn))
        if verdict.passed:
            verdict = Verdict(True, Status.PASSED, tr("{name}: all {n} public cases pass (the grader also runs "
                                                      "hidden cases)", name=exercise.func_name, n=len(cases)))
    if not quiet:
        print(verdict.line)
    return verdict


def run_hidden_check(exercise: Exercise, fn: Callable[..., Any], *, seed: int | None = None,
                     quiet: bool = False) -> Verdict:
    """Check ``fn`` on the hidden cases for ``seed`` and print one line that reveals no hidden input."""
    seed = HIDDEN_CHECK_SEED if seed is None else seed
    verdict = _static_verdict(exercise, fn)
    if verdict is None:
        cases = exercise.hidden_cases(seed)
        outcomes = run_cases(fn, cases, exercise.forbidden, exercise.gradients)
        graded = credit.credit_for(exercise, cases, outcomes, 0, diagnose_hidden=False,
                                   evidence=run_probes(exercise, fn))
        name = exercise.func_name
        if graded.decided is not None:
            verdict = Verdict(False, graded.decided.status, graded.decided.message, graded.decided.category)
        elif graded.status == Status.PASSED:
            verdict = Verdict(True, Status.PASSED, tr("{name}: all {n} hidden cases pass (seed {seed})", name=name,
                                                      n=len(cases), seed=seed))
        else:
            passed = sum(part.hidden[0] for part in graded.parts)
            failing = [tr("{part} ({why})", part=_failing_part(p),
                          why=tr(", ").join(map(category_text, p.hidden_categories)) or credit.status_text(p.status))
                       for p in graded.parts if not p.passed]
            verdict = Verdict(False, graded.status, tr("{name}: {passed} of {n} hidden cases pass (seed {seed}); not "
                                                       "passed: {parts}", name=name, passed=passed, n=len(cases),
                                                       seed=seed, parts=tr("; ").join(failing)),
                              next((c for p in graded.parts for c in p.hidden_categories), "error"))
    if not quiet:
        print(verdict.line)
    return verdict


def _failing_part(part: credit.PartResult) -> str:
    """A failing part as the hidden summary names it: an exercise with one part, "all cases", says how many of
    its cases fail instead (some of them may pass)."""
    if part.name != "all cases":
        return credit.part_text(part.name)
    failed = part.hidden[1] - part.hidden[0]
    return tr("{n} hidden case", n=failed) if failed == 1 else tr("{n} hidden cases", n=failed)


def run_check(exercise: Exercise, fn: Callable[..., Any], *, cases: str = "public", seed: int | None = None,
              assert_passed: bool = False, quiet: bool = False) -> Verdict:
    """The check cell's call (see the module docstring for the contract)."""
    if cases not in CASE_KINDS:
        raise ValueError(f"cases must be 'public' or 'hidden', got {cases!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise TypeError(f"seed must be an int or None, got {describe(seed)}")
    if cases == "public":
        verdict = run_public_check(exercise, fn, seed=PUBLIC_SEED if seed is None else seed, quiet=quiet)
    else:
        verdict = run_hidden_check(exercise, fn, seed=seed, quiet=quiet)
    if assert_passed and not verdict.passed:
        raise AssertionError(verdict.line)
    return verdict


def _bound(exercise: Exercise) -> Callable[..., Verdict]:
    def check_exercise(fn: Callable[..., Any], *, cases: str = "public", seed: int | None = None,
                       assert_passed: bool = False, quiet: bool = False) -> Verdict:
        return run_check(exercise, fn, cases=cases, seed=seed, assert_passed=assert_passed, quiet=quiet)

    check_exercise.__name__ = check_exercise.__qualname__ = exercise.func_name
    return check_exercise


class CheckCellAPI:
    """``check.<function name>(fn, *, cases="public", seed=None, assert_passed=False)``: :func:`run_check`."""

    def __getattr__(self, func_name: str) -> Callable[..., Verdict]:
        if func_name.startswith("__"):
            raise AttributeError(func_name)
        verify_course_package()  # a learner's own `utils` imported later would make every check lie
        try:  # imports this exercise's chapter module only: a kernel loads no other chapter's exercises
            return _bound(exercise_named(func_name))
        except KeyError:
            raise AttributeError(f"no exercise named {func_name!r}") from None

    def __dir__(self) -> list[str]:
        return list(exercise_index())


check = CheckCellAPI()
