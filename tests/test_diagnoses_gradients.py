"""A right output with wrong gradients fails (issue 38, D7c item 1).

An exercise that is trained through (``gradients=True``) used to ask only whether a gradient reaches each input:
RMSNorm with its factor ``.detach()``-ed, or computed under ``torch.no_grad()``, passed, because x still gets a
gradient (through the multiplication), just not the right one. The judge now compares the learner's gradients
along a fixed direction with the reference's (:mod:`utils.exercises.gradient_check`), in the check cell and
across the grader's sandbox boundary.
"""

from __future__ import annotations

import contextlib
import io
import math

import pytest
import torch

from utils.exercises import check, get
from utils.exercises.common import Outcome, cotangent, gradient_report
from utils.exercises.runner import run_cases
from utils.grading import serialize
from utils.i18n.messages import using_language


def _rsqrt(x, eps):
    return torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def rms_norm__detached_factor(x, weight, eps=1e-6):
    return x * _rsqrt(x, eps).detach() * weight


def rms_norm__factor_without_grad(x, weight, eps=1e-6):
    with torch.no_grad():
        factor = _rsqrt(x, eps)
    return x * factor * weight


def rms_norm__right(x, weight, eps=1e-6):
    return x * _rsqrt(x, eps) * weight


def sdpa__detached_denominator(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    e = (scores - scores.amax(-1, keepdim=True).detach()).exp()
    weights = (e / e.sum(-1, keepdim=True).detach()).nan_to_num(0.0)  # the sum's gradient is cut
    return weights @ v, weights


def _verdict(name, fn, cases="public"):
    with using_language("en"), contextlib.redirect_stdout(io.StringIO()):
        return getattr(check, name)(fn, cases=cases, quiet=True)


@pytest.mark.parametrize("fn", [rms_norm__detached_factor, rms_norm__factor_without_grad])
def test_rms_norm_with_its_factor_cut_from_the_graph_fails_public_and_hidden(fn):
    public, hidden = _verdict("rms_norm", fn), _verdict("rms_norm", fn, "hidden")
    assert not public.passed and not hidden.passed, (public.line, hidden.line)
    assert public.category == "gradients", public.line
    assert "the gradient reaching `x` is not the reference's" in public.message, public.message
    assert "(gradients)" in hidden.message, hidden.message


def test_a_right_rms_norm_still_passes_with_its_gradients_compared():
    assert _verdict("rms_norm", rms_norm__right).passed
    assert _verdict("rms_norm", rms_norm__right, "hidden").passed


def test_every_trained_exercise_compares_gradient_values_not_only_their_arrival():
    """ch2's attention with a detached softmax denominator: a gradient arrives at q, k and v, a wrong one."""
    exercise = get("ch2.scaled_dot_product_attention")
    outcome = run_cases(sdpa__detached_denominator, exercise.public_cases()[:1], gradients=True)[0]
    assert outcome.gradients and set(outcome.gradients.values()) <= {"flows", "zero"}, outcome.gradients
    verdict = _verdict("scaled_dot_product_attention", sdpa__detached_denominator)
    assert not verdict.passed and "is not the reference's" in verdict.message, verdict.message


def test_the_gradients_are_taken_along_a_fixed_direction_that_a_sum_would_miss():
    """A softmax's rows sum to 1 whatever its scores: the gradient of their sum is 0, along the cotangent not."""
    x = torch.randn(3, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    summed = torch.autograd.grad(x.requires_grad_().softmax(-1).sum(), x)[0]
    states, error, values = gradient_report(lambda x: x.softmax(-1), {"x": x.detach()})
    assert error is None and float(summed.abs().max()) < 1e-12
    assert float(values["x"].abs().max()) > 1e-2
    out = torch.zeros(3, 5)
    assert torch.equal(cotangent(out, 0), cotangent(out, 0)) and not torch.equal(cotangent(out, 0), cotangent(out, 1))


def test_gradient_values_cross_the_process_boundary_and_are_validated(tmp_path):
    folder = tmp_path / "out"
    grad = torch.linspace(-1, 1, 6).reshape(2, 3)
    outcome = Outcome(output=torch.ones(2), gradients={"x": "flows"},
                      gradient_values={"x": grad, "evil": torch.ones(2)})
    serialize.dump_outcomes([outcome], folder)
    loaded = serialize.load_outcomes(folder, ["x", "weight"])[0]
    assert list(loaded.gradient_values) == ["x"] and torch.equal(loaded.gradient_values["x"], grad)
