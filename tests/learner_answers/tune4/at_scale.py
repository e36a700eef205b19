"""Fourth blind batch (tune4): wrong answers to chapter 6, written from the notebook only."""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def online_softmax_update__global_block_max(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.max())
    new_sum = running_sum * torch.exp(running_max - new_max) + torch.exp(block - new_max[..., None]).sum(dim=-1)
    return new_max, new_sum


def block_score_grad__delta_without_keepdim(grad_out, out, weights, value):
    d_p = grad_out @ value.transpose(-2, -1)
    delta = (grad_out * out).sum(dim=-1)
    return weights * (d_p - delta)


def sliding_window_mask__strict_less(L, window):
    i = torch.arange(L)[:, None]
    j = torch.arange(L)[None, :]
    return (i - j).abs() < window


def attend_with_cache__softmax_dim_two(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_cache, k_new], dim=2)
    v = torch.cat([v_cache, v_new], dim=2)
    scores = q_new @ k.transpose(2, 3) / math.sqrt(q_new.shape[-1])
    weights = torch.softmax(scores, dim=2)
    return weights @ v, k, v


ANSWERS = [
    {"exercise": "ch6.online_softmax_update", "fn": online_softmax_update__global_block_max,
     "mistake": "block.max() over the whole tensor, not per row: one max shared by every row",
     "part": "max axis"},
    {"exercise": "ch6.block_score_grad", "fn": block_score_grad__delta_without_keepdim,
     "mistake": "Δ = rowsum(dO * O) without keepdim: (..., L) broadcasts along the wrong axis",
     "part": "delta shape"},
    {"exercise": "ch6.sliding_window_mask", "fn": sliding_window_mask__strict_less,
     "mistake": "|i - j| < window: off by one, the keys at distance exactly window are blocked",
     "part": "comparison"},
    {"exercise": "ch6.attend_with_cache", "fn": attend_with_cache__softmax_dim_two,
     "mistake": "softmax over dim=2 (the single query) instead of the keys: every weight is 1",
     "part": "softmax axis"},
]
