"""Fourth blind batch (heldout4): wrong answers to chapter 3, written from the notebook only."""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def split_heads__view_without_transpose(x, num_heads):
    N, L, E = x.shape
    return x.view(N, num_heads, L, E // num_heads)


def split_heads__head_index_fastest(x, num_heads):
    N, L, E = x.shape
    return x.reshape(N, L, E // num_heads, num_heads).permute(0, 3, 1, 2)


def merge_heads__reshape_without_transpose(x):
    N, H, L, D = x.shape
    return x.reshape(N, L, H * D)


def merge_heads__cat_along_length(x):
    return torch.cat([x[:, h] for h in range(x.shape[1])], dim=1)


def multi_head_attention__no_output_projection(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    N, L, E = x.shape
    D = E // num_heads
    q = (x @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (x @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (x @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)
    out = (weights @ v).transpose(1, 2).reshape(N, L, E)
    return out


ANSWERS = [
    {"exercise": "ch3.split_heads", "fn": split_heads__view_without_transpose,
     "mistake": "views (N, L, E) directly as (N, H, L, D) without splitting E then transposing",
     "part": "view"},
    {"exercise": "ch3.split_heads", "fn": split_heads__head_index_fastest,
     "mistake": "splits E as (D, H) instead of (H, D): head h takes every H-th feature",
     "part": "split order"},
    {"exercise": "ch3.merge_heads", "fn": merge_heads__reshape_without_transpose,
     "mistake": "reshapes (N, H, L, D) to (N, L, H*D) without moving heads next to D",
     "part": "transpose"},
    {"exercise": "ch3.merge_heads", "fn": merge_heads__cat_along_length,
     "mistake": "concatenates the heads along the length dim: (N, H*L, D)",
     "part": "concat dim"},
    {"exercise": "ch3.multi_head_attention", "fn": multi_head_attention__no_output_projection,
     "mistake": "forgets the output projection @ w_o",
     "part": "output projection"},
]
