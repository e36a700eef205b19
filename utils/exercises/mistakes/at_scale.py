"""Plausible wrong answers to the exercises of chapter 6: the online-softmax update, one block's score
gradient, the sliding-window mask, one decoding step with a KV cache.

Each function is the ``fn`` of a :class:`~utils.exercises.definition.Mistake` declared, with its
diagnosis, in :mod:`utils.exercises.at_scale`: first those of ``ch6.online_softmax_update``, then those
of ``ch6.block_score_grad``, then those of ``ch6.sliding_window_mask``, then those of
``ch6.attend_with_cache``. Where a mistake changes the right answer's output, the right answer is written
out here (``_online_update``, ``_delta``, ``_window_mask``, ``_attend_with_cache``), as that module's
references compute it. Masks: True = may attend.
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


# --------------------------------------------------------------------------------------------------
# ch6.attend_with_cache
# --------------------------------------------------------------------------------------------------


def _attend_with_cache(q_new, k_new, v_new, k_cache, v_cache):
    """The right step, as :func:`utils.exercises.at_scale.attend_with_cache_reference`."""
    k_all = torch.cat([k_cache, k_new], dim=-2)  # (N, H, T + 1, D)
    v_all = torch.cat([v_cache, v_new], dim=-2)  # (N, H, T + 1, D)
    weights = torch.softmax(q_new @ k_all.transpose(-2, -1) / math.sqrt(q_new.shape[-1]), dim=-1)  # (N, H, 1, T + 1)
    return weights @ v_all, k_all, v_all


def _attend(query, key, value, scale=None, dim=-1):
    """Attention written out, as a learner writes it; ``scale`` and ``dim`` are what the mistakes change."""
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    return torch.softmax(query @ key.transpose(-2, -1) * scale, dim=dim) @ value


def _appended(k_new, v_new, k_cache, v_cache):
    return torch.cat([k_cache, k_new], dim=-2), torch.cat([v_cache, v_new], dim=-2)  # (N, H, T + 1, D) each


def _cache_only_new(q_new, k_new, v_new, k_cache, v_cache):
    k_all, v_all = _appended(k_new, v_new, k_cache, v_cache)
    return _attend(q_new, k_new, v_new), k_all, v_all


def _cache_before_append(q_new, k_new, v_new, k_cache, v_cache):  # also: the new key masked out
    k_all, v_all = _appended(k_new, v_new, k_cache, v_cache)
    return _attend(q_new, k_cache, v_cache), k_all, v_all


def _cache_prepend(q_new, k_new, v_new, k_cache, v_cache):
    k_all, v_all = torch.cat([k_new, k_cache], dim=-2), torch.cat([v_new, v_cache], dim=-2)
    return _attend(q_new, k_all, v_all), k_all, v_all


def _cache_not_updated(q_new, k_new, v_new, k_cache, v_cache):
    output, _, _ = _attend_with_cache(q_new, k_new, v_new, k_cache, v_cache)
    return output, k_cache, v_cache


def _cache_swapped(q_new, k_new, v_new, k_cache, v_cache):
    output, k_all, v_all = _attend_with_cache(q_new, k_new, v_new, k_cache, v_cache)
    return output, v_all, k_all


def _cache_no_scale(q_new, k_new, v_new, k_cache, v_cache):
    k_all, v_all = _appended(k_new, v_new, k_cache, v_cache)
    return _attend(q_new, k_all, v_all, scale=1.0), k_all, v_all


def _cache_scale_by_length(q_new, k_new, v_new, k_cache, v_cache):
    k_all, v_all = _appended(k_new, v_new, k_cache, v_cache)
    return _attend(q_new, k_all, v_all, scale=1 / math.sqrt(k_all.shape[-2])), k_all, v_all


def _cache_scale_by_d(q_new, k_new, v_new, k_cache, v_cache):
    k_all, v_all = _appended(k_new, v_new, k_cache, v_cache)
    return _attend(q_new, k_all, v_all, scale=1 / q_new.shape[-1]), k_all, v_all


def _cache_scale_by_model_dim(q_new, k_new, v_new, k_cache, v_cache):
    k_all, v_all = _appended(k_new, v_new, k_cache, v_cache)
    return _attend(q_new, k_all, v_all, scale=1 / math.sqrt(q_new.shape[1] * q_new.shape[-1])), k_all, v_all


def _cache_softmax_queries(q_new, k_new, v_new, k_cache, v_cache):
    k_all, v_all = _appended(k_new, v_new, k_cache, v_cache)
    return _attend(q_new, k_all, v_all, dim=-2), k_all, v_all


def _cache_first_key_only(q_new, k_new, v_new, k_cache, v_cache):
    # causal_mask(S)[0], tril(ones(1, S)) or is_causal=True with one query: top-left aligned, key 0 only
    k_all, v_all = _appended(k_new, v_new, k_cache, v_cache)
    return _attend(q_new, k_all[..., :1, :], v_all[..., :1, :]), k_all, v_all


def _cache_weights(q_new, k_new, v_new, k_cache, v_cache):
    k_all, v_all = _appended(k_new, v_new, k_cache, v_cache)
    return torch.softmax(q_new @ k_all.transpose(-2, -1) / math.sqrt(q_new.shape[-1]), dim=-1), k_all, v_all


def _cache_query_appended(q_new, k_new, v_new, k_cache, v_cache):
    k_all, v_all = _appended(q_new, v_new, k_cache, v_cache)
    return _attend(q_new, k_all, v_all), k_all, v_all


def _cache_squeezed(q_new, k_new, v_new, k_cache, v_cache):
    output, k_all, v_all = _attend_with_cache(q_new, k_new, v_new, k_cache, v_cache)
    return output.squeeze(-2), k_all, v_all


def _cache_values_not_appended(q_new, k_new, v_new, k_cache, v_cache):
    k_all = torch.cat([k_cache, k_new], dim=-2)
    return _attend(q_new, k_all, v_cache), k_all, torch.cat([v_cache, v_new], dim=-2)  # raises: T + 1 vs T


def _cache_cat_last(q_new, k_new, v_new, k_cache, v_cache):
    k_all, v_all = torch.cat([k_cache, k_new], dim=-1), torch.cat([v_cache, v_new], dim=-1)  # raises
    return _attend(q_new, k_all, v_all), k_all, v_all


def _cache_cat_heads(q_new, k_new, v_new, k_cache, v_cache):
    k_all, v_all = torch.cat([k_cache, k_new], dim=1), torch.cat([v_cache, v_new], dim=1)  # raises
    return _attend(q_new, k_all, v_all), k_all, v_all


def _cache_stack(q_new, k_new, v_new, k_cache, v_cache):
    k_all, v_all = torch.stack([k_cache, k_new], dim=-2), torch.stack([v_cache, v_new], dim=-2)  # raises
    return _attend(q_new, k_all, v_all), k_all, v_all


def _cache_no_transpose(q_new, k_new, v_new, k_cache, v_cache):
    k_all, v_all = _appended(k_new, v_new, k_cache, v_cache)
    return torch.softmax(q_new @ k_all / math.sqrt(q_new.shape[-1]), dim=-1) @ v_all, k_all, v_all  # raises
