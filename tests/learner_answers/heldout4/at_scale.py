"""Fourth blind batch (heldout4): wrong answers to chapter 6, written from the notebook only."""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def online_softmax_update__no_rescale(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.max(dim=-1).values)
    new_sum = running_sum + torch.exp(block - new_max[..., None]).sum(dim=-1)
    return new_max, new_sum


def block_score_grad__delta_from_block(grad_out, out, weights, value):
    d_p = grad_out @ value.transpose(-2, -1)
    delta = (weights * d_p).sum(dim=-1, keepdim=True)
    return weights * (d_p - delta)


def sliding_window_mask__past_only(L, window):
    i = torch.arange(L)[:, None]
    j = torch.arange(L)[None, :]
    return (i - j >= 0) & (i - j <= window)


def attend_with_cache__cache_only(q_new, k_new, v_new, k_cache, v_cache):
    scores = q_new @ k_cache.transpose(-2, -1) / math.sqrt(q_new.shape[-1])
    out = torch.softmax(scores, dim=-1) @ v_cache
    k = torch.cat([k_cache, k_new], dim=2)
    v = torch.cat([v_cache, v_new], dim=2)
    return out, k, v


ANSWERS = [
    {"exercise": "ch6.online_softmax_update", "fn": online_softmax_update__no_rescale,
     "mistake": "running_sum is not rescaled by exp(old_max - new_max) when the max grows",
     "part": "rescaling"},
    {"exercise": "ch6.block_score_grad", "fn": block_score_grad__delta_from_block,
     "mistake": "Δ computed as rowsum(P * dP) over this block only instead of rowsum(dO * O)",
     "part": "delta"},
    {"exercise": "ch6.sliding_window_mask", "fn": sliding_window_mask__past_only,
     "mistake": "one-sided (causal) window: keys after the query are blocked",
     "part": "window sides"},
    {"exercise": "ch6.attend_with_cache", "fn": attend_with_cache__cache_only,
     "mistake": "attends over the old cache only: the new token's key and value are left out of attention",
     "part": "attended keys"},
]
