"""Red team R23 (issue 35): a wrong backward pass got full marks when it refused to run a second time.

The gradient check differentiates twice through one graph: once to say whether a gradient reaches each input,
once along a fixed cotangent to compare the values. A failure of the second pass was swallowed and a NaN there
dropped, so nothing was compared (ch7 ``rms_norm`` 1/1 locally, on Gradescope and in the nbgrader judge). Now the
second pass's error is the backward error and its NaN a non-finite gradient.
"""

from __future__ import annotations

import pytest
import torch

from utils.exercises import get
from utils.exercises.check_cell import run_public_check
from utils.exercises.common import gradient_report
from utils.exercises.runner import load_function

ONCE = (
    'class _RMS(torch.autograd.Function):\n'
    '    @staticmethod\n'
    '    def forward(ctx, x, weight, eps):\n'
    '        r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)\n'
    '        ctx.r, ctx.w, ctx.x, ctx.used = r, weight, x, False\n'
    '        return x * r * weight\n'
    '\n'
    '    @staticmethod\n'
    '    def backward(ctx, g):\n'
    '        if ctx.used:\n'
    '            raise RuntimeError("this backward runs once")\n'
    '        ctx.used = True\n'
    '        # wrong on purpose: the projection term of d rms / d x is left out\n'
    '        return g * ctx.r * ctx.w, (g * ctx.x * ctx.r).reshape(-1, ctx.w.shape[-1]).sum(0), None\n'
    '\n'
    '\n'
    'def rms_norm(x, weight, eps=1e-6):\n'
    '    return _RMS.apply(x, weight, eps)\n'
)
NAN_SECOND = (
    'class _RMS(torch.autograd.Function):\n'
    '    @staticmethod\n'
    '    def forward(ctx, x, weight, eps):\n'
    '        r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)\n'
    '        ctx.r, ctx.w, ctx.x, ctx.n = r, weight, x, 0\n'
    '        return x * r * weight\n'
    '\n'
    '    @staticmethod\n'
    '    def backward(ctx, g):\n'
    '        ctx.n += 1\n'
    '        gx = g * ctx.r * ctx.w  # wrong on purpose: no projection term\n'
    '        if ctx.n > 1:\n'
    '            gx = gx * float("nan")\n'
    '        return gx, (g * ctx.x * ctx.r).reshape(-1, ctx.w.shape[-1]).sum(0), None\n'
    '\n'
    '\n'
    'def rms_norm(x, weight, eps=1e-6):\n'
    '    return _RMS.apply(x, weight, eps)\n'
)
GUARD = '        if ctx.used:\n            raise RuntimeError("this backward runs once")\n'
WRONG = ONCE.replace(GUARD, "")  # the same wrong backward, without the guard: a second run is allowed
assert WRONG != ONCE


class _Once(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.used = False
        return x * 2

    @staticmethod
    def backward(ctx, g):
        if ctx.used:
            raise RuntimeError("this backward runs once")
        ctx.used = True
        return g * 5  # wrong: d(2x)/dx is 2


def test_a_backward_that_refuses_a_second_run_is_a_backward_error():
    states, error, values = gradient_report(lambda x: _Once.apply(x), {"x": torch.randn(3)})
    assert error is not None and "this backward runs once" in error, (states, error, values)


@pytest.mark.parametrize("source", [ONCE, NAN_SECOND, WRONG], ids=["raises_second_time", "nan_second_time", "wrong"])
def test_a_wrong_backward_fails_the_check_however_it_behaves_on_a_second_run(source):
    fn = load_function(source, "rms_norm", ())
    verdict = run_public_check(get("ch7.rms_norm"), fn, quiet=True)
    assert not verdict.passed, verdict
    assert "gradient" in verdict.message or "backward" in verdict.message, verdict


def test_the_reference_and_a_right_function_still_pass():
    right = ("def rms_norm(x, weight, eps=1e-6):\n"
             "    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight\n")
    assert run_public_check(get("ch7.rms_norm"), load_function(right, "rms_norm", ()), quiet=True).passed
