"""Wrong learner answers to chapter 3 (multihead), tune half: see tests/learner_answers/README.md."""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def split_heads__no_transpose(x, num_heads):
    N, L, E = x.shape
    return x.view(N, num_heads, L, E // num_heads)


def split_heads__heads_and_dim_swapped(x, num_heads):
    N, L, E = x.shape
    return x.view(N, L, -1, num_heads).transpose(1, 2)


def merge_heads__features_dim_major(x):
    N, H, L, D = x.shape
    return x.permute(0, 2, 3, 1).reshape(N, L, H * D)


def merge_heads__cat_along_sequence(x):
    return torch.cat(x.unbind(dim=1), dim=1)


def multi_head_attention__no_output_projection(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    N, L, E = x.shape
    D = E // num_heads
    q = (x @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (x @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (x @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return (weights @ v).transpose(1, 2).reshape(N, L, E)


def multi_head_attention__split_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    N, L, E = x.shape
    D = E // num_heads
    q = (x @ w_q).reshape(N, num_heads, L, D)
    k = (x @ w_k).reshape(N, num_heads, L, D)
    v = (x @ w_v).reshape(N, num_heads, L, D)
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    out = (weights @ v).reshape(N, L, E)
    return out @ w_o


def multi_head_attention__merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    N, L, E = x.shape
    D = E // num_heads
    q = (x @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (x @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (x @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    out = (weights @ v).reshape(N, L, E)
    return out @ w_o


def multi_head_attention__mask_polarity(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    N, L, E = x.shape
    D = E // num_heads
    q = (x @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (x @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (x @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    weights = torch.nan_to_num(weights, nan=0.0)
    out = (weights @ v).transpose(1, 2).reshape(N, L, E)
    return out @ w_o


def split_heads__transpose_forgotten(x, num_heads):
    N, L, E = x.shape
    return x.view(N, L, num_heads, E // num_heads)


def split_heads__chunk_sequence(x, num_heads):
    return torch.stack(x.chunk(num_heads, dim=-1), dim=2).transpose(1, 3).transpose(2, 3)


def merge_heads__transpose_1_3(x):
    N, H, L, D = x.shape
    return x.transpose(1, 3).reshape(N, L, H * D)


def multi_head_attention__finfo_min_fill(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    N, L, E = x.shape
    D = E // num_heads
    q = (x @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (x @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (x @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(torch.float16).min)  # -1e9 does not fit in float16
    weights = scores.softmax(dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return (weights @ v).transpose(1, 2).reshape(N, L, E) @ w_o


ANSWERS = [
    {"exercise": "ch3.split_heads", "fn": split_heads__no_transpose,
     "mistake": "views (N, L, E) straight as (N, H, L, D) without the transpose, mixing tokens and heads",
     "part": "the missing transpose (token/head order)"},
    {"exercise": "ch3.split_heads", "fn": split_heads__heads_and_dim_swapped,
     "mistake": "puts num_heads in the last slot of the view, confusing H with D (shape (N, E/H, L, H))",
     "part": "H and D swapped in the view"},
    {"exercise": "ch3.merge_heads", "fn": merge_heads__features_dim_major,
     "mistake": "permutes to (N, L, D, H) before the reshape, interleaving the heads' features",
     "part": "the feature order (interleaved instead of head blocks)"},
    {"exercise": "ch3.merge_heads", "fn": merge_heads__cat_along_sequence,
     "mistake": "concatenates the heads along the sequence dim (N, H*L, D) instead of the features",
     "part": "the concatenation dim"},
    {"exercise": "ch3.multi_head_attention", "fn": multi_head_attention__no_output_projection,
     "mistake": "forgets the final multiplication by w_o",
     "part": "the output projection"},
    {"exercise": "ch3.multi_head_attention", "fn": multi_head_attention__split_without_transpose,
     "mistake": "splits and merges heads with plain reshapes (no transpose), so heads mix tokens",
     "part": "the head split (and merge)"},
    {"exercise": "ch3.multi_head_attention", "fn": multi_head_attention__merge_without_transpose,
     "mistake": "splits the heads correctly but merges with a plain reshape without transposing back",
     "part": "the head merge"},
    {"exercise": "ch3.multi_head_attention", "fn": multi_head_attention__mask_polarity,
     "mistake": "fills -inf where the mask is True (the allowed keys), the inverted polarity",
     "part": "the mask polarity"},
    {"exercise": "ch3.split_heads", "fn": split_heads__transpose_forgotten,
     "mistake": "stops after the view and returns (N, L, H, D), forgetting transpose(1, 2)",
     "part": "the missing transpose (axis order)"},
    {"exercise": "ch3.split_heads", "fn": split_heads__chunk_sequence,
     "mistake": "stacks the chunks, then shuffles axes into (N, D, L, H): heads and features swapped",
     "part": "the axis order after the split"},
    {"exercise": "ch3.merge_heads", "fn": merge_heads__transpose_1_3,
     "mistake": "transposes axes 1 and 3 instead of 1 and 2 before the reshape",
     "part": "the transpose's axes"},
    {"exercise": "ch3.multi_head_attention", "fn": multi_head_attention__finfo_min_fill,
     "mistake": "fills blocked scores with float16's minimum, -65504, instead of -inf (finite, so it can leak)",
     "part": "the fill value for blocked scores"},
]
