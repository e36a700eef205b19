"""Wrong learner answers to chapter 3 (multihead), heldout half: see tests/learner_answers/README.md."""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401

d_model = 64  # a notebook variable from an earlier cell


def split_heads__features_interleaved(x, num_heads):
    N, L, E = x.shape
    D = E // num_heads
    return x.view(N, L, D, num_heads).permute(0, 3, 1, 2)


def split_heads__global_d_model(x, num_heads):
    N, L, _ = x.shape
    D = d_model // num_heads
    return x.reshape(N, L, num_heads, D).transpose(1, 2)


def split_heads__batch_of_one(x, num_heads):
    L, E = x.shape[-2:]
    return x.view(1, L, num_heads, E // num_heads).transpose(1, 2)


def merge_heads__no_transpose(x):
    N, H, L, D = x.shape
    return x.reshape(N, L, H * D)


def merge_heads__mean_of_heads(x):
    return x.mean(dim=1)


def merge_heads__view_after_transpose(x):
    N, H, L, D = x.shape
    return x.transpose(1, 2).view(N, L, H * D)


def multi_head_attention__scale_sqrt_e(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    N, L, E = x.shape
    D = E // num_heads
    q = (x @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (x @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (x @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(E)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    out = (weights @ v).transpose(1, 2).reshape(N, L, E)
    return out @ w_o


def multi_head_attention__softmax_dim_2(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    N, L, E = x.shape
    D = E // num_heads
    q = (x @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (x @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (x @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=2)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    out = (weights @ v).transpose(1, 2).reshape(N, L, E)
    return out @ w_o


def merge_heads__flatten_from_1(x):
    return x.transpose(1, 2).flatten(1)


def multi_head_attention__k_from_w_q(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    N, L, E = x.shape
    D = E // num_heads
    q = (x @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (x @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    v = (x @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return (weights @ v).transpose(1, 2).reshape(N, L, E) @ w_o


def multi_head_attention__dropout_on_weights(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    N, L, E = x.shape
    D = E // num_heads
    q = (x @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (x @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (x @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = F.dropout(scores.softmax(dim=-1), p=0.1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return (weights @ v).transpose(1, 2).reshape(N, L, E) @ w_o


ANSWERS = [
    {"exercise": "ch3.split_heads", "fn": split_heads__features_interleaved,
     "mistake": "views as (N, L, D, H) and permutes, so head h gets features h, h+H, h+2H, ... instead of a block",
     "part": "which features go to which head"},
    {"exercise": "ch3.split_heads", "fn": split_heads__global_d_model,
     "mistake": "computes D from the notebook variable d_model (= 64) instead of x's last dim",
     "part": "the head size (read from a notebook global)"},
    {"exercise": "ch3.split_heads", "fn": split_heads__batch_of_one,
     "mistake": "hard-codes a batch of one in the view, so any batch with N > 1 fails",
     "part": "the batch dim"},
    {"exercise": "ch3.merge_heads", "fn": merge_heads__no_transpose,
     "mistake": "reshapes (N, H, L, D) to (N, L, H*D) without moving the head axis back first",
     "part": "the missing transpose (token/head order)"},
    {"exercise": "ch3.merge_heads", "fn": merge_heads__mean_of_heads,
     "mistake": "averages the heads instead of concatenating them (returns (N, L, D))",
     "part": "combining the heads (mean instead of concatenation)"},
    {"exercise": "ch3.merge_heads", "fn": merge_heads__view_after_transpose,
     "mistake": "calls .view on the transposed, non-contiguous tensor, which raises",
     "part": "view on a non-contiguous tensor"},
    {"exercise": "ch3.multi_head_attention", "fn": multi_head_attention__scale_sqrt_e,
     "mistake": "scales the scores by 1/sqrt(E) instead of 1/sqrt(D) with D = E // H",
     "part": "the scale"},
    {"exercise": "ch3.multi_head_attention", "fn": multi_head_attention__softmax_dim_2,
     "mistake": "takes the softmax over dim 2 of (N, H, L, S), the queries, instead of the keys",
     "part": "the softmax dimension"},
    {"exercise": "ch3.merge_heads", "fn": merge_heads__flatten_from_1,
     "mistake": "flattens from dim 1, merging the tokens into the features: (N, L*H*D)",
     "part": "the flatten start dim"},
    {"exercise": "ch3.multi_head_attention", "fn": multi_head_attention__k_from_w_q,
     "mistake": "a copy-paste slip: the keys are projected with w_q instead of w_k",
     "part": "the key projection"},
    {"exercise": "ch3.multi_head_attention", "fn": multi_head_attention__dropout_on_weights,
     "mistake": "leaves a dropout (p = 0.1, training mode) on the weights, so the output is random",
     "part": "dropout left active on the weights"},
]
