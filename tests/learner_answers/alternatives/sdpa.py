"""Correct answers to chapter 2, written in other styles than the reference."""
import math

import torch
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def scaled_dot_product_attention__hand_softmax(q, k, v, mask=None):
    scores = torch.einsum("...ld,...sd->...ls", q, k) * (1.0 / math.sqrt(q.size(-1)))
    if mask is not None:
        scores = torch.where(mask, scores, torch.tensor(float("-inf"), dtype=scores.dtype))
    top = scores.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(scores - top)
    total = e.sum(dim=-1, keepdim=True)
    weights = torch.where(total > 0, e / total.clamp_min(torch.finfo(e.dtype).tiny), torch.zeros_like(e))
    return weights @ v, weights


def scaled_dot_product_attention__nan_to_num(q, k, v, mask=None):
    scores = q @ k.mT / q.shape[-1] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), float("-inf"))
    weights = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)
    return torch.matmul(weights, v), weights


def causal_mask__arange(size):
    i = torch.arange(size)
    return i.unsqueeze(1) >= i.unsqueeze(0)


def causal_mask__loops(size):
    mask = torch.zeros(size, size, dtype=torch.bool)
    for i in range(size):
        mask[i, : i + 1] = True
    return mask


def padding_mask__loops(lengths, max_len):
    mask = torch.zeros(len(lengths), 1, 1, max_len, dtype=torch.bool)
    for n, length in enumerate(lengths.tolist()):
        mask[n, 0, 0, :length] = True
    return mask


def padding_mask__arange_view(lengths, max_len):
    positions = torch.arange(max_len, device=lengths.device).expand(len(lengths), max_len)
    return (positions < lengths.unsqueeze(1)).view(-1, 1, 1, max_len)


ANSWERS = [
    {"exercise": "ch2.scaled_dot_product_attention", "fn": scaled_dot_product_attention__hand_softmax, "correct": True},
    {"exercise": "ch2.scaled_dot_product_attention", "fn": scaled_dot_product_attention__nan_to_num, "correct": True},
    {"exercise": "ch2.causal_mask", "fn": causal_mask__arange, "correct": True},
    {"exercise": "ch2.causal_mask", "fn": causal_mask__loops, "correct": True},
    {"exercise": "ch2.padding_mask", "fn": padding_mask__loops, "correct": True},
    {"exercise": "ch2.padding_mask", "fn": padding_mask__arange_view, "correct": True},
]
