"""Plausible wrong answers to three exercises of chapter 6: the online-softmax update, one block's score
gradient, the sliding-window mask (those of one decoding step with a KV cache are in
:mod:`utils.exercises.mistakes.at_scale_cache`).

Each function is the ``fn`` of a :class:`~utils.exercises.definition.Mistake` declared, with its
diagnosis, in :mod:`utils.exercises.at_scale`: first those of ``ch6.online_softmax_update``, then those
of ``ch6.block_score_grad``, then those of ``ch6.sliding_window_mask``. Where a mistake changes the right
answer's output, the right answer is written out here (``_online_update``, ``_delta``, ``_window_mask``),
as that module's references compute it. Masks: True = may attend.
"""

from __future__ import annotations

import math

import torch

_NEG_INF = float("-inf")


# --------------------------------------------------------------------------------------------------
# ch6.online_softmax_update
# --------------------------------------------------------------------------------------------------


def _online_update(running_max, running_sum, block):
    """The right update, as :func:`utils.exercises.at_scale.online_softmax_update_reference`."""
    new_max = torch.maximum(running_max, block.amax(dim=-1))  # (...,)
    shift = torch.where(new_max == _NEG_INF, 0.0, new_max)  # (...,): nothing but -inf so far -> no shift
    new_sum = running_sum * torch.exp(running_max - shift) + torch.exp(block - shift[..., None]).sum(-1)
    return new_max, new_sum


def _shifted_sum(running_max, running_sum, block, new_max):
    """The correct new sum for ``new_max``: the mistakes below change one thing each."""
    shift = torch.where(new_max == _NEG_INF, 0.0, new_max)
    return running_sum * torch.exp(running_max - shift) + torch.exp(block - shift[..., None]).sum(-1)


def _online_no_guard(running_max, running_sum, block):
    # also what a guard on only one of the two exponentials gives: the other is NaN in the same rows
    new_max = torch.maximum(running_max, block.amax(dim=-1))
    return new_max, running_sum * torch.exp(running_max - new_max) + torch.exp(block - new_max[..., None]).sum(-1)


def _online_clamped_max(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.amax(dim=-1)).clamp(min=-1e9)  # raises in float16
    return new_max, running_sum * torch.exp(running_max - new_max) + torch.exp(block - new_max[..., None]).sum(-1)


def _online_minus_1e9_everywhere(running_max, running_sum, block):  # -inf turned into -1e9 in the inputs
    block = block.masked_fill(block == float("-inf"), -1e9)  # raises in float16
    running_max = running_max.masked_fill(running_max == float("-inf"), -1e9)
    new_max = torch.maximum(running_max, block.amax(dim=-1))
    return new_max, running_sum * torch.exp(running_max - new_max) + torch.exp(block - new_max[..., None]).sum(-1)


def _online_no_rescale(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.amax(dim=-1))
    shift = torch.where(new_max == _NEG_INF, 0.0, new_max)
    return new_max, running_sum + torch.exp(block - shift[..., None]).sum(-1)


def _no_inf(values):
    """``values`` with -inf replaced by 0: a shift that cannot make NaN."""
    return torch.where(values == _NEG_INF, 0.0, values)


def _online_wrong_sign(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.amax(dim=-1))
    rescale = torch.exp(_no_inf(new_max) - _no_inf(running_max))  # upside down
    return new_max, running_sum * rescale + torch.exp(block - _no_inf(new_max)[..., None]).sum(-1)


def _online_block_max(running_max, running_sum, block):
    new_max = block.amax(dim=-1)
    return new_max, _shifted_sum(running_max, running_sum, block, new_max)


def _online_global_max(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.max())  # one max over every row at once
    return new_max, _shifted_sum(running_max, running_sum, block, new_max)


def _online_old_max_shift(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.amax(dim=-1))
    terms = torch.exp(block - _no_inf(running_max)[..., None])  # shifted by the old max
    return new_max, running_sum * torch.exp(running_max - _no_inf(new_max)) + terms.sum(-1)


def _online_history_guard(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.amax(dim=-1))
    shift = torch.where(torch.isfinite(running_max), new_max, torch.zeros_like(new_max))  # guards the old max
    return new_max, running_sum * torch.exp(running_max - shift) + torch.exp(block - shift[..., None]).sum(-1)


def _online_no_shift(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.amax(dim=-1))
    return new_max, running_sum + torch.exp(block).sum(-1)


def _online_sum_dim0(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.amax(dim=-1))
    shift = torch.where(new_max == _NEG_INF, 0.0, new_max)
    return new_max, running_sum * torch.exp(running_max - shift) + torch.exp(block - shift[..., None]).sum(0)


def _online_swapped(running_max, running_sum, block):
    new_max, new_sum = _online_update(running_max, running_sum, block)
    return new_sum, new_max


def _online_keepdim(running_max, running_sum, block):
    new_max, new_sum = _online_update(running_max, running_sum, block)
    return new_max[..., None], new_sum[..., None]


def _online_log_sum(running_max, running_sum, block):
    new_max, new_sum = _online_update(running_max, running_sum, block)
    return new_max, torch.log(new_sum)


def _online_logsumexp(running_max, running_sum, block):
    new_max, new_sum = _online_update(running_max, running_sum, block)
    return new_max, new_max + torch.log(new_sum)


def _online_max_tuple(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.max(dim=-1))  # TypeError: (values, indices)
    return new_max, _shifted_sum(running_max, running_sum, block, new_max)


def _online_python_max(running_max, running_sum, block):
    new_max = max(running_max, block.amax(dim=-1))  # RuntimeError for more than one row
    return new_max, _shifted_sum(running_max, running_sum, block, new_max)


def _online_exp_ratio(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.amax(dim=-1))
    shift = torch.where(new_max == _NEG_INF, 0.0, new_max)
    rescale = torch.exp(running_max) / torch.exp(shift)  # inf / inf = NaN once the scores pass 88 (float32)
    return new_max, running_sum * rescale + torch.exp(block - shift[..., None]).sum(-1)


# --------------------------------------------------------------------------------------------------
# ch6.block_score_grad
# --------------------------------------------------------------------------------------------------


def _grad_weights(grad_out, value):
    """dP = dO Vᵀ, (..., L, B): right in every mistake below but ``no_transpose``."""
    return grad_out @ value.transpose(-2, -1)


def _delta(grad_out, out):
    """The right D = rowsum(dO * O), (..., L, 1)."""
    return (grad_out * out).sum(-1, keepdim=True)


def _grad_block_delta(grad_out, out, weights, value):
    grad_weights = _grad_weights(grad_out, value)
    return weights * (grad_weights - (weights * grad_weights).sum(-1, keepdim=True))  # this block's keys only


def _grad_no_delta(grad_out, out, weights, value):
    return weights * _grad_weights(grad_out, value)


def _grad_plus_delta(grad_out, out, weights, value):
    return weights * (_grad_weights(grad_out, value) + _delta(grad_out, out))


def _grad_no_weights(grad_out, out, weights, value):
    return _grad_weights(grad_out, value) - _delta(grad_out, out)


def _grad_delta_wrong_axis(grad_out, out, weights, value):
    return weights * (_grad_weights(grad_out, value) - (grad_out * out).sum(-2, keepdim=True))  # (..., 1, Dv)


def _grad_delta_no_keepdim(grad_out, out, weights, value):
    return weights * (_grad_weights(grad_out, value) - (grad_out * out).sum(-1))  # (..., L) meets the B keys


def _grad_delta_from_value(grad_out, out, weights, value):
    return weights * (_grad_weights(grad_out, value) - (grad_out * value).sum(-1, keepdim=True))


def _grad_delta_matrix(grad_out, out, weights, value):
    return weights * (_grad_weights(grad_out, value) - grad_out @ out.transpose(-2, -1))  # (..., L, L)


def _grad_product_of_sums(grad_out, out, weights, value):
    delta = grad_out.sum(-1, keepdim=True) * out.sum(-1, keepdim=True)
    return weights * (_grad_weights(grad_out, value) - delta)


def _grad_delta_mean(grad_out, out, weights, value):
    return weights * (_grad_weights(grad_out, value) - (grad_out * out).mean(-1, keepdim=True))


def _grad_no_transpose(grad_out, out, weights, value):
    return weights * (grad_out @ value - _delta(grad_out, out))


def _grad_scaled(grad_out, out, weights, value):
    return weights * (_grad_weights(grad_out, value) - _delta(grad_out, out)) / math.sqrt(value.shape[-1])


def _grad_delta_outside(grad_out, out, weights, value):
    return weights * _grad_weights(grad_out, value) - _delta(grad_out, out)  # P ⊙ dP − D


def _grad_negated(grad_out, out, weights, value):
    return weights * (_delta(grad_out, out) - _grad_weights(grad_out, value))


def _grad_block_delta_renormalized(grad_out, out, weights, value):
    grad_weights = _grad_weights(grad_out, value)
    delta = (weights * grad_weights).sum(-1, keepdim=True) / weights.sum(-1, keepdim=True)  # NaN if P = 0
    return weights * (grad_weights - delta)


def _grad_renormalized_weights(grad_out, out, weights, value):
    return weights / weights.sum(-1, keepdim=True) * (_grad_weights(grad_out, value) - _delta(grad_out, out))


def _grad_diagonal_jacobian(grad_out, out, weights, value):
    return weights * (1 - weights) * _grad_weights(grad_out, value)  # p_j (1 − p_j): only j = k


def _grad_delta_out_only(grad_out, out, weights, value):
    return weights * (_grad_weights(grad_out, value) - out.sum(-1, keepdim=True))


def _grad_delta_grad_only(grad_out, out, weights, value):
    return weights * (_grad_weights(grad_out, value) - grad_out.sum(-1, keepdim=True))


def _grad_delta_total(grad_out, out, weights, value):
    return weights * (_grad_weights(grad_out, value) - (grad_out * out).sum())  # one number for everything


def _grad_scaled_up(grad_out, out, weights, value):
    return weights * (_grad_weights(grad_out, value) - _delta(grad_out, out)) * math.sqrt(value.shape[-1])


def _grad_full_transpose(grad_out, out, weights, value):
    reversed_value = value.permute(*range(value.dim() - 1, -1, -1))  # what value.T does beyond 2-D; raises
    return weights * (grad_out @ reversed_value - _delta(grad_out, out))


# --------------------------------------------------------------------------------------------------
# ch6.sliding_window_mask
# --------------------------------------------------------------------------------------------------


def _window_mask(L, window):
    """The right mask, as :func:`utils.exercises.at_scale.sliding_window_mask_reference`."""
    positions = torch.arange(L)
    return (positions[:, None] - positions[None, :]).abs() <= window  # (L, L)


def _distance(L: int) -> torch.Tensor:
    positions = torch.arange(L)
    return positions[:, None] - positions[None, :]  # (L, L): i - j, query i (row), key j (column)


def _window_strict(L, window):  # also `<= window - 1`
    return _distance(L).abs() < window


def _window_half_width(L, window):
    return _distance(L).abs() <= window // 2


def _window_double_width(L, window):
    return _distance(L).abs() <= 2 * window


def _window_past_only(L, window):  # also a causal mask combined with the window
    offset = _distance(L)
    return (offset >= 0) & (offset <= window)


def _window_future_only(L, window):
    offset = _distance(L)
    return (offset <= 0) & (offset >= -window)


def _window_no_abs(L, window):  # also triu(-window) alone
    return _distance(L) <= window


def _window_tril_only(L, window):
    return torch.ones(L, L, dtype=torch.bool).tril(window)


def _window_empty(L, window):  # triu and tril with their signs swapped
    return torch.ones(L, L, dtype=torch.bool).triu(window).tril(-window)


def _window_inverted(L, window):
    return ~_window_mask(L, window)


def _window_no_self(L, window):
    distance = _distance(L).abs()
    return (distance <= window) & (distance > 0)


def _window_loop_end(L, window):
    mask = torch.zeros(L, L, dtype=torch.bool)
    for i in range(L):
        mask[i, max(0, i - window):i + window] = True  # the slice end is exclusive
    return mask


def _window_loop_negative_start(L, window):
    mask = torch.zeros(L, L, dtype=torch.bool)
    for i in range(L):
        mask[i, i - window:i + window + 1] = True  # a negative start counts from the end
    return mask


def _window_long_after(L, window):  # tril(window + 1): one key too many after the query
    return torch.ones(L, L, dtype=torch.bool).triu(-window).tril(window + 1)


def _window_short_before(L, window):  # triu(-window + 1), or a loop starting at i - window + 1
    return torch.ones(L, L, dtype=torch.bool).triu(-window + 1).tril(window)


def _window_plus_one(L, window):
    return _distance(L).abs() <= window + 1
