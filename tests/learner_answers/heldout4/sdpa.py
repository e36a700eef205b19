"""Fourth blind batch (heldout4): wrong answers to chapter 2, written from the notebook only."""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def scaled_dot_product_attention__mask_true_blocks(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    weights = torch.nan_to_num(weights, nan=0.0)
    return weights @ v, weights


def scaled_dot_product_attention__scale_by_value_dim(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(v.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    weights = torch.nan_to_num(weights, nan=0.0)
    return weights @ v, weights


def causal_mask__upper_triangle(size):
    return torch.triu(torch.ones(size, size)).bool()


def causal_mask__diagonal_one(size):
    return torch.tril(torch.ones(size, size, dtype=torch.bool), diagonal=1)


def padding_mask__no_broadcast_dims(lengths, max_len):
    positions = torch.arange(max_len)
    return positions[None, :] < lengths[:, None]


ANSWERS = [
    {"exercise": "ch2.scaled_dot_product_attention", "fn": scaled_dot_product_attention__mask_true_blocks,
     "mistake": "mask convention flipped: fills -inf where mask is True (True read as blocked)",
     "part": "mask"},
    {"exercise": "ch2.scaled_dot_product_attention", "fn": scaled_dot_product_attention__scale_by_value_dim,
     "mistake": "scales by sqrt(Dv) (v's last dim) instead of sqrt(D)",
     "part": "scaling"},
    {"exercise": "ch2.causal_mask", "fn": causal_mask__upper_triangle,
     "mistake": "torch.triu: True where key j >= query i (future allowed, past blocked)",
     "part": "triangle"},
    {"exercise": "ch2.causal_mask", "fn": causal_mask__diagonal_one,
     "mistake": "tril(diagonal=1): also allows the next key j = i + 1",
     "part": "diagonal offset"},
    {"exercise": "ch2.padding_mask", "fn": padding_mask__no_broadcast_dims,
     "mistake": "returns (N, max_len) without the two singleton dims",
     "part": "shape"},
]
