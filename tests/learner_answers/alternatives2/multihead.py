"""A correct answer to each exercise of chapter 3, in another style than the reference (batch 3)."""

import math

import torch
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def split_heads__chunk_and_stack(x, num_heads):
    return torch.stack(x.chunk(num_heads, dim=-1), dim=1)  # H chunks of (N, L, D) -> (N, H, L, D)


def merge_heads__cat_unbound_heads(x):
    return torch.cat(x.unbind(dim=1), dim=-1)


def multi_head_attention__head_loop(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    n, length, e = x.shape
    d = e // num_heads
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    if mask is not None:
        mask = torch.broadcast_to(mask, (n, num_heads, length, length))
    heads = []
    for h in range(num_heads):
        cols = slice(h * d, (h + 1) * d)
        scores = q[..., cols] @ k[..., cols].mT / math.sqrt(d)  # (N, L, L)
        if mask is not None:
            keep = mask[:, h]
            scores = scores.masked_fill(~keep, float("-inf"))
            weights = torch.softmax(scores, dim=-1)
            weights = torch.where(keep.any(dim=-1, keepdim=True), weights, torch.zeros_like(weights))
        else:
            weights = torch.softmax(scores, dim=-1)
        heads.append(weights @ v[..., cols])
    return torch.cat(heads, dim=-1) @ w_o


ANSWERS = [
    {"exercise": "ch3.split_heads", "fn": split_heads__chunk_and_stack, "correct": True},
    {"exercise": "ch3.merge_heads", "fn": merge_heads__cat_unbound_heads, "correct": True},
    {"exercise": "ch3.multi_head_attention", "fn": multi_head_attention__head_loop, "correct": True},
]
