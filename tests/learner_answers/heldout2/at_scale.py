"""Wrong learner answers to chapter 6 (at_scale), heldout half of the second batch: see
tests/learner_answers/README.md."""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401

scale = 1 / math.sqrt(64)  # a notebook cell: scale = 1 / math.sqrt(q.shape[-1]) with D = 64


def online_softmax_update__max_not_updated(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.amax(dim=-1))
    safe = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
    new_sum = running_sum * torch.exp(running_max - safe) + torch.exp(block - safe[..., None]).sum(dim=-1)
    return running_max, new_sum


def online_softmax_update__block_term_not_rescaled(running_max, running_sum, block):
    block_max = block.amax(dim=-1)
    new_max = torch.maximum(running_max, block_max)
    safe_new = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
    safe_block = torch.where(torch.isinf(block_max), torch.zeros_like(block_max), block_max)
    block_sum = torch.exp(block - safe_block[..., None]).sum(dim=-1)  # stable within the block
    return new_max, running_sum * torch.exp(running_max - safe_new) + block_sum


def online_softmax_update__max_tuple(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.max(dim=-1))
    safe = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
    new_sum = running_sum * torch.exp(running_max - safe) + torch.exp(block - safe[..., None]).sum(dim=-1)
    return new_max, new_sum


def block_score_grad__values_not_transposed(grad_out, out, weights, value):
    grad_weights = grad_out @ value  # dP = dO V
    delta = (grad_out * out).sum(dim=-1, keepdim=True)
    return weights * (grad_weights - delta)


def block_score_grad__delta_summed_everywhere(grad_out, out, weights, value):
    grad_weights = grad_out @ value.transpose(-2, -1)
    delta = (grad_out * out).sum()
    return weights * (grad_weights - delta)


def block_score_grad__delta_from_grad_out_twice(grad_out, out, weights, value):
    grad_weights = grad_out @ value.transpose(-2, -1)
    delta = (grad_out * grad_out).sum(dim=-1, keepdim=True)
    return weights * (grad_weights - delta)


def sliding_window_mask__triu_sign(L, window):
    ones = torch.ones(L, L, dtype=torch.bool)
    return torch.triu(ones, diagonal=window) & torch.tril(ones, diagonal=window)


def sliding_window_mask__head_dims(L, window):
    i = torch.arange(L)
    mask = (i[:, None] - i[None, :]).abs() <= window
    return mask[None, None]  # (1, 1, L, L), ready for (N, H, L, S)


def attend_with_cache__notebook_scale(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_cache, k_new], dim=2)
    v = torch.cat([v_cache, v_new], dim=2)
    weights = torch.softmax(q_new @ k.transpose(-2, -1) * scale, dim=-1)
    return weights @ v, k, v


def attend_with_cache__key_as_query(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_cache, k_new], dim=2)
    v = torch.cat([v_cache, v_new], dim=2)
    scores = k_new @ k.transpose(-2, -1) / math.sqrt(k_new.shape[-1])
    return scores.softmax(dim=-1) @ v, k, v


def attend_with_cache__drops_oldest(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_cache[:, :, 1:], k_new], dim=2)  # keep the cache size fixed
    v = torch.cat([v_cache[:, :, 1:], v_new], dim=2)
    scores = q_new @ k.transpose(-2, -1) / math.sqrt(q_new.shape[-1])
    return scores.softmax(dim=-1) @ v, k, v


ANSWERS = [
    {"exercise": "ch6.online_softmax_update", "fn": online_softmax_update__max_not_updated,
     "mistake": "computes the new max and rescales the sum with it, but returns the old running_max",
     "part": "the returned max (not updated)"},
    {"exercise": "ch6.online_softmax_update", "fn": online_softmax_update__block_term_not_rescaled,
     "mistake": "shifts the block's exponentials by the block's own max and never rescales them to the new max",
     "part": "the block's term of the sum"},
    {"exercise": "ch6.online_softmax_update", "fn": online_softmax_update__max_tuple,
     "mistake": "uses block.max(dim=-1), which returns a (values, indices) tuple, where amax was needed",
     "part": "the block's max (max returns a tuple)"},
    {"exercise": "ch6.block_score_grad", "fn": block_score_grad__values_not_transposed,
     "mistake": "computes dP = dO V without transposing V (fails, or is wrong when B = Dv)",
     "part": "dP (V not transposed)"},
    {"exercise": "ch6.block_score_grad", "fn": block_score_grad__delta_summed_everywhere,
     "mistake": "sums dO * O over every dim, one scalar D instead of one per query row",
     "part": "D (summed over all rows)"},
    {"exercise": "ch6.block_score_grad", "fn": block_score_grad__delta_from_grad_out_twice,
     "mistake": "computes D = rowsum(dO * dO), grad_out used twice instead of out (same shape)",
     "part": "D (grad_out instead of out)"},
    {"exercise": "ch6.sliding_window_mask", "fn": sliding_window_mask__triu_sign,
     "mistake": "triu with diagonal=window instead of -window, so only the diagonal j = i + window is kept",
     "part": "the keys before the query"},
    {"exercise": "ch6.sliding_window_mask", "fn": sliding_window_mask__head_dims,
     "mistake": "returns (1, 1, L, L), ready for heads, instead of (L, L)",
     "part": "the shape"},
    {"exercise": "ch6.attend_with_cache", "fn": attend_with_cache__notebook_scale,
     "mistake": "uses the notebook's global scale (1/sqrt(64)) instead of 1/sqrt(D) of its own q",
     "part": "the scale (a notebook global)"},
    {"exercise": "ch6.attend_with_cache", "fn": attend_with_cache__key_as_query,
     "mistake": "uses k_new as the query (q_new and k_new have the same shape)",
     "part": "the query"},
    {"exercise": "ch6.attend_with_cache", "fn": attend_with_cache__drops_oldest,
     "mistake": "drops the oldest cached token to keep the cache size fixed (a ring buffer), T keys instead of T + 1",
     "part": "the cache length"},
]
