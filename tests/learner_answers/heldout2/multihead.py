"""Wrong learner answers to chapter 3 (multihead), heldout half of the second batch: see
tests/learner_answers/README.md."""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401

N, L, E, H = 2, 5, 12, 3  # a notebook cell: the shapes of the myth check


def _attend(q, k, v, mask, scale):
    scores = q @ k.transpose(-2, -1) * scale
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    return weights @ v


def split_heads__chunks_of_tokens(x, num_heads):
    return torch.stack(x.chunk(num_heads, dim=1), dim=1)  # one chunk per head


def split_heads__sequence_first_unpack(x, num_heads):
    length, n, e = x.shape  # (L, N, E) as in the tutorial
    return x.reshape(n, length, num_heads, e // num_heads).transpose(1, 2)


def merge_heads__permute_features_last(x):
    n, h, length, d = x.shape
    return x.permute(0, 2, 3, 1).reshape(n, length, h * d)


def merge_heads__squeeze_batch(x):
    x = x.squeeze(0)  # (H, L, D) for one sentence
    h, length, d = x.shape[-3:]
    return x.transpose(0, 1).reshape(length, h * d).unsqueeze(0)


def multi_head_attention__query_prescaled(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    n, length, e = x.shape
    d = e // num_heads

    def split(t):
        return t.view(n, length, num_heads, d).transpose(1, 2)

    q = split(x @ w_q) / math.sqrt(d)  # scale the queries once, as in fairseq
    out = _attend(q, split(x @ w_k), split(x @ w_v), mask, 1 / math.sqrt(d))
    return out.transpose(1, 2).reshape(n, length, e) @ w_o


def multi_head_attention__masked_scores_zero(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    n, length, e = x.shape
    d = e // num_heads

    def split(t):
        return t.view(n, length, num_heads, d).transpose(1, 2)

    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)
    if mask is not None:
        scores = scores.masked_fill(~mask, 0.0)  # blocked scores to zero
    weights = scores.softmax(dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    out = weights @ v
    return out.transpose(1, 2).reshape(n, length, e) @ w_o


ANSWERS = [
    {"exercise": "ch3.split_heads", "fn": split_heads__chunks_of_tokens,
     "mistake": "chunks along the sequence dim (1) instead of the features, so each head gets L/H tokens",
     "part": "the dim that is split (tokens instead of features)"},
    {"exercise": "ch3.split_heads", "fn": split_heads__sequence_first_unpack,
     "mistake": "unpacks x.shape as (L, N, E), swapping N and L in the reshape: wrong whenever N != L",
     "part": "the batch and sequence sizes swapped"},
    {"exercise": "ch3.merge_heads", "fn": merge_heads__permute_features_last,
     "mistake": "permutes to (N, L, D, H) before the reshape, interleaving the heads' features",
     "part": "the order of the merged features"},
    {"exercise": "ch3.merge_heads", "fn": merge_heads__squeeze_batch,
     "mistake": "squeezes the batch dim, written for one sentence: wrong for N > 1",
     "part": "batches with N > 1"},
    {"exercise": "ch3.multi_head_attention", "fn": multi_head_attention__query_prescaled,
     "mistake": "scales q by 1/sqrt(D) and then the scores again: the scale applied twice",
     "part": "the scale"},
    {"exercise": "ch3.multi_head_attention", "fn": multi_head_attention__masked_scores_zero,
     "mistake": "fills the blocked scores with 0 instead of -inf, so blocked keys keep weight",
     "part": "the mask fill value"},
]
