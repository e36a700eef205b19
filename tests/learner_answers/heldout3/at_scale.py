"""Wrong answers to chapter 6, batch 3, heldout3 half: written blind, from the notebook only."""

import math

import torch
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def online_softmax_update__block_max_over_dim0(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.amax(dim=0))
    shift = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
    return new_max, running_sum * torch.exp(running_max - shift) + torch.exp(block - shift[..., None]).sum(-1)


def online_softmax_update__rescales_sum_in_place(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.amax(dim=-1))
    shift = torch.where(new_max == float("-inf"), torch.zeros_like(new_max), new_max)
    running_sum *= torch.exp(running_max - shift)
    running_sum += torch.exp(block - shift[..., None]).sum(dim=-1)
    return new_max, running_sum


def online_softmax_update__returns_shifted_max(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.amax(dim=-1))
    new_max = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)  # avoid -inf - -inf
    new_sum = running_sum * torch.exp(running_max - new_max) + torch.exp(block - new_max[..., None]).sum(-1)
    return new_max, new_sum


def block_score_grad__value_not_transposed(grad_out, out, weights, value):
    d_p = grad_out @ value
    d = (grad_out * out).sum(dim=-1, keepdim=True)
    return weights * (d_p - d)


def block_score_grad__precedence(grad_out, out, weights, value):
    d_p = grad_out @ value.transpose(-2, -1)
    d = (grad_out * out).sum(dim=-1, keepdim=True)
    return weights * d_p - d


def block_score_grad__dp_from_out(grad_out, out, weights, value):
    d_p = out @ value.transpose(-2, -1)
    d = (grad_out * out).sum(dim=-1, keepdim=True)
    return weights * (d_p - d)


def sliding_window_mask__window_as_width(L, window):
    i = torch.arange(L)
    return (i[:, None] - i[None, :]).abs() <= window // 2


def sliding_window_mask__no_abs(L, window):
    i = torch.arange(L)
    return i[:, None] - i[None, :] <= window


def sliding_window_mask__float_band(L, window):
    return torch.ones(L, L).triu(-window).tril(window)


def attend_with_cache__new_token_first(q_new, k_new, v_new, k_cache, v_cache):
    k_cache = torch.cat([k_new, k_cache], dim=-2)
    v_cache = torch.cat([v_new, v_cache], dim=-2)
    weights = torch.softmax(q_new @ k_cache.transpose(-2, -1) / math.sqrt(q_new.shape[-1]), dim=-1)
    return weights @ v_cache, k_cache, v_cache


def attend_with_cache__concat_on_dim_one(q_new, k_new, v_new, k_cache, v_cache):
    k_cache = torch.cat([k_cache, k_new], dim=1)
    v_cache = torch.cat([v_cache, v_new], dim=1)
    weights = torch.softmax(q_new @ k_cache.transpose(-2, -1) / math.sqrt(q_new.shape[-1]), dim=-1)
    return weights @ v_cache, k_cache, v_cache


def attend_with_cache__unscaled(q_new, k_new, v_new, k_cache, v_cache):
    k_cache = torch.cat([k_cache, k_new], dim=-2)
    v_cache = torch.cat([v_cache, v_new], dim=-2)
    weights = torch.softmax(q_new @ k_cache.transpose(-2, -1), dim=-1)
    return weights @ v_cache, k_cache, v_cache


def attend_with_cache__caches_returned_swapped(q_new, k_new, v_new, k_cache, v_cache):
    k_cache = torch.cat([k_cache, k_new], dim=-2)
    v_cache = torch.cat([v_cache, v_new], dim=-2)
    weights = torch.softmax(q_new @ k_cache.transpose(-2, -1) / math.sqrt(q_new.shape[-1]), dim=-1)
    return weights @ v_cache, v_cache, k_cache


ANSWERS = [
    {
        "exercise": "ch6.online_softmax_update",
        "fn": online_softmax_update__block_max_over_dim0,
        "mistake": "takes the block's max over dim 0 instead of the last dim, right only for a single row",
        "part": "the block max",
    },
    {
        "exercise": "ch6.online_softmax_update",
        "fn": online_softmax_update__rescales_sum_in_place,
        "mistake": "updates running_sum in place with *= and +=, changing the caller's tensor",
        "part": "the input running_sum, modified in place",
    },
    {
        "exercise": "ch6.online_softmax_update",
        "fn": online_softmax_update__returns_shifted_max,
        "mistake": "replaces a -inf max by 0 for the shift and returns that 0 as the new max instead of -inf",
        "part": "the max of a row that has seen only -inf",
    },
    {
        "exercise": "ch6.block_score_grad",
        "fn": block_score_grad__value_not_transposed,
        "mistake": "computes dP = dO @ V without transposing V",
        "part": "dP",
    },
    {
        "exercise": "ch6.block_score_grad",
        "fn": block_score_grad__precedence,
        "mistake": "writes P * dP - D, so D is not multiplied by P",
        "part": "the D term",
    },
    {
        "exercise": "ch6.block_score_grad",
        "fn": block_score_grad__dp_from_out,
        "mistake": "computes dP from out instead of grad_out (O V^T instead of dO V^T)",
        "part": "dP",
    },
    {
        "exercise": "ch6.sliding_window_mask",
        "fn": sliding_window_mask__window_as_width,
        "mistake": "reads window as the total width and keeps |i - j| <= window // 2",
        "part": "the width of the window",
    },
    {
        "exercise": "ch6.sliding_window_mask",
        "fn": sliding_window_mask__no_abs,
        "mistake": "forgets the abs: i - j <= window keeps every future key",
        "part": "the future side of the window",
    },
    {
        "exercise": "ch6.sliding_window_mask",
        "fn": sliding_window_mask__float_band,
        "mistake": "builds the band from torch.ones and returns it as float, not bool",
        "part": "the dtype of the mask",
    },
    {
        "exercise": "ch6.attend_with_cache",
        "fn": attend_with_cache__new_token_first,
        "mistake": "puts the new key and value at the front of the caches instead of at the end",
        "part": "where the new token goes in the caches",
    },
    {
        "exercise": "ch6.attend_with_cache",
        "fn": attend_with_cache__concat_on_dim_one,
        "mistake": "concatenates along dim 1 (the heads) instead of the sequence dim -2",
        "part": "the dim the caches grow along",
    },
    {
        "exercise": "ch6.attend_with_cache",
        "fn": attend_with_cache__unscaled,
        "mistake": "forgets the 1/sqrt(D) scale of the scores",
        "part": "the scale of the scores",
    },
    {
        "exercise": "ch6.attend_with_cache",
        "fn": attend_with_cache__caches_returned_swapped,
        "mistake": "returns (output, v_cache, k_cache), the two caches in the wrong order",
        "part": "the order of the returned caches",
    },
]
