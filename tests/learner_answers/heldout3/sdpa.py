"""Wrong answers to chapter 2, batch 3, heldout3 half: written blind, from the notebook only."""

import math

import torch
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401

L = 5  # the notebook's global from section 1: five tokens


def scaled_dot_product_attention__scale_by_key_count(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-2])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    return weights @ v, weights


def scaled_dot_product_attention__softmax_over_queries(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-2)
    weights = torch.nan_to_num(weights, nan=0.0)
    return weights @ v, weights


def scaled_dot_product_attention__finfo_min_fill(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(torch.float16).min)  # -65504: fits every dtype
    weights = scores.softmax(dim=-1)
    if mask is not None:
        weights = weights * mask.any(-1, keepdim=True)
    return weights @ v, weights


def scaled_dot_product_attention__scales_q_in_place(q, k, v, mask=None):
    q /= math.sqrt(q.shape[-1])
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    return weights @ v, weights


def causal_mask__strictly_below_diagonal(size):
    return torch.tril(torch.ones(size, size, dtype=torch.bool), diagonal=-1)


def causal_mask__notebook_length(size):
    return torch.tril(torch.ones(L, L, dtype=torch.bool))


def padding_mask__masks_queries(lengths, max_len):
    keep = torch.arange(max_len)[None, :] < lengths[:, None]
    return keep[:, None, :, None]


def padding_mask__view_of_positions_by_batch(lengths, max_len):
    keep = torch.arange(max_len)[:, None] < lengths  # (max_len, N)
    return keep.reshape(-1, 1, 1, max_len)


ANSWERS = [
    {
        "exercise": "ch2.scaled_dot_product_attention",
        "fn": scaled_dot_product_attention__scale_by_key_count,
        "mistake": "divides the scores by sqrt(S), the number of keys, instead of sqrt(D)",
        "part": "the scale of the scores",
    },
    {
        "exercise": "ch2.scaled_dot_product_attention",
        "fn": scaled_dot_product_attention__softmax_over_queries,
        "mistake": "takes the softmax over the queries (dim=-2) instead of over the keys",
        "part": "the softmax dimension",
    },
    {
        "exercise": "ch2.scaled_dot_product_attention",
        "fn": scaled_dot_product_attention__finfo_min_fill,
        "mistake": "fills the blocked scores with finfo(float16).min = -65504, a finite fill, instead of -inf",
        "part": "the value the blocked scores are filled with",
    },
    {
        "exercise": "ch2.scaled_dot_product_attention",
        "fn": scaled_dot_product_attention__scales_q_in_place,
        "mistake": "scales q in place with q /= sqrt(D), changing the caller's tensor",
        "part": "the input q, modified in place",
    },
    {
        "exercise": "ch2.causal_mask",
        "fn": causal_mask__strictly_below_diagonal,
        "mistake": "uses tril(diagonal=-1), so a query may not attend to its own key",
        "part": "the diagonal of the mask",
    },
    {
        "exercise": "ch2.causal_mask",
        "fn": causal_mask__notebook_length,
        "mistake": "builds the mask with the notebook's global L = 5 instead of the size argument",
        "part": "the size read from a notebook global",
    },
    {
        "exercise": "ch2.padding_mask",
        "fn": padding_mask__masks_queries,
        "mistake": "puts the positions on the query axis, returning (N, 1, max_len, 1) instead of (N, 1, 1, max_len)",
        "part": "the axis of the positions",
    },
    {
        "exercise": "ch2.padding_mask",
        "fn": padding_mask__view_of_positions_by_batch,
        "mistake": "builds a (max_len, N) comparison and reshapes it to (N, 1, 1, max_len) without transposing",
        "part": "the layout of the (positions, batch) comparison",
    },
]
