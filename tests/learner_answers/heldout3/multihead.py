"""Wrong answers to chapter 3, batch 3, heldout3 half: written blind, from the notebook only."""

import math

import torch
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F

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


def split_heads__notebook_shapes(x, num_heads):
    return x.view(N, L, num_heads, D).transpose(1, 2)


def split_heads__stacks_heads_first(x, num_heads):
    return torch.stack(x.chunk(num_heads, dim=-1), dim=0)


def merge_heads__sums_heads(x):
    return x.sum(dim=1)


def merge_heads__flatten_from_dim_one(x):
    return x.transpose(1, 2).flatten(1)


def multi_head_attention__mask_gets_head_dim(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    n, length, e = x.shape
    d = e // num_heads

    def split(t):
        return t.view(n, length, num_heads, d).transpose(1, 2)

    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    if mask is not None:
        mask = mask.unsqueeze(1)  # add the head dim so it broadcasts over H
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    out = (weights @ v).transpose(1, 2).reshape(n, length, e)
    return out @ w_o


def multi_head_attention__nan_to_num_on_output(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    n, length, e = x.shape
    d = e // num_heads

    def split(t):
        return t.view(n, length, num_heads, d).transpose(1, 2)

    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    out = (weights @ v).transpose(1, 2).reshape(n, length, e) @ w_o
    return torch.nan_to_num(out, nan=0.0)


def multi_head_attention__causal_by_default(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    n, length, e = x.shape
    d = e // num_heads

    def split(t):
        return t.view(n, length, num_heads, d).transpose(1, 2)

    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    if mask is None:  # no mask given: attend causally, as a decoder does
        mask = torch.tril(torch.ones(length, length, dtype=torch.bool))
    out = _attend(q, k, v, mask)
    return out.transpose(1, 2).reshape(n, length, e) @ w_o


def multi_head_attention__dropout_on_weights(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
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
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    weights = F.dropout(weights, p=0.1)  # as in the paper
    out = (weights @ v).transpose(1, 2).reshape(n, length, e)
    return out @ w_o


ANSWERS = [
    {
        "exercise": "ch3.split_heads",
        "fn": split_heads__notebook_shapes,
        "mistake": "views x with the notebook's global N, L and D instead of x's own shape",
        "part": "the shape read from notebook globals",
    },
    {
        "exercise": "ch3.split_heads",
        "fn": split_heads__stacks_heads_first,
        "mistake": "stacks the H chunks along dim 0, giving (H, N, L, D) with the heads before the batch",
        "part": "where the head dim goes",
    },
    {
        "exercise": "ch3.merge_heads",
        "fn": merge_heads__sums_heads,
        "mistake": "sums the heads instead of concatenating them, giving (N, L, D)",
        "part": "how the heads are combined",
    },
    {
        "exercise": "ch3.merge_heads",
        "fn": merge_heads__flatten_from_dim_one,
        "mistake": "flattens from dim 1 after the transpose, merging tokens with heads into (N, L*H*D)",
        "part": "the dims that are flattened",
    },
    {
        "exercise": "ch3.multi_head_attention",
        "fn": multi_head_attention__mask_gets_head_dim,
        "mistake": "unsqueezes the mask at dim 1 for the heads, which breaks a mask that already has them",
        "part": "the mask's broadcasting",
    },
    {
        "exercise": "ch3.multi_head_attention",
        "fn": multi_head_attention__nan_to_num_on_output,
        "mistake": "no guard on the weights; NaN from fully masked rows is zeroed only in the final output, "
        "which also wipes the other heads of that row",
        "part": "the guard for a query that sees no key",
    },
    {
        "exercise": "ch3.multi_head_attention",
        "fn": multi_head_attention__causal_by_default,
        "mistake": "applies a causal mask when mask is None, although the exercise's attention is unmasked then",
        "part": "a mask where none was given",
    },
    {
        "exercise": "ch3.multi_head_attention",
        "fn": multi_head_attention__dropout_on_weights,
        "mistake": "applies F.dropout(p=0.1) to the weights, which is on by default (training=True)",
        "part": "dropout on the attention weights",
    },
]
