"""Wrong learner answers to chapter 2 (sdpa), heldout half of the second batch: see
tests/learner_answers/README.md."""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401

L = 5  # the notebook's sequence length: N, L, D, Dv = 1, len(tokens), 8, 4


def causal_mask__notebook_length(size):
    return torch.tril(torch.ones(L, L, dtype=torch.bool))


def causal_mask__additive_float(size):
    # as nn.Transformer.generate_square_subsequent_mask: 0 where allowed, -inf where blocked
    blocked = torch.triu(torch.ones(size, size, dtype=torch.bool), diagonal=1)
    return torch.zeros(size, size).masked_fill(blocked, float("-inf"))


def padding_mask__no_column(lengths, max_len):
    mask = torch.arange(max_len) < lengths
    return mask.view(-1, 1, 1, max_len)


def padding_mask__unsqueeze_in_place(lengths, max_len):
    lengths.unsqueeze_(1)  # (N, 1)
    mask = torch.arange(max_len)[None, :] < lengths
    return mask[:, None, None, :]


def scaled_dot_product_attention__scaled_twice(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores / math.sqrt(q.shape[-1]), dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    return weights @ v, weights


def scaled_dot_product_attention__mask_after_softmax(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights * mask  # blocked keys get 0
    return weights @ v, weights


def scaled_dot_product_attention__power_precedence(q, k, v, mask=None):
    d = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / d ** 1 / 2  # meant d ** (1/2)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    return weights @ v, weights


def scaled_dot_product_attention__times_sqrt_d(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) * math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    return weights @ v, weights


ANSWERS = [
    {"exercise": "ch2.causal_mask", "fn": causal_mask__notebook_length,
     "mistake": "uses the notebook's global L (= 5) instead of the size argument",
     "part": "the size (a notebook global)"},
    {"exercise": "ch2.causal_mask", "fn": causal_mask__additive_float,
     "mistake": "returns an additive float mask (0 allowed, -inf blocked) as nn.Transformer does, not a bool one",
     "part": "the mask's dtype and convention (additive float)"},
    {"exercise": "ch2.padding_mask", "fn": padding_mask__no_column,
     "mistake": "compares arange(max_len) with lengths without [:, None]: works for N = 1 only",
     "part": "broadcasting over the batch (N > 1)"},
    {"exercise": "ch2.padding_mask", "fn": padding_mask__unsqueeze_in_place,
     "mistake": "calls lengths.unsqueeze_(1), changing the caller's lengths tensor in place",
     "part": "the input lengths modified in place"},
    {"exercise": "ch2.scaled_dot_product_attention", "fn": scaled_dot_product_attention__scaled_twice,
     "mistake": "divides the scores by sqrt(D) twice (once when computing them, once inside the softmax)",
     "part": "the scale"},
    {"exercise": "ch2.scaled_dot_product_attention", "fn": scaled_dot_product_attention__mask_after_softmax,
     "mistake": "multiplies the weights by the mask after the softmax without renormalising, so rows sum to < 1",
     "part": "the mask (applied after the softmax)"},
    {"exercise": "ch2.scaled_dot_product_attention", "fn": scaled_dot_product_attention__power_precedence,
     "mistake": "writes d ** 1 / 2 for the square root, which divides the scores by D/2 (operator precedence)",
     "part": "the scale"},
    {"exercise": "ch2.scaled_dot_product_attention", "fn": scaled_dot_product_attention__times_sqrt_d,
     "mistake": "multiplies the scores by sqrt(D) instead of dividing",
     "part": "the scale"},
]
