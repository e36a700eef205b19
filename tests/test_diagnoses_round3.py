"""Diagnoses that a fresh learner review found wrong or vague (issue 34, third round), each pinned.

- A finite fill followed by the fully-masked guard reads the same diagnosis as the fill alone, and
  float16's -65504 used on float32 scores is told apart from -1e4 (a row whose allowed scores lie
  between them leaks under one and not the other).
- An observation read from the probes' own inputs cites the learner's first failing case as such.
- A running max that should stay -inf but holds -1e9 is named; a dS that does not vanish with dO = 0
  is named; a scale of 1/sqrt(S) is read back as such; a dtype lost on a failing case is reported in
  that case's own dtype.
"""

from __future__ import annotations

import math

import torch

from utils.exercises import at_scale, check, sdpa
from utils.exercises.check_cell import run_check


def _attention(q, k, v, mask=None, fill=float("-inf"), guard=True):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, fill)
    weights = scores.softmax(-1)
    if guard and mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    return weights @ v, weights


def _line(exercise, fn):
    return run_check(exercise, fn, quiet=True).message


def test_float16_min_fill_with_the_guard_is_named_and_not_taken_for_minus_1e4():
    line = _line(sdpa.SDPA, lambda q, k, v, mask=None: _attention(q, k, v, mask, fill=-65504.0))
    assert line.startswith("you replace the blocked scores by -65504"), line
    line = _line(sdpa.SDPA, lambda q, k, v, mask=None: _attention(q, k, v, mask, fill=-1e4))
    assert line.startswith("you replace the blocked scores by -1e4"), line  # named, with no hedge
    assert "known slip" not in line


def test_the_dtype_own_minimum_with_the_guard_is_right_for_finite_scores():
    def finfo_fill(q, k, v, mask=None):
        return _attention(q, k, v, mask, fill=torch.finfo(q.dtype).min)

    assert run_check(sdpa.SDPA, finfo_fill, quiet=True).passed  # the chapter says so (ch2-48)


def test_a_probe_observation_cites_the_first_failing_case_as_such():
    def rolled_identity(k, d_model):  # a shift matrix that is no rotation at all
        return torch.roll(torch.eye(d_model), k, dims=1)

    line = check.relative_shift_matrix(rolled_identity, quiet=True).message
    assert "(first failing case: case " in line, line


def test_minus_1e9_for_minus_inf_in_the_running_max_is_named():
    def clamped(running_max, running_sum, block):
        new_max = torch.maximum(running_max, block.amax(dim=-1)).clamp_min(-1e9)
        shift = new_max
        return new_max, running_sum * torch.exp(running_max - shift) + torch.exp(block - shift[..., None]).sum(-1)

    line = _line(at_scale.ONLINE, clamped)
    assert "-1e9" in line and "-inf" in line, line
    assert not line.startswith("your new max is wrong"), line


def test_a_block_gradient_that_does_not_vanish_with_grad_out_is_named():
    def from_out(grad_out, out, weights, value):  # dP from O instead of dO
        delta = (grad_out * out).sum(-1, keepdim=True)
        return weights * (out @ value.transpose(-2, -1) - delta)

    line = _line(at_scale.BLOCK_GRAD, from_out)
    assert "with grad_out = 0 your dS must be 0" in line, line


def test_a_lost_dtype_is_reported_in_the_failing_case_own_dtype():
    def upcast(running_max, running_sum, block):
        m, s, b = running_max.float(), running_sum.float(), block.float()
        new_max = torch.maximum(m, b.amax(dim=-1))
        shift = torch.where(new_max == float("-inf"), 0.0, new_max)
        return new_max, s * torch.exp(m - shift) + torch.exp(b - shift[..., None]).sum(-1)

    line = _line(at_scale.ONLINE, upcast)
    assert "float64 inputs come back" not in line and "expected torch.float16" in line, line


def test_a_max_over_the_wrong_dim_is_read_on_square_blocks():
    """Taking the block's max over dim 0 runs on a square block: the probe's blocks are square, so it sees the
    wrong max instead of an error, and no unrelated slip leads the line."""
    def max_over_dim0(running_max, running_sum, block):
        new_max = torch.maximum(running_max, block.amax(dim=0))
        shift = torch.where(new_max == float("-inf"), 0.0, new_max)
        return new_max, running_sum * torch.exp(running_max - shift) + torch.exp(block - shift[..., None]).sum(-1)

    line = _line(at_scale.ONLINE, max_over_dim0)
    assert line.startswith("your new max is wrong on the first block"), line


def test_layer_norm_weight_and_bias_swapped_is_named():
    import torch.nn.functional as F

    from utils.exercises import transformer

    def layer(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2, ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads):
        N, L, E = x.shape
        D = E // num_heads
        h = F.layer_norm(x, (E,), ln1_bias, ln1_weight)  # weight and bias swapped
        q, k, v = ((h @ w).view(N, L, num_heads, D).transpose(1, 2) for w in (w_q, w_k, w_v))
        a = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(D), -1) @ v
        x = x + a.transpose(1, 2).reshape(N, L, E) @ w_o
        h = F.layer_norm(x, (E,), ln2_bias, ln2_weight)
        return x + torch.relu(h @ w1 + b1) @ w2 + b2

    line = _line(transformer.ENCODER_PRE_LN, layer)
    assert line.startswith("your output equals the reference's with each LayerNorm's weight and bias swapped"), line
