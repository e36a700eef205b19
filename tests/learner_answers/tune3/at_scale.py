"""Wrong answers to chapter 6, batch 3, tune3 half: written blind, from the notebook only."""

import math

import torch
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def online_softmax_update__old_sum_not_rescaled(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.amax(dim=-1))
    shift = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
    return new_max, running_sum + torch.exp(block - shift[..., None]).sum(dim=-1)


def online_softmax_update__rescale_inverted(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.amax(dim=-1))
    shift = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
    old = running_sum * torch.exp(shift - running_max)
    old = torch.where(torch.isinf(new_max), torch.zeros_like(old), old)
    return new_max, old + torch.exp(block - shift[..., None]).sum(dim=-1)


def online_softmax_update__float32_accumulation(running_max, running_sum, block):
    m, s, b = running_max.float(), running_sum.float(), block.float()  # float32 for precision
    new_max = torch.maximum(m, b.amax(dim=-1))
    shift = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
    return new_max, s * torch.exp(m - shift) + torch.exp(b - shift[..., None]).sum(dim=-1)


def block_score_grad__sign_flipped(grad_out, out, weights, value):
    d_p = grad_out @ value.transpose(-2, -1)
    d = (grad_out * out).sum(dim=-1, keepdim=True)
    return weights * (d - d_p)


def block_score_grad__no_weights_factor(grad_out, out, weights, value):
    d_p = grad_out @ value.transpose(-2, -1)
    d = (grad_out * out).sum(dim=-1, keepdim=True)
    return d_p - d


def sliding_window_mask__strict_inequality(L, window):
    i = torch.arange(L)
    return (i[:, None] - i[None, :]).abs() < window


def sliding_window_mask__past_only(L, window):
    i = torch.arange(L)
    offset = i[:, None] - i[None, :]
    return (offset >= 0) & (offset <= window)


def sliding_window_mask__triu_sign(L, window):
    ones = torch.ones(L, L, dtype=torch.bool)
    return torch.triu(ones, diagonal=window) & torch.tril(ones, diagonal=window)


def attend_with_cache__attends_before_append(q_new, k_new, v_new, k_cache, v_cache):
    weights = torch.softmax(q_new @ k_cache.transpose(-2, -1) / math.sqrt(q_new.shape[-1]), dim=-1)
    out = weights @ v_cache
    return out, torch.cat([k_cache, k_new], dim=-2), torch.cat([v_cache, v_new], dim=-2)


def attend_with_cache__first_causal_row(q_new, k_new, v_new, k_cache, v_cache):
    k_cache = torch.cat([k_cache, k_new], dim=-2)
    v_cache = torch.cat([v_cache, v_new], dim=-2)
    s = k_cache.shape[-2]
    mask = torch.tril(torch.ones(s, s, dtype=torch.bool))[:1]  # the row of the one new query
    scores = q_new @ k_cache.transpose(-2, -1) / math.sqrt(q_new.shape[-1])
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    return weights @ v_cache, k_cache, v_cache


def attend_with_cache__softmax_over_query_axis(q_new, k_new, v_new, k_cache, v_cache):
    k_cache = torch.cat([k_cache, k_new], dim=-2)
    v_cache = torch.cat([v_cache, v_new], dim=-2)
    weights = torch.softmax(q_new @ k_cache.transpose(-2, -1) / math.sqrt(q_new.shape[-1]), dim=-2)
    return weights @ v_cache, k_cache, v_cache


ANSWERS = [
    {
        "exercise": "ch6.online_softmax_update",
        "fn": online_softmax_update__old_sum_not_rescaled,
        "mistake": "adds the new block's terms to the old sum without rescaling it by exp(m - m')",
        "part": "the rescaling of the running sum",
    },
    {
        "exercise": "ch6.online_softmax_update",
        "fn": online_softmax_update__rescale_inverted,
        "mistake": "rescales the old sum by exp(m' - m) instead of exp(m - m')",
        "part": "the rescaling of the running sum",
    },
    {
        "exercise": "ch6.online_softmax_update",
        "fn": online_softmax_update__float32_accumulation,
        "mistake": "casts the inputs to float32 for precision and returns float32 for float16/float64 inputs",
        "part": "the dtype of the outputs",
    },
    {
        "exercise": "ch6.block_score_grad",
        "fn": block_score_grad__sign_flipped,
        "mistake": "computes P * (D - dP), the sign flipped",
        "part": "the sign of dS",
    },
    {
        "exercise": "ch6.block_score_grad",
        "fn": block_score_grad__no_weights_factor,
        "mistake": "returns dP - D, forgetting the elementwise factor P",
        "part": "the factor P",
    },
    {
        "exercise": "ch6.sliding_window_mask",
        "fn": sliding_window_mask__strict_inequality,
        "mistake": "uses |i - j| < window, dropping the keys exactly window away",
        "part": "the edge of the window",
    },
    {
        "exercise": "ch6.sliding_window_mask",
        "fn": sliding_window_mask__past_only,
        "mistake": "keeps only the past side of the window (0 <= i - j <= window), a causal window",
        "part": "the future side of the window",
    },
    {
        "exercise": "ch6.sliding_window_mask",
        "fn": sliding_window_mask__triu_sign,
        "mistake": "uses triu(diagonal=window) instead of triu(diagonal=-window), leaving one diagonal",
        "part": "the lower edge of the band",
    },
    {
        "exercise": "ch6.attend_with_cache",
        "fn": attend_with_cache__attends_before_append,
        "mistake": "attends over the old cache before appending, so the new token never sees its own key",
        "part": "the keys the new query attends to",
    },
    {
        "exercise": "ch6.attend_with_cache",
        "fn": attend_with_cache__first_causal_row,
        "mistake": "masks with the first row of causal_mask(T + 1) instead of the last, so it sees only key 0",
        "part": "a mask on the new query",
    },
    {
        "exercise": "ch6.attend_with_cache",
        "fn": attend_with_cache__softmax_over_query_axis,
        "mistake": "takes the softmax over dim -2, the single query, so every weight is 1",
        "part": "the softmax dimension",
    },
]
