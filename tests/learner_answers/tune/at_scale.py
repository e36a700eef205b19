"""Wrong learner answers to chapter 6 (at_scale), tune half: see tests/learner_answers/README.md."""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def online_softmax_update__sum_not_rescaled(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.amax(dim=-1))
    shift = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
    return new_max, running_sum + torch.exp(block - shift[..., None]).sum(dim=-1)


def online_softmax_update__rescale_inverted(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.amax(dim=-1))
    shift = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
    new_sum = running_sum * torch.exp(shift - running_max) + torch.exp(block - shift[..., None]).sum(dim=-1)
    return new_max, new_sum


def online_softmax_update__in_place_sum(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.amax(dim=-1))
    shift = torch.where(new_max == float("-inf"), torch.zeros_like(new_max), new_max)
    running_sum *= torch.exp(running_max - shift)
    running_sum += torch.exp(block - shift[..., None]).sum(dim=-1)
    return new_max, running_sum


def block_score_grad__missing_weights_factor(grad_out, out, weights, value):
    dp = grad_out @ value.transpose(-2, -1)
    delta = (grad_out * out).sum(dim=-1, keepdim=True)
    return dp - delta


def block_score_grad__sign_flipped(grad_out, out, weights, value):
    dp = grad_out @ value.transpose(-2, -1)
    delta = (grad_out * out).sum(dim=-1, keepdim=True)
    return weights * (delta - dp)


def block_score_grad__delta_without_keepdim(grad_out, out, weights, value):
    dp = grad_out @ value.transpose(-2, -1)
    delta = (grad_out * out).sum(dim=-1)
    return weights * (dp - delta)


def sliding_window_mask__strict_inequality(L, window):
    i = torch.arange(L)
    return (i[:, None] - i[None, :]).abs() < window


def sliding_window_mask__asymmetric_band(L, window):
    ones = torch.ones(L, L, dtype=torch.bool)
    return torch.tril(ones, diagonal=window - 1) & torch.triu(ones, diagonal=-window)


def attend_with_cache__new_token_first(q_new, k_new, v_new, k_cache, v_cache):
    k_cache = torch.cat([k_new, k_cache], dim=2)
    v_cache = torch.cat([v_new, v_cache], dim=2)
    weights = (q_new @ k_cache.transpose(-2, -1) / math.sqrt(q_new.shape[-1])).softmax(dim=-1)
    return weights @ v_cache, k_cache, v_cache


def attend_with_cache__scale_missing(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_cache, k_new], dim=2)
    v = torch.cat([v_cache, v_new], dim=2)
    weights = torch.softmax(q_new @ k.transpose(-2, -1), dim=-1)
    return weights @ v, k, v


def attend_with_cache__softmax_over_query_axis(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_cache, k_new], dim=2)
    v = torch.cat([v_cache, v_new], dim=2)
    scores = q_new @ k.transpose(-2, -1) / math.sqrt(q_new.shape[-1])
    weights = scores.softmax(dim=-2)
    return weights @ v, k, v


def online_softmax_update__block_term_guarded_only(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.amax(dim=-1))
    shift = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
    new_sum = running_sum * torch.exp(running_max - new_max) + torch.exp(block - shift[..., None]).sum(dim=-1)
    return new_max, new_sum


def block_score_grad__dp_from_out(grad_out, out, weights, value):
    dp = out @ value.transpose(-2, -1)
    delta = (grad_out * out).sum(dim=-1, keepdim=True)
    return weights * (dp - delta)


def sliding_window_mask__abs_forgotten(L, window):
    i = torch.arange(L)
    return (i[:, None] - i[None, :]) <= window


def sliding_window_mask__one_too_wide(L, window):
    i = torch.arange(L)
    return (i[:, None] - i[None, :]).abs() <= window + 1


def attend_with_cache__v_cache_gets_k(q_new, k_new, v_new, k_cache, v_cache):
    k_cache = torch.cat([k_cache, k_new], dim=2)
    v_cache = torch.cat([v_cache, k_new], dim=2)
    weights = (q_new @ k_cache.transpose(-2, -1) / math.sqrt(q_new.shape[-1])).softmax(dim=-1)
    return weights @ v_cache, k_cache, v_cache


ANSWERS = [
    {"exercise": "ch6.online_softmax_update", "fn": online_softmax_update__sum_not_rescaled,
     "mistake": "adds the new block's exponentials without rescaling the old sum by exp(m - m')",
     "part": "the rescaling of the running sum"},
    {"exercise": "ch6.online_softmax_update", "fn": online_softmax_update__rescale_inverted,
     "mistake": "rescales the old sum by exp(m' - m) instead of exp(m - m') (the exponent upside down)",
     "part": "the rescaling factor (inverted)"},
    {"exercise": "ch6.online_softmax_update", "fn": online_softmax_update__in_place_sum,
     "mistake": "updates running_sum in place with *= and +=, changing the caller's tensor",
     "part": "an input modified in place"},
    {"exercise": "ch6.block_score_grad", "fn": block_score_grad__missing_weights_factor,
     "mistake": "returns dP - D, forgetting to multiply by P",
     "part": "the factor P"},
    {"exercise": "ch6.block_score_grad", "fn": block_score_grad__sign_flipped,
     "mistake": "computes P * (D - dP), the gradient with the wrong sign",
     "part": "the sign"},
    {"exercise": "ch6.block_score_grad", "fn": block_score_grad__delta_without_keepdim,
     "mistake": "sums D without keepdim, so it broadcasts along the queries instead of the keys",
     "part": "D's shape (broadcast along the wrong axis)"},
    {"exercise": "ch6.sliding_window_mask", "fn": sliding_window_mask__strict_inequality,
     "mistake": "uses |i - j| < window, so the keys exactly window away are left out",
     "part": "the band edge (one too narrow)"},
    {"exercise": "ch6.sliding_window_mask", "fn": sliding_window_mask__asymmetric_band,
     "mistake": "tril with window - 1 and triu with -window: one key too few after the query",
     "part": "the upper edge of the band (off by one)"},
    {"exercise": "ch6.attend_with_cache", "fn": attend_with_cache__new_token_first,
     "mistake": "puts the new token at the front of the caches instead of the end",
     "part": "where the new token goes in the caches"},
    {"exercise": "ch6.attend_with_cache", "fn": attend_with_cache__scale_missing,
     "mistake": "forgets to divide the scores by sqrt(D)",
     "part": "the scale"},
    {"exercise": "ch6.attend_with_cache", "fn": attend_with_cache__softmax_over_query_axis,
     "mistake": "takes the softmax over dim -2, the single query, so every weight is 1",
     "part": "the softmax dimension"},
    {"exercise": "ch6.online_softmax_update", "fn": online_softmax_update__block_term_guarded_only,
     "mistake": "guards the block's exponentials against -inf - (-inf) but not the rescale factor: NaN rows",
     "part": "fully masked rows (rescale factor unguarded)"},
    {"exercise": "ch6.block_score_grad", "fn": block_score_grad__dp_from_out,
     "mistake": "computes dP from the output O instead of the upstream gradient dO: dP = O Vᵀ",
     "part": "dP (from O instead of dO)"},
    {"exercise": "ch6.sliding_window_mask", "fn": sliding_window_mask__abs_forgotten,
     "mistake": "forgets the abs(): i - j <= window lets the query see every later key",
     "part": "the keys after the query (no upper edge)"},
    {"exercise": "ch6.sliding_window_mask", "fn": sliding_window_mask__one_too_wide,
     "mistake": "uses |i - j| <= window + 1, one key too many on each side",
     "part": "the band edge (one too wide)"},
    {"exercise": "ch6.attend_with_cache", "fn": attend_with_cache__v_cache_gets_k,
     "mistake": "a copy-paste slip: appends k_new to the value cache instead of v_new",
     "part": "the value cache update"},
]
