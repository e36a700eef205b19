"""Wrong learner answers to chapter 2 (sdpa), heldout half: see tests/learner_answers/README.md."""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def scaled_dot_product_attention__softmax_over_queries(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-2)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    return weights @ v, weights


def causal_mask__no_self(size):
    return torch.tril(torch.ones(size, size, dtype=torch.bool), diagonal=-1)


def causal_mask__true_means_blocked(size):
    return torch.triu(torch.ones(size, size, dtype=torch.bool), diagonal=1)


def padding_mask__no_broadcast_dims(lengths, max_len):
    return torch.arange(max_len)[None, :] < lengths[:, None]


def padding_mask__one_pad_too_many(lengths, max_len):
    mask = torch.arange(max_len)[None, :] <= lengths[:, None]
    return mask[:, None, None, :]


def padding_mask__query_axis(lengths, max_len):
    mask = torch.arange(max_len)[None, :] < lengths[:, None]
    return mask[:, None, :, None]


def scaled_dot_product_attention__dropout_on_weights(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    weights = F.dropout(weights, p=0.1)
    return weights @ v, weights


def scaled_dot_product_attention__float32_softmax(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32)  # softmax in float32 for stability
    if mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    return (weights @ v.float()).to(q.dtype), weights


def scaled_dot_product_attention__output_guard_only(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    out = torch.nan_to_num(weights @ v, nan=0.0)
    return out, weights


def scaled_dot_product_attention__mask_unsqueezed(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        mask = mask.unsqueeze(1)  # add a head dim
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    return weights @ v, weights


def causal_mask__batch_dim_added(size):
    return torch.tril(torch.ones(size, size, dtype=torch.bool)).unsqueeze(0)


def padding_mask__transposed_then_reshaped(lengths, max_len):
    mask = torch.arange(max_len)[:, None] < lengths[None, :]  # (max_len, N)
    return mask.reshape(len(lengths), 1, 1, max_len)


ANSWERS = [
    {"exercise": "ch2.scaled_dot_product_attention", "fn": scaled_dot_product_attention__softmax_over_queries,
     "mistake": "takes the softmax over dim -2 (the queries), so columns sum to 1 instead of rows",
     "part": "the softmax dimension"},
    {"exercise": "ch2.causal_mask", "fn": causal_mask__no_self,
     "mistake": "tril with diagonal=-1 leaves out the diagonal: a query may not attend to itself",
     "part": "the diagonal"},
    {"exercise": "ch2.causal_mask", "fn": causal_mask__true_means_blocked,
     "mistake": "uses the True = blocked convention (nn.MultiheadAttention's), the exact inverse of the course's",
     "part": "the mask polarity"},
    {"exercise": "ch2.padding_mask", "fn": padding_mask__no_broadcast_dims,
     "mistake": "returns (N, max_len) without the two singleton dims for heads and queries",
     "part": "the shape (missing broadcast dims)"},
    {"exercise": "ch2.padding_mask", "fn": padding_mask__one_pad_too_many,
     "mistake": "compares with <= instead of <, so the first padding position counts as a real token",
     "part": "off by one at the end of each sentence"},
    {"exercise": "ch2.padding_mask", "fn": padding_mask__query_axis,
     "mistake": "puts the length axis on the queries, returning (N, 1, max_len, 1) instead of (N, 1, 1, max_len)",
     "part": "the axis of the mask (queries instead of keys)"},
    {"exercise": "ch2.scaled_dot_product_attention", "fn": scaled_dot_product_attention__dropout_on_weights,
     "mistake": "leaves a dropout (p = 0.1, training mode) on the weights, so the results are random",
     "part": "dropout left active on the weights"},
    {"exercise": "ch2.scaled_dot_product_attention", "fn": scaled_dot_product_attention__float32_softmax,
     "mistake": "takes the softmax in float32 and returns the float32 weights for a float16/float64 q",
     "part": "the dtype of the weights"},
    {"exercise": "ch2.scaled_dot_product_attention", "fn": scaled_dot_product_attention__output_guard_only,
     "mistake": "zeroes the NaN of fully blocked rows in the output only; their weights stay NaN",
     "part": "the weights of fully masked query rows"},
    {"exercise": "ch2.scaled_dot_product_attention", "fn": scaled_dot_product_attention__mask_unsqueezed,
     "mistake": "unsqueezes the mask at dim 1 as if it were (N, L, S), which breaks masks already shaped for heads",
     "part": "the mask's broadcasting"},
    {"exercise": "ch2.causal_mask", "fn": causal_mask__batch_dim_added,
     "mistake": "adds a leading batch dim, returning (1, size, size)",
     "part": "the shape (an extra dim)"},
    {"exercise": "ch2.padding_mask", "fn": padding_mask__transposed_then_reshaped,
     "mistake": "compares the other way round, getting (max_len, N), and fixes the shape with reshape, not a transpose",
     "part": "the layout (a reshape instead of a transpose scrambles the mask)"},
]
