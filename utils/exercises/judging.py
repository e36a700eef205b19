"""The judge: compare a learner's outcomes with the reference and decide a :class:`Verdict`.

Trusted side only. It computes the reference (and each mistake) afresh on the same cases and never
calls the learner's code: it reads only the :class:`~utils.exercises.common.Outcome` s the runner
recorded, which in the grader arrive as files from a stopped sandbox. It does not import
:mod:`utils.exercises.runner` (a test checks this).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from utils.exercises.common import (
    FAIL,
    ODD_OUTPUT,
    PASS,
    Case,
    Outcome,
    Status,
    clone_case,
    plain_copy,
)
from utils.exercises.definition import Exercise
from utils.exercises.gradient_check import gradient_reason
from utils.exercises.mistake_search import Match, MistakeSearch, best_mistake
from utils.exercises.probes import Evidence, observe
from utils.i18n.messages import tr, translate


@dataclass(frozen=True)
class Verdict:
    """The result of judging one exercise; ``status`` is a :class:`~utils.exercises.common.Status`."""

    passed: bool
    status: Status
    message: str
    category: str = ""
    """What kind of failure, in a word or two that reveal no input (for hidden cases' feedback): one of
    :data:`CATEGORIES`; empty for a pass."""

    @property
    def line(self) -> str:
        """The one line a check cell prints: ``✅ …`` or ``❌ …``."""
        return f"{PASS if self.passed else FAIL} {self.message}"

    def _ipython_display_(self) -> None:
        """A check cell already printed :attr:`line`; show nothing more for the returned verdict."""


CATEGORIES = ("shapes", "dtype", "non-finite values", "values", "types", "error", "in-place change", "gradients",
              "forbidden", "not attempted")
"""The diagnosis categories a failing verdict can carry."""

def not_attempted_message() -> str:
    """The ``not attempted`` verdict's message (an untouched stub), in the learner's language."""
    return tr("not implemented yet: replace `raise NotImplementedError` with your code")


def category_text(category: str) -> str:
    """A diagnosis category (one of :data:`CATEGORIES`, kept English in data) as a learner reads it."""
    texts = {"shapes": tr("shapes"), "dtype": tr("dtype"), "non-finite values": tr("non-finite values"),
             "values": tr("values"), "types": tr("types"), "error": tr("error"),
             "in-place change": tr("in-place change"), "gradients": tr("gradients"),
             "forbidden": tr("forbidden"), "not attempted": tr("not attempted")}
    return texts.get(category, category)


def describe(value: Any) -> str:
    """A short description of a value for messages: ``tensor (2, 3) float32``, ``tuple of 2``…"""
    if isinstance(value, torch.Tensor):
        return tr("tensor {shape} {dtype}", shape=tuple(value.shape), dtype=str(value.dtype).replace("torch.", ""))
    if isinstance(value, tuple):
        return tr("tuple of {n}", n=len(value))
    if isinstance(value, list):
        return tr("list of {n}", n=len(value))
    return type(value).__name__


def compare(got: Any, expected: Any, atol: float, rtol: float, where: str | None = None) -> str | None:
    """Return None when ``got`` matches ``expected``, else a one-line reason naming ``where`` (default: the
    output, in the learner's language)."""
    found = compare_with_category(got, expected, atol, rtol, where)
    return None if found is None else found[1]


def outputs_agree(got: Any, expected: Any, atol: float, rtol: float) -> bool:
    """Whether :func:`compare` finds no difference, without building its reason (the mistake search asks this
    of every listed mistake, and most differ)."""
    return compare_with_category(got, expected, atol, rtol, where="", detail=False) is None


def compare_with_category(got: Any, expected: Any, atol: float, rtol: float,
                          where: str | None = None, detail: bool = True) -> tuple[str, str] | None:
    """Like :func:`compare`, with the reason's category first (one of :data:`CATEGORIES`). ``detail=False``:
    the same verdict and category, the reason left empty where it costs more than the comparison."""
    where = tr("output") if where is None else where
    got = plain_copy(got)
    if isinstance(expected, tuple):
        if not isinstance(got, (tuple, list)):
            return "shapes", tr("{where} should be a tuple of {n} ({items}), got {got}", where=where,
                                n=len(expected), items=", ".join(map(describe, expected)), got=describe(got))
        if len(got) != len(expected):
            return "shapes", tr("{where} should be a tuple of {n}, got a tuple of {got}", where=where,
                                n=len(expected), got=len(got))
        for i, (g, e) in enumerate(zip(got, expected)):
            found = compare_with_category(g, e, atol, rtol, f"{where}[{i}]", detail)
            if found:
                return found
        return None
    if isinstance(expected, torch.Tensor):
        return _compare_tensors(got, expected, atol, rtol, where, detail)
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        if not isinstance(got, (int, float)) or isinstance(got, bool):
            return "types", tr("{where} should be a number, got {got}", where=where, got=describe(got))
        if not math.isclose(float(got), float(expected), rel_tol=rtol, abs_tol=atol):
            return "values", tr("{where} is {got}, expected {expected}", where=where, got=got, expected=expected)
        return None
    # Exact types first: an object of another class could claim equality through its __eq__.
    if type(got) is not type(expected) or got != expected:
        return ("types" if type(got) is not type(expected) else "values"), tr(
            "{where} is {got!r}, expected {expected!r}", where=where, got=got, expected=expected)
    return None


_HALF_PRECISION_TOLERANCE = {torch.float16: 4e-3, torch.bfloat16: 3e-2}  # about 4 units in the last place


def _compare_tensors(got: Any, expected: torch.Tensor, atol: float, rtol: float,
                     where: str, detail: bool = True) -> tuple[str, str] | None:
    if not isinstance(got, torch.Tensor):
        return "shapes", tr("{where} should be a tensor of shape {shape}, got {got}", where=where,
                            shape=tuple(expected.shape), got=describe(got))
    if got.shape != expected.shape:
        return "shapes", tr("{where} has shape {got}, expected {expected}", where=where, got=tuple(got.shape),
                            expected=tuple(expected.shape))
    if expected.dtype == torch.bool and got.dtype != torch.bool:
        return "dtype", tr("{where} has dtype {dtype}, expected torch.bool (True = may attend)", where=where,
                           dtype=got.dtype)
    if expected.is_floating_point() and not got.is_floating_point():
        return "dtype", tr("{where} has dtype {dtype}, expected a floating-point tensor ({expected})", where=where,
                           dtype=got.dtype, expected=expected.dtype)
    if expected.is_floating_point() and got.dtype != expected.dtype:
        return "dtype", tr("{where} has dtype {dtype}, expected {expected}: look for a `.float()` or `.double()` "
                           "cast, or a new tensor made without `dtype=`", where=where, dtype=got.dtype,
                           expected=expected.dtype)
    if got.is_floating_point() and not torch.isfinite(got).all() and torch.isfinite(expected).all():
        bad = int((~torch.isfinite(got)).sum())
        return "non-finite values", tr("{where} contains {bad} NaN/inf values where the reference is finite",
                                       where=where, bad=bad)
    if expected.dtype == torch.bool or not expected.is_floating_point():
        if not torch.equal(got.to(expected.dtype), expected):
            wrong = int((got.to(expected.dtype) != expected).sum())
            return "values", tr("{where} differs from the reference in {wrong} of {n} entries", where=where,
                                wrong=wrong, n=expected.numel())
        return None
    g, e = got.double(), expected.double()
    # A correct answer computed in another order differs from the reference by rounding; in a
    # half-precision dtype that is a few units in the last place, more than a float32 tolerance.
    floor = _HALF_PRECISION_TOLERANCE.get(expected.dtype, 0.0)
    atol, rtol = max(atol, floor), max(rtol, floor)
    if not torch.allclose(g, e, atol=atol, rtol=rtol, equal_nan=True):
        if not detail:
            return "values", ""
        err = (g - e).abs().masked_fill(g == e, 0.0)  # equal infinities are no error
        err = err.nan_to_num(nan=math.inf)
        flat, idx = int(err.argmax()), []
        for size in reversed(err.shape):  # the flat index, unravelled (torch.unravel_index costs more)
            flat, rest = divmod(flat, size)
            idx.append(rest)
        return "values", tr("{where} differs from the reference: max abs error {error:.3g} at index {index}",
                            where=where, error=err.max().item(), index=tuple(reversed(idx)))
    return None


def judge(exercise: Exercise, cases: Sequence[Case], outcomes: Sequence[Outcome], *, diagnose: bool = True,
          evidence: Evidence | None = None) -> Verdict:
    """Compare the learner's outcomes with the reference on the same cases.

    A forbidden call or an input changed in place decides at once; ``NotImplementedError`` on every case
    is ``not attempted`` (on some cases only, those cases fail). Otherwise
    every case is judged, and the diagnosis is the :class:`Mistake` that reproduces the learner's
    result (output or error) on the most failing cases, so that the order of the cases does not decide
    which mistake is named. Without a matching mistake, the first failure is reported with the hint.
    ``diagnose=False`` skips the search for a matching mistake (the same comparison, a plainer message:
    for counting the cases that pass). ``evidence``: the learner's outcomes on the probe inputs
    (:mod:`utils.exercises.probes`), read when no mistake is named.
    """
    if not outcomes:
        return Verdict(False, Status.ERROR, tr("your function was never called"), "error")
    if all(outcome.error and outcome.error[0] == "NotImplementedError" and not outcome.forbidden
           for outcome in outcomes):
        return Verdict(False, Status.NOT_ATTEMPTED, not_attempted_message(), "not attempted")
    failures: list[tuple[int, Case, Outcome, tuple[str, str] | None]] = []  # (index, case, outcome, reason)
    gradient_failures: list[str] = []  # right outputs that would not train
    for index, (case, outcome) in enumerate(zip(cases, outcomes)):
        if outcome.forbidden:
            return Verdict(
                False, Status.FORBIDDEN,
                tr("your function calls {name}, which this exercise asks you to implement yourself",
                   name=outcome.forbidden),
                "forbidden",
            )
        if outcome.error:
            failures.append((index, case, outcome, None))
            continue
        if outcome.mutated:
            names = ", ".join(outcome.mutated)
            return Verdict(
                False, Status.FAILED,
                tr("your function changed its input {names} in place; work on a copy or use out-of-place ops "
                   "(e.g. `x + y`, not `x += y`; `masked_fill`, not `masked_fill_`)", names=names),
                "in-place change",
            )
        expected = plain_copy(exercise.reference(**clone_case(case)))
        reason = compare_with_category(outcome.output, expected, exercise.atol, exercise.rtol)
        if reason is not None:
            failures.append((index, case, outcome, reason))
        elif exercise.gradients and (untrainable := gradient_reason(exercise, case, outcome)):
            gradient_failures.append(tr("{reason} ({where})", reason=untrainable,
                                        where=_where(index, len(cases), case)))
    if failures:
        return _failure_verdict(exercise, len(cases), failures, diagnose, ran=list(zip(cases, outcomes)),
                                evidence=evidence)
    if gradient_failures:
        return Verdict(False, Status.FAILED, gradient_failures[0], "gradients")
    if len(outcomes) < len(cases):  # e.g. the grader's sandbox died part-way: never pass on part
        return Verdict(False, Status.ERROR, tr("your function ran on only {ran} of {n} cases",
                                               ran=len(outcomes), n=len(cases)), "error")
    return Verdict(True, Status.PASSED, tr("{name}: all {n} cases pass", name=exercise.func_name, n=len(cases)))


def _failure_verdict(
    exercise: Exercise, n_cases: int, failures: Sequence[tuple[int, Case, Outcome, tuple[str, str] | None]],
    diagnose: bool = True, *, ran: Sequence[tuple[Case, Outcome]], evidence: Evidence | None = None,
) -> Verdict:
    """The failing verdict: a listed mistake when it earns its name (:func:`_best_mistake`), else what the
    probes observed, or the generic diagnosis of the first failure, with what a listed slip that fits some
    cases only explains (:func:`_with_partial`)."""
    found = _best_mistake(exercise, failures, ran) if diagnose else MistakeSearch()
    index, case, outcome, reason = failures[0]
    status = Status.ERROR if outcome.error else Status.FAILED
    category = "error" if reason is None else reason[0]
    if found.named is not None:
        index = found.named.explained[0]
        matched = next(f for f in failures if f[0] == index)
        category = "error" if matched[3] is None else matched[3][0]
        return Verdict(False, Status.FAILED, tr("{reason} ({where})", reason=translate(found.named.mistake.diagnosis),
                                                where=_where(index, n_cases, matched[1])), category)
    if found.tied:
        slips = tr(" or ").join(tr("«{diagnosis}»", diagnosis=translate(m.mistake.diagnosis)) for m in found.tied)
        where, n = _where(index, n_cases, case), len(found.tied[0].ran)
        if n == 1:
            return Verdict(False, status, tr("on the one case that ran your output equals what each of these known "
                                             "slips gives, so it cannot tell which one you made: {slips} ({where})",
                                             slips=slips, where=where), category)
        return Verdict(False, status, tr("on all {n} cases your output equals what each of these known slips gives, "
                                         "so these cases cannot tell which one you made: {slips} ({where})",
                                         n=n, slips=slips, where=where), category)
    verdict, probed = _generic_verdict(exercise, n_cases, failures, status, category, evidence, probe=diagnose)
    if found.partial is None:
        return verdict
    return _with_partial(exercise, n_cases, failures, found.partial, ran, verdict, probed)


def _with_partial(exercise: Exercise, n_cases: int,
                  failures: Sequence[tuple[int, Case, Outcome, tuple[str, str] | None]], match: Match,
                  ran: Sequence[tuple[Case, Outcome]], verdict: Verdict, probed: bool) -> Verdict:
    """``verdict`` with what a listed slip that reproduces some failing cases only explains.

    A probe's observation leads, and the slip follows it, unless the slip reproduces only errors (one shape
    error looks like another) and fails a case the learner passes: then it is not what the learner did, and
    the observation stands alone. Without a probe the slip leads: where it explains every failing case, it is
    the whole story (the learner makes it on some inputs only); else the first failing case it does not
    explain is described after it."""
    observed = _partial_observation(match, ran, n_cases)
    if probed:
        if match.passes_where_it_fails and all(ran[i][1].error for i in match.explained):
            return verdict
        return Verdict(False, verdict.status, tr("{verdict}. Also, {observed}", verdict=verdict.message,
                                                  observed=observed), verdict.category)
    if not match.missed:
        return Verdict(False, verdict.status, observed, verdict.category)
    first = next(f for f in failures if f[0] == match.missed[0])
    rest, status = [first, *(f for f in failures if f is not first)], Status.ERROR if first[2].error else Status.FAILED
    category = "error" if first[3] is None else first[3][0]
    unexplained, _ = _generic_verdict(exercise, n_cases, rest, status, category, probe=False)
    return Verdict(False, unexplained.status, tr("{observed} {verdict}", observed=observed,
                                                 verdict=_sentence(unexplained.message)), unexplained.category)


def _sentence(text: str) -> str:
    """``text`` as a sentence that follows another: its first letter a capital (no change in Chinese)."""
    return text[:1].upper() + text[1:] if text[:1].islower() else text


def _generic_verdict(exercise: Exercise, n_cases: int,
                     failures: Sequence[tuple[int, Case, Outcome, tuple[str, str] | None]],
                     status: Status, category: str, evidence: Evidence | None = None, *,
                     probe: bool = True) -> tuple[Verdict, bool]:
    """The diagnosis of the first failure when no listed mistake earns its name: what a probe observed
    (:func:`~utils.exercises.probes.observe`), else the hint, or the error; and whether a probe spoke."""
    index, case, outcome, reason = failures[0]
    hint = tr("Hint: {hint}", hint=translate(exercise.hint)) if exercise.hint else ""
    if outcome.error and outcome.error[0] == "NotImplementedError":
        return Verdict(False, status, tr("your function still raises NotImplementedError ({where}): finish it "
                                         "for inputs like these", where=_where(index, n_cases, case)), category), False
    found = observe(exercise, failures, evidence) if probe else None
    if found is not None:
        text, position = found
        index, case, seen_outcome, seen = failures[position or 0]
        where = _where(index, n_cases, case)
        return Verdict(False, Status.ERROR if seen_outcome.error else Status.FAILED,
                       tr("{reason} ({where})", reason=text, where=where) if position is not None else
                       tr("{reason} (first failing case: {where})", reason=text, where=where),
                       "error" if seen is None else seen[0]), True
    if outcome.error and outcome.error[0] == ODD_OUTPUT:
        return Verdict(False, status, tr("your function returned an output that cannot be compared: {message} "
                                         "({where}).", message=outcome.error[1], where=_where(index, n_cases, case)),
                       category), False
    if outcome.error:
        kind, message = outcome.error
        advice = _signature_advice(kind, message, case) or hint
        where = _where(index, n_cases, case)
        text = (tr("your function raised {kind}: {message} ({where}). {advice}", kind=kind, message=message,
                   where=where, advice=advice) if advice else
                tr("your function raised {kind}: {message} ({where}).", kind=kind, message=message, where=where))
        return Verdict(False, status, text, category), False
    where = _where(index, n_cases, case)
    if reason[0] == "dtype":  # the reason says where a dtype is lost; the exercise's hint is about other things
        hint = ""
    text = (tr("{reason} ({where}). {hint}", reason=reason[1], where=where, hint=hint) if hint else
            tr("{reason} ({where}).", reason=reason[1], where=where))
    return Verdict(False, status, text, category), False


def _best_mistake(exercise: Exercise, failures: Sequence[tuple[int, Case, Outcome, tuple[str, str] | None]],
                  ran: Sequence[tuple[Case, Outcome]]) -> MistakeSearch:
    """:func:`~utils.exercises.mistake_search.best_mistake` with this module's comparison (:func:`outputs_agree`: only
    whether the outputs agree is asked)."""
    return best_mistake(exercise, failures, ran, _differs)


def _differs(got: Any, expected: Any, atol: float, rtol: float) -> str | None:
    return None if outputs_agree(got, expected, atol, rtol) else "differs"


def _partial_observation(match: Match, ran: Sequence[tuple[Case, Outcome]], n_cases: int) -> str:
    """What a mistake that reproduces some failing cases only explains, as an observation."""
    cases = (tr("case {i} of {n}", i=match.explained[0] + 1, n=n_cases) if len(match.explained) == 1 else
             tr("cases {indices} of {n}", indices=tr(", ").join(str(i + 1) for i in match.explained), n=n_cases))
    slip = translate(match.mistake.diagnosis)
    other = (match.missed or match.passes_where_it_fails)[0]
    where = tr("case {i} of {n} ({inputs})", i=other + 1, n=n_cases, inputs=_case_summary(ran[other][0]))
    if match.missed:
        return tr("on {cases} your function does what this known slip does: «{slip}»; it does not explain "
                  "{where}.", cases=cases, slip=slip, where=where)
    return tr("on {cases} your function does what this known slip does: «{slip}»; but your function passes "
              "{where}, where that slip fails: you make that slip on some inputs only.", cases=cases, slip=slip,
              where=where)


def _signature_advice(kind: str, message: str, case: Case) -> str:
    """Advice when the check could not call the function with the template's parameter names."""
    if kind == "TypeError" and any(
        text in message for text in ("unexpected keyword argument", "required positional argument", "multiple values")
    ):
        return tr("Keep the parameter names of the template, {names}: the check calls your function with "
                  "them by name.", names=", ".join(case))
    return ""


def _where(index: int, n_cases: int, case: Case) -> str:
    return tr("case {i} of {n}: {inputs}", i=index + 1, n=n_cases, inputs=_case_summary(case))


def _case_summary(case: Case, limit: int = 4) -> str:
    """The inputs of one case, briefly: the first ``limit`` of them, then how many more."""
    parts = []
    for key, value in case.items():
        if isinstance(value, torch.Tensor):
            dtype = "" if value.dtype in (torch.float32, torch.bool) else f" {str(value.dtype).replace('torch.', '')}"
            parts.append(f"{key}{tuple(value.shape)}{dtype}")
        elif value is None or isinstance(value, (int, float, bool, str, tuple)):
            parts.append(f"{key}={value!r}")
    if len(parts) > limit:
        parts = [*parts[:limit], tr("+{n} more", n=len(parts) - limit)]
    return ", ".join(parts)
