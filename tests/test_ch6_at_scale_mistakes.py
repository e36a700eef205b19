"""Chapter 6's exercises against wrong answers found in a learner review: each, written as a learner would
write it (not the table's own function), gets ❌ and the diagnosis that names it, pointing to the cell
that explains it; right answers written other ways still get ✅."""

from __future__ import annotations

import math

import pytest
import torch

from utils.exercises import check

NEG_INF = float("-inf")


def _guarded_max(running_max, block):
    new_max = torch.maximum(running_max, block.amax(dim=-1))
    return new_max, torch.where(new_max == NEG_INF, 0.0, new_max)


def _exp_ratio(running_max, running_sum, block):  # exp(m) / exp(m'): overflows past 88 in float32
    new_max, shift = _guarded_max(running_max, block)
    rescale = torch.exp(running_max) / torch.exp(shift)
    return new_max, running_sum * rescale + torch.exp(block - shift[..., None]).sum(-1)


def _d_outside(grad_out, out, weights, value):
    return weights * (grad_out @ value.mT) - (grad_out * out).sum(-1, keepdim=True)


def _negated(grad_out, out, weights, value):
    return weights * ((grad_out * out).sum(-1)[..., None] - grad_out @ value.transpose(-2, -1))


def _renormalized_block_d(grad_out, out, weights, value):
    grad_weights = grad_out @ value.mT
    return weights * (grad_weights - (weights * grad_weights).sum(-1, keepdim=True) / weights.sum(-1, keepdim=True))


def _renormalized_weights(grad_out, out, weights, value):
    p = weights / weights.sum(dim=-1, keepdim=True)
    return p * (grad_out @ value.mT - (grad_out * out).sum(-1, keepdim=True))


def _sigmoid_like(grad_out, out, weights, value):
    return weights * (1 - weights) * (grad_out @ value.mT)


def _d_from_out(grad_out, out, weights, value):
    return weights * (grad_out @ value.mT - out.sum(-1, keepdim=True))


def _d_from_grad(grad_out, out, weights, value):
    return weights * (grad_out @ value.mT - grad_out.sum(-1, keepdim=True))


def _d_everything(grad_out, out, weights, value):
    return weights * (grad_out @ value.mT - torch.sum(grad_out * out))


def _times_sqrt(grad_out, out, weights, value):
    return weights * (grad_out @ value.mT - (grad_out * out).sum(-1, keepdim=True)) * value.shape[-1] ** 0.5


def _tril_plus_one(L, window):
    return torch.ones(L, L, dtype=torch.bool).triu(diagonal=-window).tril(diagonal=window + 1)


def _loop_start_late(L, window):
    mask = torch.zeros(L, L, dtype=torch.bool)
    for i in range(L):
        mask[i, max(0, i - window + 1):i + window + 1] = True
    return mask


def _window_plus_one(L, window):
    i = torch.arange(L)
    return (i[:, None] - i[None, :]).abs() <= window + 1


def _appended(k_new, v_new, k_cache, v_cache):
    return torch.cat([k_cache, k_new], dim=2), torch.cat([v_cache, v_new], dim=2)


def _scale_after_softmax(q_new, k_new, v_new, k_cache, v_cache):
    k, v = _appended(k_new, v_new, k_cache, v_cache)
    return (q_new @ k.mT).softmax(-1) / math.sqrt(q_new.shape[-1]) @ v, k, v


def _times_sqrt_d(q_new, k_new, v_new, k_cache, v_cache):
    k, v = _appended(k_new, v_new, k_cache, v_cache)
    return (q_new @ k.mT * math.sqrt(q_new.shape[-1])).softmax(-1) @ v, k, v


def _sqrt_cache_length(q_new, k_new, v_new, k_cache, v_cache):
    k, v = _appended(k_new, v_new, k_cache, v_cache)
    return (q_new @ k.mT / math.sqrt(k_cache.shape[2])).softmax(-1) @ v, k, v


def _weights_times_keys(q_new, k_new, v_new, k_cache, v_cache):
    k, v = _appended(k_new, v_new, k_cache, v_cache)
    return (q_new @ k.mT / math.sqrt(q_new.shape[-1])).softmax(-1) @ k, k, v


def _dot_t(q_new, k_new, v_new, k_cache, v_cache):
    k, v = _appended(k_new, v_new, k_cache, v_cache)
    return (q_new @ k.permute(3, 2, 1, 0) / math.sqrt(q_new.shape[-1])).softmax(-1) @ v, k, v  # = k.T


def _value_t(grad_out, out, weights, value):
    return weights * (grad_out @ value.permute(*reversed(range(value.ndim))) - (grad_out * out).sum(-1, keepdim=True))


def _cat_no_dim(q_new, k_new, v_new, k_cache, v_cache):
    k, v = torch.cat((k_cache, k_new)), torch.cat((v_cache, v_new))
    return (q_new @ k.mT / math.sqrt(q_new.shape[-1])).softmax(-1) @ v, k, v


_BACKWARD = "section 3"
REVIEW_BUGS = [
    ("online_softmax_update", _exp_ratio, ["exp(running_max) / exp(new_max)", "inf / inf", "section 2"]),
    ("block_score_grad", _d_outside, ["outside the product", _BACKWARD]),
    ("block_score_grad", _negated, ["wrong sign", _BACKWARD]),
    ("block_score_grad", _renormalized_block_d, ["divided by the block's weight sum", _BACKWARD]),
    ("block_score_grad", _renormalized_weights, ["must not be renormalized", "Exercise 2"]),
    ("block_score_grad", _sigmoid_like, ["diagonal of the softmax's Jacobian", _BACKWARD]),
    ("block_score_grad", _d_from_out, ["you summed O alone", _BACKWARD]),
    ("block_score_grad", _d_from_grad, ["you summed dO alone", _BACKWARD]),
    ("block_score_grad", _d_everything, ["over the last dim only", _BACKWARD]),
    ("block_score_grad", _times_sqrt, ["neither divided nor multiplied", _BACKWARD]),
    ("block_score_grad", _value_t, ["reverses all of them", "value.mT"]),
    ("sliding_window_mask", _tril_plus_one, ["one key too far *after*", "section 4"]),
    ("sliding_window_mask", _loop_start_late, ["misses the key `window` positions *before*", "section 4"]),
    ("sliding_window_mask", _window_plus_one, ["one key wider on each side", "section 4"]),
    ("attend_with_cache", _scale_after_softmax, ["after the softmax", "chapter 2"]),
    ("attend_with_cache", _times_sqrt_d, ["not by sqrt(D)"]),
    ("attend_with_cache", _sqrt_cache_length, ["cache length T"]),
    ("attend_with_cache", _weights_times_keys, ["not the keys"]),
    ("attend_with_cache", _dot_t, ["reverses all four dims", "k.mT"]),
    ("attend_with_cache", _cat_no_dim, ["without dim=", "dim=-2"]),
]


@pytest.mark.parametrize(("name", "fn", "words"), REVIEW_BUGS, ids=[fn.__name__ for _, fn, _ in REVIEW_BUGS])
def test_review_bug_fails_with_its_diagnosis(name, fn, words, capsys):
    verdict = getattr(check, name)(fn)
    missing = [word for word in words if word not in verdict.message]
    assert not verdict.passed and not missing, (missing, capsys.readouterr().out)


def online_softmax_update(running_max, running_sum, block):  # a log_softmax in disguise
    new_max, shift = _guarded_max(running_max, block)
    log_sum = block.amax(-1) - torch.log_softmax(block, dim=-1).amax(-1)  # logsumexp of the block
    return new_max, running_sum * torch.exp(running_max - shift) + torch.exp(torch.nan_to_num(log_sum) - shift)


def test_log_softmax_is_forbidden_in_the_online_update(capsys):
    verdict = check.online_softmax_update(online_softmax_update)
    capsys.readouterr()
    assert not verdict.passed
    assert "log_softmax" in verdict.message, verdict.message


def _clamp_to_finfo(running_max, running_sum, block):  # right: exp(-inf - finite) = 0
    new_max = torch.maximum(running_max, block.amax(dim=-1))
    shift = new_max.clamp(min=torch.finfo(new_max.dtype).min)
    return new_max, running_sum * torch.exp(running_max - shift) + torch.exp(block - shift[..., None]).sum(-1)


def _zero_nan_sums(running_max, running_sum, block):  # right: NaN only where the row has seen nothing
    new_max = torch.maximum(running_max, block.amax(dim=-1))
    new_sum = running_sum * torch.exp(running_max - new_max) + torch.exp(block - new_max[..., None]).sum(-1)
    return new_max, torch.where(new_sum.isnan(), torch.zeros_like(new_sum), new_sum)


@pytest.mark.parametrize("fn", [_clamp_to_finfo, _zero_nan_sums], ids=lambda fn: fn.__name__)
def test_right_online_updates_still_pass_at_large_scores(fn, capsys):
    assert check.online_softmax_update(fn).passed, capsys.readouterr().out
