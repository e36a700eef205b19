"""Wrong learner answers to chapter 2 (sdpa), tune half: see tests/learner_answers/README.md."""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401

d_k = 8  # a notebook variable from an earlier cell


def scaled_dot_product_attention__scale_by_value_dim(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(v.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    return weights @ v, weights


def scaled_dot_product_attention__mask_polarity(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    return weights @ v, weights


def scaled_dot_product_attention__no_empty_row_guard(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


def scaled_dot_product_attention__fill_minus_1e4(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e4)
    weights = scores.softmax(dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    return weights @ v, weights


def scaled_dot_product_attention__global_d_k(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    return weights @ v, weights


def causal_mask__triu(size):
    return torch.triu(torch.ones(size, size)).bool()


def causal_mask__float_ones(size):
    return torch.tril(torch.ones(size, size))


def causal_mask__sees_next_token(size):
    i = torch.arange(size)
    return i[None, :] <= i[:, None] + 1


def padding_mask__true_at_padding(lengths, max_len):
    mask = torch.arange(max_len)[None, :] >= lengths[:, None]
    return mask[:, None, None, :]


def padding_mask__longest_length(lengths, max_len):
    longest = int(lengths.max())
    mask = torch.arange(longest)[None, :] < lengths[:, None]
    return mask.unsqueeze(1).unsqueeze(2)


def padding_mask__left_padded(lengths, max_len):
    mask = torch.arange(max_len)[None, :] >= (max_len - lengths)[:, None]
    return mask.view(len(lengths), 1, 1, max_len)


def causal_mask__int_ones(size):
    return torch.tril(torch.ones(size, size, dtype=torch.long))


def padding_mask__float_mask(lengths, max_len):
    mask = (torch.arange(max_len)[None, :] < lengths[:, None]).float()
    return mask[:, None, None, :]


ANSWERS = [
    {"exercise": "ch2.scaled_dot_product_attention", "fn": scaled_dot_product_attention__scale_by_value_dim,
     "mistake": "scales the scores by 1/sqrt(Dv), the value width, instead of 1/sqrt(D)",
     "part": "the scale"},
    {"exercise": "ch2.scaled_dot_product_attention", "fn": scaled_dot_product_attention__mask_polarity,
     "mistake": "fills -inf where the mask is True, blocking the allowed keys and keeping the blocked ones",
     "part": "the mask polarity"},
    {"exercise": "ch2.scaled_dot_product_attention", "fn": scaled_dot_product_attention__no_empty_row_guard,
     "mistake": "never zeroes the rows whose keys are all blocked, so those rows come out NaN",
     "part": "fully masked query rows"},
    {"exercise": "ch2.scaled_dot_product_attention", "fn": scaled_dot_product_attention__fill_minus_1e4,
     "mistake": "fills blocked scores with -1e4 instead of -inf, which leaks weight when scores are of order 1e4",
     "part": "the fill value for blocked scores"},
    {"exercise": "ch2.scaled_dot_product_attention", "fn": scaled_dot_product_attention__global_d_k,
     "mistake": "scales by the notebook variable d_k (= 8) instead of the head size of the q argument",
     "part": "the scale (read from a notebook global)"},
    {"exercise": "ch2.causal_mask", "fn": causal_mask__triu,
     "mistake": "uses torch.triu, so each query sees itself and the future instead of the past",
     "part": "the triangle (future instead of past)"},
    {"exercise": "ch2.causal_mask", "fn": causal_mask__float_ones,
     "mistake": "returns a float tensor of ones and zeros instead of a bool mask",
     "part": "the dtype (float instead of bool)"},
    {"exercise": "ch2.causal_mask", "fn": causal_mask__sees_next_token,
     "mistake": "off by one: compares j <= i + 1, so each query also sees the next token",
     "part": "the band is one too wide (one future key)"},
    {"exercise": "ch2.padding_mask", "fn": padding_mask__true_at_padding,
     "mistake": "marks the padding positions True instead of the real tokens",
     "part": "the mask polarity"},
    {"exercise": "ch2.padding_mask", "fn": padding_mask__longest_length,
     "mistake": "ignores max_len and uses the longest length in the batch as the width",
     "part": "the width (max_len argument ignored)"},
    {"exercise": "ch2.padding_mask", "fn": padding_mask__left_padded,
     "mistake": "assumes left padding: marks the last length positions True instead of the first",
     "part": "which side is padding"},
    {"exercise": "ch2.causal_mask", "fn": causal_mask__int_ones,
     "mistake": "returns an int64 tensor of ones and zeros instead of a bool mask",
     "part": "the dtype (int instead of bool)"},
    {"exercise": "ch2.padding_mask", "fn": padding_mask__float_mask,
     "mistake": "returns a float 0/1 mask instead of a bool one",
     "part": "the dtype (float instead of bool)"},
]
