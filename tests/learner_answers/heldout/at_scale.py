"""Wrong learner answers to chapter 6 (at_scale), heldout half: see tests/learner_answers/README.md."""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def online_softmax_update__no_masked_row_guard(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.amax(dim=-1))
    new_sum = running_sum * torch.exp(running_max - new_max) + torch.exp(block - new_max[..., None]).sum(dim=-1)
    return new_max, new_sum


def online_softmax_update__float32_result(running_max, running_sum, block):
    running_max, running_sum, block = running_max.float(), running_sum.float(), block.float()
    new_max = torch.maximum(running_max, block.amax(dim=-1))
    shift = torch.where(new_max == float("-inf"), torch.zeros_like(new_max), new_max)
    new_sum = running_sum * torch.exp(running_max - shift) + torch.exp(block - shift[..., None]).sum(dim=-1)
    return new_max, new_sum


def online_softmax_update__max_over_all_rows(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.max())
    shift = torch.where(new_max == float("-inf"), torch.zeros_like(new_max), new_max)
    new_sum = running_sum * torch.exp(running_max - shift) + torch.exp(block - shift[..., None]).sum(dim=-1)
    return new_max, new_sum


def block_score_grad__extra_scale(grad_out, out, weights, value):
    dp = grad_out @ value.transpose(-2, -1)
    delta = (grad_out * out).sum(dim=-1, keepdim=True)
    return weights * (dp - delta) / math.sqrt(value.shape[-1])


def block_score_grad__delta_from_block_weights(grad_out, out, weights, value):
    dp = grad_out @ value.transpose(-2, -1)
    delta = (weights * dp).sum(dim=-1, keepdim=True)
    return weights * (dp - delta)


def block_score_grad__delta_from_out_only(grad_out, out, weights, value):
    dp = grad_out @ value.transpose(-2, -1)
    delta = out.sum(dim=-1, keepdim=True)
    return weights * (dp - delta)


def sliding_window_mask__look_back_only(L, window):
    i = torch.arange(L)
    diff = i[:, None] - i[None, :]
    return (diff >= 0) & (diff <= window)


def sliding_window_mask__window_as_total_width(L, window):
    i = torch.arange(L)
    return (i[:, None] - i[None, :]).abs() <= window // 2


def sliding_window_mask__float_mask(L, window):
    i = torch.arange(L)
    return ((i[:, None] - i[None, :]).abs() <= window).float()


def sliding_window_mask__true_outside(L, window):
    i = torch.arange(L)
    return (i[:, None] - i[None, :]).abs() > window


def attend_with_cache__stale_caches_returned(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_cache, k_new], dim=2)
    v = torch.cat([v_cache, v_new], dim=2)
    weights = (q_new @ k.transpose(-2, -1) / math.sqrt(q_new.shape[-1])).softmax(dim=-1)
    return weights @ v, k_cache, v_cache


def attend_with_cache__own_key_left_out(q_new, k_new, v_new, k_cache, v_cache):
    weights = (q_new @ k_cache.transpose(-2, -1) / math.sqrt(q_new.shape[-1])).softmax(dim=-1)
    out = weights @ v_cache
    return out, torch.cat([k_cache, k_new], dim=2), torch.cat([v_cache, v_new], dim=2)


def attend_with_cache__causal_mask_reused(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_cache, k_new], dim=2)
    v = torch.cat([v_cache, v_new], dim=2)
    scores = q_new @ k.transpose(-2, -1) / math.sqrt(q_new.shape[-1])
    mask = torch.tril(torch.ones(q_new.shape[-2], k.shape[-2], dtype=torch.bool))
    weights = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)
    return weights @ v, k, v


def online_softmax_update__sum_over_rows(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.amax(dim=-1))
    shift = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
    terms = torch.exp(block - shift[..., None])
    return new_max, running_sum * torch.exp(running_max - shift) + terms.sum(dim=0)


def block_score_grad__delta_mean(grad_out, out, weights, value):
    dp = grad_out @ value.transpose(-2, -1)
    delta = (grad_out * out).mean(dim=-1, keepdim=True)
    return weights * (dp - delta)


def attend_with_cache__cat_on_heads(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_cache, k_new], dim=1)
    v = torch.cat([v_cache, v_new], dim=1)
    k_seq = torch.cat([k_cache, k_new], dim=2)
    v_seq = torch.cat([v_cache, v_new], dim=2)
    weights = (q_new @ k_seq.transpose(-2, -1) / math.sqrt(q_new.shape[-1])).softmax(dim=-1)
    return weights @ v_seq, k, v


ANSWERS = [
    {"exercise": "ch6.online_softmax_update", "fn": online_softmax_update__no_masked_row_guard,
     "mistake": "shifts by m' even when it is -inf, so rows that saw only -inf come out NaN",
     "part": "fully masked rows"},
    {"exercise": "ch6.online_softmax_update", "fn": online_softmax_update__float32_result,
     "mistake": "upcasts everything to float32 and returns float32 for float16 inputs",
     "part": "the dtype of the result"},
    {"exercise": "ch6.online_softmax_update", "fn": online_softmax_update__max_over_all_rows,
     "mistake": "takes block.max() over the whole block, all rows at once, instead of per row",
     "part": "the new max (over all rows instead of per row)"},
    {"exercise": "ch6.block_score_grad", "fn": block_score_grad__extra_scale,
     "mistake": "divides by sqrt(Dv) as if the softmax scale still had to be applied",
     "part": "an extra scale"},
    {"exercise": "ch6.block_score_grad", "fn": block_score_grad__delta_from_block_weights,
     "mistake": "computes D = rowsum(P * dP) from this block's weights instead of rowsum(dO * O)",
     "part": "D (from the block instead of the output)"},
    {"exercise": "ch6.block_score_grad", "fn": block_score_grad__delta_from_out_only,
     "mistake": "computes D = rowsum(O), forgetting to multiply by dO",
     "part": "D (dO missing)"},
    {"exercise": "ch6.sliding_window_mask", "fn": sliding_window_mask__look_back_only,
     "mistake": "keeps only the window keys before the query (a causal window), not the ones after",
     "part": "the keys after the query are missing"},
    {"exercise": "ch6.sliding_window_mask", "fn": sliding_window_mask__window_as_total_width,
     "mistake": "reads window as the total width and keeps |i - j| <= window // 2",
     "part": "the half-width (halved)"},
    {"exercise": "ch6.sliding_window_mask", "fn": sliding_window_mask__float_mask,
     "mistake": "returns a float 0/1 tensor instead of a bool mask",
     "part": "the dtype (float instead of bool)"},
    {"exercise": "ch6.sliding_window_mask", "fn": sliding_window_mask__true_outside,
     "mistake": "marks True where |i - j| > window, the blocked keys instead of the allowed ones",
     "part": "the mask polarity"},
    {"exercise": "ch6.attend_with_cache", "fn": attend_with_cache__stale_caches_returned,
     "mistake": "attends over the extended keys but returns the old caches, not updated",
     "part": "the returned caches (not updated)"},
    {"exercise": "ch6.attend_with_cache", "fn": attend_with_cache__own_key_left_out,
     "mistake": "attends over the old cache only, leaving out the new token's own key and value",
     "part": "the attention output (own key missing)"},
    {"exercise": "ch6.attend_with_cache", "fn": attend_with_cache__causal_mask_reused,
     "mistake": "reuses a causal tril mask of shape (1, T+1), so the new query sees only the first key",
     "part": "a mask that does not belong"},
    {"exercise": "ch6.online_softmax_update", "fn": online_softmax_update__sum_over_rows,
     "mistake": "sums the block's exponentials over dim 0 (the rows) instead of the last dim",
     "part": "the sum's dim"},
    {"exercise": "ch6.block_score_grad", "fn": block_score_grad__delta_mean,
     "mistake": "takes the mean of dO * O over Dv instead of the sum for D",
     "part": "D (mean instead of sum)"},
    {"exercise": "ch6.attend_with_cache", "fn": attend_with_cache__cat_on_heads,
     "mistake": "attends correctly but returns caches concatenated along the heads dim (dim 1) instead of the sequence",
     "part": "the returned caches (wrong concatenation dim)"},
]
