"""Correct answers to chapter 6, written in other styles than the reference."""
import math

import torch
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def online_softmax_update__safe_shift(running_max, running_sum, block):
    new_max = torch.maximum(running_max, torch.amax(block, dim=-1))
    safe = torch.where(new_max > float("-inf"), new_max, torch.zeros_like(new_max))
    old = running_sum * torch.exp(running_max - safe)
    new = torch.exp(block - safe.unsqueeze(-1)).sum(-1)
    return new_max, old + new


def online_softmax_update__masked_where(running_max, running_sum, block):
    block_max = block.amax(-1)
    new_max = torch.where(block_max > running_max, block_max, running_max)
    seen = new_max != float("-inf")
    shift = torch.where(seen, new_max, torch.zeros_like(new_max))
    total = running_sum * (running_max - shift).exp() + (block - shift[..., None]).exp().sum(-1)
    return new_max, torch.where(seen, total, torch.zeros_like(total))


def block_score_grad__einsum(grad_out, out, weights, value):
    dp = torch.einsum("...ld,...bd->...lb", grad_out, value)
    delta = torch.einsum("...ld,...ld->...l", grad_out, out).unsqueeze(-1)
    return weights * (dp - delta)


def block_score_grad__expanded(grad_out, out, weights, value):
    delta = (grad_out * out).sum(-1, keepdim=True)
    return weights * torch.matmul(grad_out, value.mT) - weights * delta


def sliding_window_mask__tril_triu(L, window):
    ones = torch.ones(L, L, dtype=torch.bool)
    return torch.tril(ones, diagonal=window) & torch.triu(ones, diagonal=-window)


def sliding_window_mask__loops(L, window):
    mask = torch.zeros(L, L, dtype=torch.bool)
    for i in range(L):
        mask[i, max(0, i - window): i + window + 1] = True
    return mask


def attend_with_cache__hand_softmax(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat((k_cache, k_new), dim=-2)
    v = torch.cat((v_cache, v_new), dim=-2)
    scores = torch.einsum("nhqd,nhkd->nhqk", q_new, k) / math.sqrt(q_new.size(-1))
    e = torch.exp(scores - scores.amax(-1, keepdim=True))
    return (e / e.sum(-1, keepdim=True)) @ v, k, v


ANSWERS = [
    {"exercise": "ch6.online_softmax_update", "fn": online_softmax_update__safe_shift, "correct": True},
    {"exercise": "ch6.online_softmax_update", "fn": online_softmax_update__masked_where, "correct": True},
    {"exercise": "ch6.block_score_grad", "fn": block_score_grad__einsum, "correct": True},
    {"exercise": "ch6.block_score_grad", "fn": block_score_grad__expanded, "correct": True},
    {"exercise": "ch6.sliding_window_mask", "fn": sliding_window_mask__tril_triu, "correct": True},
    {"exercise": "ch6.sliding_window_mask", "fn": sliding_window_mask__loops, "correct": True},
    {"exercise": "ch6.attend_with_cache", "fn": attend_with_cache__hand_softmax, "correct": True},
]
