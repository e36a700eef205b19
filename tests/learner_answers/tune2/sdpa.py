"""Wrong learner answers to chapter 2 (sdpa), tune half of the second batch: see
tests/learner_answers/README.md."""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401

L = 5  # the notebook's sequence length: N, L, D, Dv = 1, len(tokens), 8, 4


def causal_mask__loop_from_one(size):
    mask = torch.zeros(size, size, dtype=torch.bool)
    for i in range(1, size):  # row 0 "has no past"
        mask[i, : i + 1] = True
    return mask


def padding_mask__positions_from_one(lengths, max_len):
    positions = torch.arange(1, max_len + 1)  # positions 1..max_len
    return (positions[None, :] < lengths[:, None])[:, None, None, :]


def padding_mask__expanded_square(lengths, max_len):
    mask = (torch.arange(max_len)[None, :] < lengths[:, None])[:, None, None, :]
    return mask.expand(-1, 1, max_len, max_len)  # one row per query, as the scores


def scaled_dot_product_attention__scale_on_values(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    return weights @ (v / math.sqrt(q.shape[-1])), weights


def scaled_dot_product_attention__masked_branch_dim1(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is None:
        weights = F.softmax(scores, dim=-1)
    else:
        scores = scores.masked_fill(~mask, float("-inf"))
        weights = F.softmax(scores, dim=1)
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    return weights @ v, weights


def scaled_dot_product_attention__transpose_1_2(q, k, v, mask=None):
    scores = q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])  # (N, L, D) @ (N, D, S)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    return weights @ v, weights


ANSWERS = [
    {"exercise": "ch2.causal_mask", "fn": causal_mask__loop_from_one,
     "mistake": "the loop starts at row 1, so query 0 may not attend to itself (row 0 all False)",
     "part": "the first row"},
    {"exercise": "ch2.padding_mask", "fn": padding_mask__positions_from_one,
     "mistake": "counts positions from 1, so the last real token of every sentence is marked as padding",
     "part": "the last real token (off by one)"},
    {"exercise": "ch2.padding_mask", "fn": padding_mask__expanded_square,
     "mistake": "expands the mask to (N, 1, max_len, max_len), one row per query, instead of (N, 1, 1, max_len)",
     "part": "the shape (a query axis of size max_len)"},
    {"exercise": "ch2.scaled_dot_product_attention", "fn": scaled_dot_product_attention__scale_on_values,
     "mistake": "divides the values by sqrt(D) instead of the scores",
     "part": "the scale (applied to V)"},
    {"exercise": "ch2.scaled_dot_product_attention", "fn": scaled_dot_product_attention__masked_branch_dim1,
     "mistake": "in the masked branch only, takes the softmax over dim 1 instead of the keys' dim -1",
     "part": "the softmax dim when a mask is given"},
    {"exercise": "ch2.scaled_dot_product_attention", "fn": scaled_dot_product_attention__transpose_1_2,
     "mistake": "transposes k with transpose(1, 2), right for (N, S, D) only: 2-D and 4-D (heads) inputs break",
     "part": "the transpose of k for other than 3-D inputs"},
]
