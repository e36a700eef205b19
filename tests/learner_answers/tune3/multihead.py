"""Wrong answers to chapter 3, batch 3, tune3 half: written blind, from the notebook only."""

import math

import torch
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401

N, L, E, H = 2, 5, 12, 3  # the notebook's globals from section 2
D = E // H


def _attend(q, k, v, mask):
    d = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    return weights @ v


def split_heads__transposes_last_two(x, num_heads):
    n, length, e = x.shape
    return x.view(n, length, num_heads, e // num_heads).transpose(-2, -1)


def split_heads__head_size_from_length(x, num_heads):
    n, length, e = x.shape
    d = x.shape[1] // num_heads
    return x.reshape(n, length, num_heads, d).transpose(1, 2)


def merge_heads__transposes_features(x):
    n, h, length, d = x.shape
    return x.transpose(2, 3).reshape(n, length, h * d)


def merge_heads__cat_over_batch(x):
    return torch.cat(list(x), dim=-1)


def multi_head_attention__keys_with_w_q(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    n, length, e = x.shape
    d = e // num_heads

    def split(t):
        return t.view(n, length, num_heads, d).transpose(1, 2)

    q, k, v = split(x @ w_q), split(x @ w_q), split(x @ w_v)
    out = _attend(q, k, v, mask)
    return out.transpose(1, 2).reshape(n, length, e) @ w_o


def multi_head_attention__notebook_e(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    n, length, _ = x.shape
    d = E // num_heads

    def split(t):
        return t.reshape(n, length, num_heads, d).transpose(1, 2)

    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    out = _attend(q, k, v, mask)
    return out.transpose(1, 2).reshape(n, length, -1) @ w_o


def multi_head_attention__guard_as_float(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    n, length, e = x.shape
    d = e // num_heads

    def split(t):
        return t.view(n, length, num_heads, d).transpose(1, 2)

    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    if mask is not None:
        has_key = mask.any(dim=-1, keepdim=True).float()
        weights = torch.nan_to_num(weights) * has_key
    out = (weights @ v.to(weights.dtype)).transpose(1, 2).reshape(n, length, e)
    return out @ w_o.to(out.dtype)


ANSWERS = [
    {
        "exercise": "ch3.split_heads",
        "fn": split_heads__transposes_last_two,
        "mistake": "after the view to (N, L, H, D) it transposes the last two dims, giving (N, L, D, H)",
        "part": "which dims are transposed",
    },
    {
        "exercise": "ch3.split_heads",
        "fn": split_heads__head_size_from_length,
        "mistake": "computes D from x.shape[1] (the length L) instead of the feature dim E",
        "part": "the head size D",
    },
    {
        "exercise": "ch3.merge_heads",
        "fn": merge_heads__transposes_features,
        "mistake": "transposes dims 2 and 3 (tokens with features) instead of 1 and 2 before the reshape",
        "part": "which dims are transposed",
    },
    {
        "exercise": "ch3.merge_heads",
        "fn": merge_heads__cat_over_batch,
        "mistake": "concatenates list(x), which iterates over the batch, not over the heads",
        "part": "the dim the concatenation runs over",
    },
    {
        "exercise": "ch3.multi_head_attention",
        "fn": multi_head_attention__keys_with_w_q,
        "mistake": "a copy-paste slip: the keys are projected with w_q instead of w_k",
        "part": "the key projection",
    },
    {
        "exercise": "ch3.multi_head_attention",
        "fn": multi_head_attention__notebook_e,
        "mistake": "computes the head size from the notebook's global E = 12 instead of x's feature dim",
        "part": "the head size read from a notebook global",
    },
    {
        "exercise": "ch3.multi_head_attention",
        "fn": multi_head_attention__guard_as_float,
        "mistake": "multiplies the weights by mask.any(...).float(), promoting float16 inputs to float32",
        "part": "the dtype of the output",
    },
]
