"""Fourth blind batch (tune4): wrong answers to chapter 3, written from the notebook only."""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401

head_dim = 4  # notebook cell: E = 8, H = 2


def split_heads__notebook_head_dim(x, num_heads):
    N, L, E = x.shape
    return x.view(N, L, num_heads, head_dim).transpose(1, 2)


def merge_heads__features_interleaved(x):
    N, H, L, D = x.shape
    return x.permute(0, 2, 3, 1).reshape(N, L, H * D)


def multi_head_attention__scale_by_model_dim(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    N, L, E = x.shape
    D = E // num_heads
    q = (x @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (x @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (x @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(E)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)
    out = (weights @ v).transpose(1, 2).reshape(N, L, E)
    return out @ w_o


ANSWERS = [
    {"exercise": "ch3.split_heads", "fn": split_heads__notebook_head_dim,
     "mistake": "uses the notebook global head_dim = 4 instead of E // num_heads",
     "part": "head size"},
    {"exercise": "ch3.merge_heads", "fn": merge_heads__features_interleaved,
     "mistake": "permute(0, 2, 3, 1): features interleaved across heads (D, H order) instead of heads side by side",
     "part": "permute order"},
    {"exercise": "ch3.multi_head_attention", "fn": multi_head_attention__scale_by_model_dim,
     "mistake": "scales scores by sqrt(E) instead of sqrt(D) per head",
     "part": "scaling"},
]
