"""Plausible wrong answers to ``ch6.attend_with_cache``, one decoding step with a KV cache.

Each function is the ``fn`` of a :class:`~utils.exercises.definition.Mistake` declared, with its
diagnosis, in :mod:`utils.exercises.at_scale`. Where a mistake changes the right answer's output, the right
answer is written out here (``_attend_with_cache``), as that module's reference computes it.
"""

from __future__ import annotations

import math

import torch

# --------------------------------------------------------------------------------------------------
# ch6.attend_with_cache
# --------------------------------------------------------------------------------------------------


def _attend_with_cache(q_new, k_new, v_new, k_cache, v_cache):
    """The right step, as :func:`utils.exercises.at_scale.attend_with_cache_reference`."""
    k_all = torch.cat([k_cache, k_new], dim=-2)  # (N, H, T + 1, D)
    v_all = torch.cat([v_cache, v_new], dim=-2)  # (N, H, T + 1, D)
    weights = torch.softmax(q_new @ k_all.transpose(-2, -1) / math.sqrt(q_new.shape[-1]), dim=-1)  # (N, H, 1, T + 1)
    return weights @ v_all, k_all, v_all


def _attend(query, key, value, scale=None, dim=-1):
    """Attention written out, as a learner writes it; ``scale`` and ``dim`` are what the mistakes change."""
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    return torch.softmax(query @ key.transpose(-2, -1) * scale, dim=dim) @ value


def _appended(k_new, v_new, k_cache, v_cache):
    return torch.cat([k_cache, k_new], dim=-2), torch.cat([v_cache, v_new], dim=-2)  # (N, H, T + 1, D) each


def _cache_only_new(q_new, k_new, v_new, k_cache, v_cache):
    k_all, v_all = _appended(k_new, v_new, k_cache, v_cache)
    return _attend(q_new, k_new, v_new), k_all, v_all


def _cache_before_append(q_new, k_new, v_new, k_cache, v_cache):  # also: the new key masked out
    k_all, v_all = _appended(k_new, v_new, k_cache, v_cache)
    return _attend(q_new, k_cache, v_cache), k_all, v_all


def _cache_prepend(q_new, k_new, v_new, k_cache, v_cache):
    k_all, v_all = torch.cat([k_new, k_cache], dim=-2), torch.cat([v_new, v_cache], dim=-2)
    return _attend(q_new, k_all, v_all), k_all, v_all


def _cache_not_updated(q_new, k_new, v_new, k_cache, v_cache):
    output, _, _ = _attend_with_cache(q_new, k_new, v_new, k_cache, v_cache)
    return output, k_cache, v_cache


def _cache_swapped(q_new, k_new, v_new, k_cache, v_cache):
    output, k_all, v_all = _attend_with_cache(q_new, k_new, v_new, k_cache, v_cache)
    return output, v_all, k_all


def _cache_no_scale(q_new, k_new, v_new, k_cache, v_cache):
    k_all, v_all = _appended(k_new, v_new, k_cache, v_cache)
    return _attend(q_new, k_all, v_all, scale=1.0), k_all, v_all


def _cache_scale_by_length(q_new, k_new, v_new, k_cache, v_cache):
    k_all, v_all = _appended(k_new, v_new, k_cache, v_cache)
    return _attend(q_new, k_all, v_all, scale=1 / math.sqrt(k_all.shape[-2])), k_all, v_all


def _cache_scale_by_d(q_new, k_new, v_new, k_cache, v_cache):
    k_all, v_all = _appended(k_new, v_new, k_cache, v_cache)
    return _attend(q_new, k_all, v_all, scale=1 / q_new.shape[-1]), k_all, v_all


def _cache_scale_by_model_dim(q_new, k_new, v_new, k_cache, v_cache):
    k_all, v_all = _appended(k_new, v_new, k_cache, v_cache)
    return _attend(q_new, k_all, v_all, scale=1 / math.sqrt(q_new.shape[1] * q_new.shape[-1])), k_all, v_all


def _cache_softmax_queries(q_new, k_new, v_new, k_cache, v_cache):
    k_all, v_all = _appended(k_new, v_new, k_cache, v_cache)
    return _attend(q_new, k_all, v_all, dim=-2), k_all, v_all


def _cache_first_key_only(q_new, k_new, v_new, k_cache, v_cache):
    # causal_mask(S)[0], tril(ones(1, S)) or is_causal=True with one query: top-left aligned, key 0 only
    k_all, v_all = _appended(k_new, v_new, k_cache, v_cache)
    return _attend(q_new, k_all[..., :1, :], v_all[..., :1, :]), k_all, v_all


def _cache_weights(q_new, k_new, v_new, k_cache, v_cache):
    k_all, v_all = _appended(k_new, v_new, k_cache, v_cache)
    return torch.softmax(q_new @ k_all.transpose(-2, -1) / math.sqrt(q_new.shape[-1]), dim=-1), k_all, v_all


def _cache_query_appended(q_new, k_new, v_new, k_cache, v_cache):
    k_all, v_all = _appended(q_new, v_new, k_cache, v_cache)
    return _attend(q_new, k_all, v_all), k_all, v_all


def _cache_squeezed(q_new, k_new, v_new, k_cache, v_cache):
    output, k_all, v_all = _attend_with_cache(q_new, k_new, v_new, k_cache, v_cache)
    return output.squeeze(-2), k_all, v_all


def _cache_values_not_appended(q_new, k_new, v_new, k_cache, v_cache):
    k_all = torch.cat([k_cache, k_new], dim=-2)
    return _attend(q_new, k_all, v_cache), k_all, torch.cat([v_cache, v_new], dim=-2)  # raises: T + 1 vs T


def _cache_cat_last(q_new, k_new, v_new, k_cache, v_cache):
    k_all, v_all = torch.cat([k_cache, k_new], dim=-1), torch.cat([v_cache, v_new], dim=-1)  # raises
    return _attend(q_new, k_all, v_all), k_all, v_all


def _cache_cat_heads(q_new, k_new, v_new, k_cache, v_cache):
    k_all, v_all = torch.cat([k_cache, k_new], dim=1), torch.cat([v_cache, v_new], dim=1)  # raises
    return _attend(q_new, k_all, v_all), k_all, v_all


def _cache_stack(q_new, k_new, v_new, k_cache, v_cache):
    k_all, v_all = torch.stack([k_cache, k_new], dim=-2), torch.stack([v_cache, v_new], dim=-2)  # raises
    return _attend(q_new, k_all, v_all), k_all, v_all


def _cache_no_transpose(q_new, k_new, v_new, k_cache, v_cache):
    k_all, v_all = _appended(k_new, v_new, k_cache, v_cache)
    return torch.softmax(q_new @ k_all / math.sqrt(q_new.shape[-1]), dim=-1) @ v_all, k_all, v_all  # raises


def _cache_scale_after_softmax(q_new, k_new, v_new, k_cache, v_cache):
    k_all, v_all = _appended(k_new, v_new, k_cache, v_cache)
    weights = torch.softmax(q_new @ k_all.transpose(-2, -1), dim=-1) / math.sqrt(q_new.shape[-1])
    return weights @ v_all, k_all, v_all


def _cache_scale_multiplied(q_new, k_new, v_new, k_cache, v_cache):
    k_all, v_all = _appended(k_new, v_new, k_cache, v_cache)
    return _attend(q_new, k_all, v_all, scale=math.sqrt(q_new.shape[-1])), k_all, v_all


def _cache_scale_by_cache_length(q_new, k_new, v_new, k_cache, v_cache):
    k_all, v_all = _appended(k_new, v_new, k_cache, v_cache)
    return _attend(q_new, k_all, v_all, scale=1 / math.sqrt(k_cache.shape[-2])), k_all, v_all


def _cache_keys_as_values(q_new, k_new, v_new, k_cache, v_cache):
    k_all, v_all = _appended(k_new, v_new, k_cache, v_cache)
    return _attend(q_new, k_all, k_all), k_all, v_all


def _cache_full_transpose(q_new, k_new, v_new, k_cache, v_cache):
    k_all, v_all = _appended(k_new, v_new, k_cache, v_cache)
    reversed_keys = k_all.permute(3, 2, 1, 0)  # what k_all.T does to a 4-D tensor: (D, T + 1, H, N)
    return torch.softmax(q_new @ reversed_keys / math.sqrt(q_new.shape[-1]), dim=-1) @ v_all, k_all, v_all  # raises


def _cache_cat_default_dim(q_new, k_new, v_new, k_cache, v_cache):
    k_all, v_all = torch.cat([k_cache, k_new]), torch.cat([v_cache, v_new])  # dim 0, the batch: raises
    return _attend(q_new, k_all, v_all), k_all, v_all


def _cache_keys_and_values_swapped(q_new, k_new, v_new, k_cache, v_cache):  # scores against V, average of K
    k_all, v_all = _appended(k_new, v_new, k_cache, v_cache)
    return _attend(q_new, v_all, k_all), k_all, v_all
