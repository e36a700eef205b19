"""Whether a right output would also train: the judge's check of the backward pass (trusted side).

The runner records, for each case whose output it could differentiate, what reaches each floating input
(:data:`~utils.exercises.common.GRADIENT_STATES`) and the gradients along a fixed direction
(:func:`~utils.exercises.common.cotangent`). :func:`gradient_reason` differentiates the reference the same way
and says why the learner's function would not train like it: a backward pass that fails, an input no gradient
reaches, NaN or inf on the way, or gradients that arrive but are not the reference's (a factor taken out of the
graph with ``.detach()`` or computed under ``torch.no_grad()`` keeps the output right and changes them).
"""

from __future__ import annotations

import torch

from utils.exercises.common import Case, Outcome, gradient_report
from utils.exercises.definition import Exercise
from utils.i18n.messages import tr

_HALF_PRECISION = {torch.float16: 1e-2, torch.bfloat16: 5e-2}
"""Relative tolerance of gradients computed in half precision (each partial sum rounds)."""


def gradient_reason(exercise: Exercise, case: Case, outcome: Outcome) -> str | None:
    """Why a right output would still not train, or None: the reference's gradients are the measure."""
    if not outcome.gradients and outcome.backward_error is None:
        return None  # not measured (no floating input, or an old worker)
    expected, error, values = gradient_report(exercise.reference, case)
    if error is not None or all(state == "missing" for state in expected.values()):
        return None  # the reference itself is not differentiated here: nothing to ask of the learner
    if outcome.backward_error is not None:
        return _backward_failure(outcome.backward_error)
    for name, state in expected.items():
        got = outcome.gradients.get(name)
        if state == "flows" and got in ("missing", "zero"):
            return tr("your output is right, but no gradient reaches `{name}`: something cuts the graph "
                      "(`.detach()`, `.data`, `torch.no_grad()`, or a new tensor made with `torch.tensor(...)`), "
                      "so nothing before your function could learn", name=name)
        if state in ("flows", "zero") and got == "non-finite":
            return tr("your output is right, but the gradient reaching `{name}` contains NaN or inf: a NaN or an "
                      "infinite value computed on the way (e.g. -inf added to the scores, or log(0)) poisons the "
                      "backward pass even where the output hides it; fill with `masked_fill` instead of adding",
                      name=name)
    for name, want in values.items():
        error = _gradient_error(outcome.gradient_values.get(name), want, exercise)
        if error is not None:
            return tr("your output is right, but the gradient reaching `{name}` is not the reference's (largest "
                      "difference {error:.3g}, where the reference's gradients reach {scale:.3g}): part of the "
                      "computation is cut from the graph (`.detach()`, `.data`, or computed under "
                      "`torch.no_grad()`), so training would follow the wrong slope", name=name, error=error,
                      scale=float(want.double().abs().max()))
    return None


def _backward_failure(error: str) -> str:
    """Why backward failed, by what it raised: an in-place write autograd needed, an operation torch has no
    derivative for, or (anything else) the error itself."""
    if "inplace operation" in error:
        return tr("your output is right, but backward through your function fails ({error}): an in-place write "
                  "such as `masked_fill_` or `w[...] = 0` on a tensor autograd still needs; use the out-of-place "
                  "form (`w = w.masked_fill(...)`)", error=error)
    if error.startswith("NotImplementedError") or "not implemented" in error:
        return tr("your output is right, but backward through your function fails ({error}): a step of it has no "
                  "derivative in torch (or your own autograd Function lacks a backward); compute that step with "
                  "operations torch can differentiate", error=error)
    return tr("your output is right, but backward through your function fails ({error}): training needs the "
              "backward pass to run through every step of your function", error=error)

def _gradient_error(got: torch.Tensor | None, want: torch.Tensor, exercise: Exercise) -> float | None:
    """The largest difference between two gradients when they are not close, else None (also when ``got`` is
    missing or has another shape: an old worker, or the states above already spoke)."""
    if not isinstance(got, torch.Tensor) or got.shape != want.shape or not got.is_floating_point():
        return None
    g, e = got.double(), want.double()
    scale = float(e.abs().max()) if e.numel() else 0.0
    rtol = max(_HALF_PRECISION.get(want.dtype, 0.0), 10 * exercise.rtol, 1e-3)
    atol = max(exercise.atol, rtol * scale, 1e-6)
    if torch.allclose(g, e, rtol=rtol, atol=atol):
        return None
    return float((g - e).abs().max())
