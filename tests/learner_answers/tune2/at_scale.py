"""Wrong learner answers to chapter 6 (at_scale), tune half of the second batch: see
tests/learner_answers/README.md."""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401

scale = 1 / math.sqrt(64)  # a notebook cell: scale = 1 / math.sqrt(q.shape[-1]) with D = 64


def online_softmax_update__keepdim_max(running_max, running_sum, block):
    block_max = block.amax(dim=-1, keepdim=True)  # (..., 1) so that it broadcasts over the block
    new_max = torch.maximum(running_max, block_max)
    safe = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
    new_sum = running_sum * torch.exp(running_max - safe) + torch.exp(block - safe).sum(dim=-1)
    return new_max, new_sum


def online_softmax_update__unshifted_exponentials(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.amax(dim=-1))
    # sum(exp(x - m')) = sum(exp(x)) * exp(-m'): the same maths, one exp fewer
    total = running_sum * torch.exp(running_max) + torch.exp(block).sum(dim=-1)
    return new_max, total * torch.exp(-new_max)


def block_score_grad__delta_as_matrix(grad_out, out, weights, value):
    grad_weights = grad_out @ value.transpose(-2, -1)
    delta = grad_out @ out.transpose(-2, -1)  # rowsum(dO * O) as a product
    return weights * (grad_weights - delta)


def block_score_grad__weights_renormalised(grad_out, out, weights, value):
    weights = weights / weights.sum(dim=-1, keepdim=True)  # a softmax row sums to 1
    grad_weights = grad_out @ value.transpose(-2, -1)
    delta = (grad_out * out).sum(dim=-1, keepdim=True)
    return weights * (grad_weights - delta)


def sliding_window_mask__diagonal_bands(L, window):
    band = sum(torch.diag(torch.ones(L - abs(d)), d) for d in range(-window, window + 1))
    return band.bool()


def sliding_window_mask__negative_index_wraps(L, window):
    mask = torch.zeros(L, L, dtype=torch.bool)
    for i in range(L):
        for j in range(i - window, i + window + 1):
            if j < L:
                mask[i, j] = True
    return mask


def attend_with_cache__scaled_by_key_count(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_cache, k_new], dim=2)
    v = torch.cat([v_cache, v_new], dim=2)
    scores = q_new @ k.transpose(-2, -1) / math.sqrt(k.shape[-2])
    return scores.softmax(dim=-1) @ v, k, v


def attend_with_cache__overwrites_last_slot(q_new, k_new, v_new, k_cache, v_cache):
    k_cache[:, :, -1:] = k_new  # write the new token into the cache
    v_cache[:, :, -1:] = v_new
    scores = q_new @ k_cache.transpose(-2, -1) / math.sqrt(q_new.shape[-1])
    return scores.softmax(dim=-1) @ v_cache, k_cache, v_cache


ANSWERS = [
    {"exercise": "ch6.online_softmax_update", "fn": online_softmax_update__keepdim_max,
     "mistake": "keeps the block max as (..., 1), so max(running_max, it) broadcasts to (..., R, R) for R > 1 rows",
     "part": "the shape of the new max (broadcasting)"},
    {"exercise": "ch6.online_softmax_update", "fn": online_softmax_update__unshifted_exponentials,
     "mistake": "takes exp of the raw scores and shifts afterwards: inf for large scores, NaN for -inf rows",
     "part": "numerical stability (exp before the shift)"},
    {"exercise": "ch6.block_score_grad", "fn": block_score_grad__delta_as_matrix,
     "mistake": "writes D as the matrix dO Oᵀ (L, L) instead of its diagonal rowsum(dO * O)",
     "part": "D (a matrix instead of a column)"},
    {"exercise": "ch6.block_score_grad", "fn": block_score_grad__weights_renormalised,
     "mistake": "renormalises the block's weights to sum to 1 before using them",
     "part": "the weights P (renormalised)"},
    {"exercise": "ch6.sliding_window_mask", "fn": sliding_window_mask__diagonal_bands,
     "mistake": "sums torch.diag bands for offsets -window..window: breaks when window >= L (negative sizes)",
     "part": "windows as wide as the sequence"},
    {"exercise": "ch6.sliding_window_mask", "fn": sliding_window_mask__negative_index_wraps,
     "mistake": "loops j from i - window without a j >= 0 guard: negative j wraps to the last keys",
     "part": "the first queries (negative indices wrap)"},
    {"exercise": "ch6.attend_with_cache", "fn": attend_with_cache__scaled_by_key_count,
     "mistake": "scales the scores by 1/sqrt(T + 1), the number of keys, instead of 1/sqrt(D)",
     "part": "the scale"},
    {"exercise": "ch6.attend_with_cache", "fn": attend_with_cache__overwrites_last_slot,
     "mistake": "writes the new key and value into the last slot of the caches in place instead of appending",
     "part": "the cache update (overwrite in place)"},
]
