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
    ERROR_MESSAGE_CHARS,
    FAIL,
    PASS,
    Case,
    Outcome,
    Status,
    clone_case,
    one_line,
    plain_copy,
)
from utils.exercises.definition import Exercise, Mistake


@dataclass(frozen=True)
class Verdict:
    """The result of judging one exercise; ``status`` is a :class:`~utils.exercises.common.Status`."""

    passed: bool
    status: Status
    message: str

    @property
    def line(self) -> str:
        """The one line a check cell prints: ``✅ …`` or ``❌ …``."""
        return f"{PASS if self.passed else FAIL} {self.message}"

    def _ipython_display_(self) -> None:
        """A check cell already printed :attr:`line`; show nothing more for the returned verdict."""


def describe(value: Any) -> str:
    """A short description of a value for messages: ``tensor (2, 3) float32``, ``tuple of 2``…"""
    if isinstance(value, torch.Tensor):
        return f"tensor {tuple(value.shape)} {str(value.dtype).replace('torch.', '')}"
    if isinstance(value, tuple):
        return f"tuple of {len(value)}"
    return type(value).__name__


def compare(got: Any, expected: Any, atol: float, rtol: float, where: str = "output") -> str | None:
    """Return None when ``got`` matches ``expected``, else a one-line reason naming ``where``."""
    got = plain_copy(got)
    if isinstance(expected, tuple):
        if not isinstance(got, (tuple, list)):
            return f"{where} should be a tuple of {len(expected)} ({', '.join(map(describe, expected))}), got {describe(got)}"
        if len(got) != len(expected):
            return f"{where} should be a tuple of {len(expected)}, got a tuple of {len(got)}"
        for i, (g, e) in enumerate(zip(got, expected)):
            reason = compare(g, e, atol, rtol, f"{where}[{i}]")
            if reason:
                return reason
        return None
    if isinstance(expected, torch.Tensor):
        return _compare_tensors(got, expected, atol, rtol, where)
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        if not isinstance(got, (int, float)) or isinstance(got, bool):
            return f"{where} should be a number, got {describe(got)}"
        if not math.isclose(float(got), float(expected), rel_tol=rtol, abs_tol=atol):
            return f"{where} is {got}, expected {expected}"
        return None
    # Exact types first: an object of another class could claim equality through its __eq__.
    if type(got) is not type(expected) or got != expected:
        return f"{where} is {got!r}, expected {expected!r}"
    return None


def _compare_tensors(got: Any, expected: torch.Tensor, atol: float, rtol: float, where: str) -> str | None:
    if not isinstance(got, torch.Tensor):
        return f"{where} should be a tensor of shape {tuple(expected.shape)}, got {describe(got)}"
    if got.shape != expected.shape:
        return f"{where} has shape {tuple(got.shape)}, expected {tuple(expected.shape)}"
    if expected.dtype == torch.bool and got.dtype != torch.bool:
        return f"{where} has dtype {got.dtype}, expected torch.bool (True = may attend)"
    if expected.is_floating_point() and not got.is_floating_point():
        return f"{where} has dtype {got.dtype}, expected a floating-point tensor ({expected.dtype})"
    if got.is_floating_point() and not torch.isfinite(got).all() and torch.isfinite(expected).all():
        bad = int((~torch.isfinite(got)).sum())
        return f"{where} contains {bad} NaN/inf values where the reference is finite"
    if expected.dtype == torch.bool or not expected.is_floating_point():
        if not torch.equal(got.to(expected.dtype), expected):
            wrong = int((got.to(expected.dtype) != expected).sum())
            return f"{where} differs from the reference in {wrong} of {expected.numel()} entries"
        return None
    g, e = got.double(), expected.double()
    if not torch.allclose(g, e, atol=atol, rtol=rtol, equal_nan=True):
        err = (g - e).abs().nan_to_num(nan=math.inf)
        idx = tuple(int(i) for i in torch.unravel_index(err.argmax(), err.shape))
        return f"{where} differs from the reference: max abs error {err.max().item():.3g} at index {idx}"
    return None


def judge(exercise: Exercise, cases: Sequence[Case], outcomes: Sequence[Outcome]) -> Verdict:
    """Compare the learner's outcomes with the reference on the same cases."""
    if not outcomes:
        return Verdict(False, Status.ERROR, "your function was never called")
    for index, (case, outcome) in enumerate(zip(cases, outcomes)):
        shapes = _case_summary(case)
        if outcome.forbidden:
            return Verdict(
                False, Status.FORBIDDEN,
                f"your function calls {outcome.forbidden}, which this exercise asks you to implement yourself",
            )
        if outcome.error:
            kind, message = outcome.error
            if kind == "NotImplementedError":
                return Verdict(False, Status.ERROR,
                               "not implemented yet: replace `raise NotImplementedError` with your code")
            mistake = _matching_mistake_error(exercise, case, kind, message)
            advice = f" {mistake.diagnosis}" if mistake else ""
            return Verdict(False, Status.ERROR, f"your function raised {kind}: {message} (inputs: {shapes}).{advice}")
        if outcome.mutated:
            names = ", ".join(outcome.mutated)
            return Verdict(
                False, Status.FAILED,
                f"your function changed its input {names} in place; work on a copy or use out-of-place ops "
                f"(e.g. `x + y`, not `x += y`; `masked_fill`, not `masked_fill_`)",
            )
        expected = plain_copy(exercise.reference(**clone_case(case)))
        reason = compare(outcome.output, expected, exercise.atol, exercise.rtol)
        if reason is None:
            continue
        mistake = _matching_mistake(exercise, case, outcome.output)
        if mistake is not None:
            return Verdict(False, Status.FAILED, f"{mistake.diagnosis} (case {index + 1}: {shapes})")
        hint = f" Hint: {exercise.hint}" if exercise.hint else ""
        return Verdict(False, Status.FAILED, f"{reason} (case {index + 1}: {shapes}).{hint}")
    if len(outcomes) < len(cases):  # e.g. the grader's sandbox died part-way: never pass on part
        return Verdict(False, Status.ERROR, f"your function ran on only {len(outcomes)} of {len(cases)} cases")
    return Verdict(True, Status.PASSED, f"{exercise.func_name} matches the reference on {len(cases)} random cases")


def _matching_mistake(exercise: Exercise, case: Case, got: Any) -> Mistake | None:
    for mistake in exercise.mistakes:
        try:
            wrong = plain_copy(mistake.fn(**clone_case(case)))
        except Exception:
            continue
        if compare(got, wrong, exercise.atol, exercise.rtol) is None:
            return mistake
    return None


def _matching_mistake_error(exercise: Exercise, case: Case, kind: str, message: str) -> Mistake | None:
    for mistake in exercise.mistakes:
        try:
            mistake.fn(**clone_case(case))
        except Exception as exc:
            if type(exc).__name__ == kind and one_line(str(exc), ERROR_MESSAGE_CHARS) == message:
                return mistake
    return None


def _case_summary(case: Case) -> str:
    parts = []
    for key, value in case.items():
        if isinstance(value, torch.Tensor):
            parts.append(f"{key}{tuple(value.shape)}")
        elif value is None or isinstance(value, (int, float, bool, str, tuple)):
            parts.append(f"{key}={value!r}")
    return ", ".join(parts)
