"""Correct answers to chapter 3, written in other styles than the reference."""
import math

import torch
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def split_heads__stack_chunks(x, num_heads):
    return torch.stack(x.chunk(num_heads, dim=-1), dim=1)


def split_heads__unflatten_permute(x, num_heads):
    return x.unflatten(-1, (num_heads, -1)).permute(0, 2, 1, 3)


def merge_heads__cat_unbind(x):
    return torch.cat(x.unbind(dim=1), dim=-1)


def merge_heads__permute_flatten(x):
    return x.permute(0, 2, 1, 3).flatten(start_dim=2)


def multi_head_attention__loop_over_heads(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    E = x.shape[-1]
    D = E // num_heads
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    if mask is not None:
        mask = mask.expand(x.shape[0], num_heads, x.shape[1], x.shape[1])
    heads = []
    for h in range(num_heads):
        cols = slice(h * D, (h + 1) * D)
        scores = q[..., cols] @ k[..., cols].transpose(1, 2) / math.sqrt(D)
        if mask is not None:
            scores = scores.masked_fill(~mask[:, h], float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        if mask is not None:
            weights = torch.where(mask[:, h].any(-1, keepdim=True), weights, torch.zeros_like(weights))
        heads.append(weights @ v[..., cols])
    return torch.cat(heads, dim=-1) @ w_o


def multi_head_attention__einsum(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    N, L, E = x.shape
    D = E // num_heads
    q = torch.einsum("nle,ef->nlf", x, w_q).reshape(N, L, num_heads, D)
    k = torch.einsum("nle,ef->nlf", x, w_k).reshape(N, L, num_heads, D)
    v = torch.einsum("nle,ef->nlf", x, w_v).reshape(N, L, num_heads, D)
    scores = torch.einsum("nlhd,nshd->nhls", q, k) / math.sqrt(D)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.nan_to_num(scores.softmax(-1), nan=0.0)
    out = torch.einsum("nhls,nshd->nlhd", weights, v).reshape(N, L, E)
    return torch.einsum("nlf,fe->nle", out, w_o)


ANSWERS = [
    {"exercise": "ch3.split_heads", "fn": split_heads__stack_chunks, "correct": True},
    {"exercise": "ch3.split_heads", "fn": split_heads__unflatten_permute, "correct": True},
    {"exercise": "ch3.merge_heads", "fn": merge_heads__cat_unbind, "correct": True},
    {"exercise": "ch3.merge_heads", "fn": merge_heads__permute_flatten, "correct": True},
    {"exercise": "ch3.multi_head_attention", "fn": multi_head_attention__loop_over_heads, "correct": True},
    {"exercise": "ch3.multi_head_attention", "fn": multi_head_attention__einsum, "correct": True},
]
