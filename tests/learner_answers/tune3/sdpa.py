"""Wrong answers to chapter 2, batch 3, tune3 half: written blind, from the notebook only."""

import math

import torch
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def scaled_dot_product_attention__guard_checks_columns(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(dim=-2, keepdim=True), 0.0)
    return weights @ v, weights


def scaled_dot_product_attention__weights_in_float32(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores.float(), dim=-1)  # softmax in float32 for stability
    if mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    return weights.to(v.dtype) @ v, weights


def scaled_dot_product_attention__exp_without_max(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    e = torch.exp(scores)
    total = e.sum(dim=-1, keepdim=True)
    weights = torch.where(total > 0, e / total, torch.zeros_like(e))
    return weights @ v, weights


def scaled_dot_product_attention__mask_after_softmax(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    weights = scores.softmax(dim=-1)
    if mask is not None:
        weights = weights * mask
    return weights @ v, weights


def causal_mask__batch_and_head_dims(size):
    mask = torch.tril(torch.ones(size, size, dtype=torch.bool))
    return mask[None, None]


def causal_mask__true_means_blocked(size):
    return ~torch.tril(torch.ones(size, size, dtype=torch.bool))


def padding_mask__less_or_equal(lengths, max_len):
    keep = torch.arange(max_len) <= lengths[:, None]
    return keep[:, None, None, :]


def padding_mask__no_broadcast_dims(lengths, max_len):
    return torch.arange(max_len)[None, :] < lengths[:, None]


ANSWERS = [
    {
        "exercise": "ch2.scaled_dot_product_attention",
        "fn": scaled_dot_product_attention__guard_checks_columns,
        "mistake": "finds the fully masked rows with mask.any(dim=-2), checking key columns, so NaN rows stay NaN",
        "part": "the guard for a query that sees no key",
    },
    {
        "exercise": "ch2.scaled_dot_product_attention",
        "fn": scaled_dot_product_attention__weights_in_float32,
        "mistake": "takes the softmax in float32 and returns the weights as float32 for float16/float64 inputs",
        "part": "the dtype of the weights",
    },
    {
        "exercise": "ch2.scaled_dot_product_attention",
        "fn": scaled_dot_product_attention__exp_without_max,
        "mistake": "a hand-written softmax without subtracting the row max, which overflows for large scores",
        "part": "the softmax's numerical stability",
    },
    {
        "exercise": "ch2.scaled_dot_product_attention",
        "fn": scaled_dot_product_attention__mask_after_softmax,
        "mistake": "multiplies the weights by the mask after the softmax, so the kept weights no longer sum to 1",
        "part": "where the mask is applied",
    },
    {
        "exercise": "ch2.causal_mask",
        "fn": causal_mask__batch_and_head_dims,
        "mistake": "returns a (1, 1, size, size) mask, adding batch and head dims the exercise does not ask for",
        "part": "the shape of the mask",
    },
    {
        "exercise": "ch2.causal_mask",
        "fn": causal_mask__true_means_blocked,
        "mistake": "returns ~tril, nn.MultiheadAttention's convention where True means blocked",
        "part": "the polarity of the mask",
    },
    {
        "exercise": "ch2.padding_mask",
        "fn": padding_mask__less_or_equal,
        "mistake": "compares positions with <= lengths, so the first padding token counts as real",
        "part": "the comparison with the lengths",
    },
    {
        "exercise": "ch2.padding_mask",
        "fn": padding_mask__no_broadcast_dims,
        "mistake": "returns the (N, max_len) mask without the two broadcast dims for heads and queries",
        "part": "the shape of the mask",
    },
]
