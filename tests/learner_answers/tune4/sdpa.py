"""Fourth blind batch (tune4): wrong answers to chapter 2, written from the notebook only."""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def scaled_dot_product_attention__nan_rows(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def causal_mask__float_ones(size):
    return torch.tril(torch.ones(size, size))


def padding_mask__less_equal(lengths, max_len):
    positions = torch.arange(max_len)
    mask = positions[None, :] <= lengths[:, None]
    return mask[:, None, None, :]


ANSWERS = [
    {"exercise": "ch2.scaled_dot_product_attention", "fn": scaled_dot_product_attention__nan_rows,
     "mistake": "no handling of fully masked rows: softmax of all -inf gives NaN instead of zeros",
     "part": "fully masked rows"},
    {"exercise": "ch2.causal_mask", "fn": causal_mask__float_ones,
     "mistake": "returns a float 0/1 matrix instead of bool",
     "part": "dtype"},
    {"exercise": "ch2.padding_mask", "fn": padding_mask__less_equal,
     "mistake": "positions <= lengths: off by one, one padding position counted as real",
     "part": "comparison"},
]
