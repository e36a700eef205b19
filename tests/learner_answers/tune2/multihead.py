"""Wrong learner answers to chapter 3 (multihead), tune half of the second batch: see
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


def split_heads__true_division(x, num_heads):
    n, length, e = x.shape
    d = e / num_heads
    return x.view(n, length, num_heads, d).transpose(1, 2)


def merge_heads__notebook_shapes(x):
    return x.transpose(1, 2).reshape(N, L, E)


def merge_heads__transpose_1_3(x):
    n, h, length, d = x.shape
    return x.transpose(1, 3).reshape(n, length, h * d)


def multi_head_attention__residual_added(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    n, length, e = x.shape
    d = e // num_heads

    def split(t):
        return t.view(n, length, num_heads, d).transpose(1, 2)

    out = _attend(split(x @ w_q), split(x @ w_k), split(x @ w_v), mask, 1 / math.sqrt(d))
    out = out.transpose(1, 2).reshape(n, length, e) @ w_o
    return x + out  # the residual connection


def multi_head_attention__values_plain_view(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    n, length, e = x.shape
    d = e // num_heads
    q = (x @ w_q).view(n, length, num_heads, d).transpose(1, 2)
    k = (x @ w_k).view(n, length, num_heads, d).transpose(1, 2)
    v = (x @ w_v).view(n, num_heads, length, d)
    out = _attend(q, k, v, mask, 1 / math.sqrt(d))
    return out.transpose(1, 2).reshape(n, length, e) @ w_o


ANSWERS = [
    {"exercise": "ch3.split_heads", "fn": split_heads__true_division,
     "mistake": "computes D = E / H with true division, a float, which view rejects",
     "part": "D (a float, not an int)"},
    {"exercise": "ch3.merge_heads", "fn": merge_heads__notebook_shapes,
     "mistake": "reshapes to the notebook's global N, L, E (2, 5, 12) instead of x's own sizes",
     "part": "the output shape (notebook globals)"},
    {"exercise": "ch3.merge_heads", "fn": merge_heads__transpose_1_3,
     "mistake": "transposes dims 1 and 3 (H and D) instead of 1 and 2 before the reshape",
     "part": "the transpose before the reshape"},
    {"exercise": "ch3.multi_head_attention", "fn": multi_head_attention__residual_added,
     "mistake": "adds the input x to the output (a residual that belongs to the encoder layer)",
     "part": "a residual that does not belong"},
    {"exercise": "ch3.multi_head_attention", "fn": multi_head_attention__values_plain_view,
     "mistake": "splits Q and K correctly but V with a plain view (N, H, L, D), mixing tokens across heads",
     "part": "the split of the values"},
]
