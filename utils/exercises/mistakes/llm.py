"""Plausible wrong answers to chapter 7's exercises: RMSNorm, rotate-half RoPE, grouped-query attention and
the attention-sink window mask.

Each function is the ``fn`` of a :class:`~utils.exercises.definition.Mistake` declared, with its diagnosis,
in :mod:`utils.exercises.llm`, in the same order. Each changes one thing of the right answer, which is
written out here where the mistakes share it (``_rope``, ``_attend``, ``_sink_mask``). Masks: True = may
attend.
"""

from __future__ import annotations

import math

import torch

# --------------------------------------------------------------------------------------------------
# ch7.rms_norm
# --------------------------------------------------------------------------------------------------


def _mean_square(x, dim=-1):
    return x.pow(2).mean(dim=dim, keepdim=True)


def _rms_layer_norm(x, weight, eps=1e-6):
    centred = x - x.mean(dim=-1, keepdim=True)
    return centred / torch.sqrt(_mean_square(centred) + eps) * weight


def _rms_eps_outside(x, weight, eps=1e-6):
    return x / (torch.sqrt(_mean_square(x)) + eps) * weight


def _rms_eps_floor(x, weight, eps=1e-6):  # rms.clamp_min(eps): eps a floor, not added (F.normalize's way too)
    return x / torch.sqrt(_mean_square(x)).clamp_min(eps) * weight


def _rms_no_eps(x, weight, eps=1e-6):
    return x / torch.sqrt(_mean_square(x)) * weight


def _rms_sum(x, weight, eps=1e-6):
    return x / torch.sqrt(x.pow(2).sum(dim=-1, keepdim=True) + eps) * weight


def _rms_no_weight(x, weight, eps=1e-6):
    return x / torch.sqrt(_mean_square(x) + eps)


def _rms_weight_added(x, weight, eps=1e-6):
    return x / torch.sqrt(_mean_square(x) + eps) + weight


def _rms_rows(x, weight, eps=1e-6):  # over the positions (dim -2): BatchNorm-like
    return x / torch.sqrt(_mean_square(x, dim=-2) + eps) * weight


def _rms_first_dim(x, weight, eps=1e-6):
    return x / torch.sqrt(_mean_square(x, dim=0) + eps) * weight


def _rms_std(x, weight, eps=1e-6):  # torch.var divides by E - 1 and subtracts the mean
    return x / torch.sqrt(x.var(dim=-1, keepdim=True) + eps) * weight


def _rms_std_biased(x, weight, eps=1e-6):
    return x / torch.sqrt(x.var(dim=-1, keepdim=True, unbiased=False) + eps) * weight


def _rms_no_sqrt(x, weight, eps=1e-6):
    return x / (_mean_square(x) + eps) * weight


def _rms_no_keepdim(x, weight, eps=1e-6):
    return x / torch.sqrt(x.pow(2).mean(dim=-1) + eps) * weight


def _rms_eps_ignored(x, weight, eps=1e-6):  # the default written in, whatever eps the call passes
    return x / torch.sqrt(_mean_square(x) + 1e-6) * weight


# --------------------------------------------------------------------------------------------------
# ch7.rotate_half_rope
# --------------------------------------------------------------------------------------------------


def _inv_freq(D, base, exponent=None):
    two_i = torch.arange(0, D, 2, dtype=torch.float64)
    return base ** (-(two_i / D if exponent is None else exponent(two_i, D)))  # (D/2,)


def _rotate_half(x):
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def _rope(x, positions, base=10000.0, *, inv_freq=None, layout="cat", rotate=_rotate_half, swap=False):
    """Rotate-half RoPE, with one part changeable: the frequencies, how the angles fill D, rotate_half."""
    D = x.shape[-1]
    freq = _inv_freq(D, base) if inv_freq is None else inv_freq
    angle = positions.to(torch.float64)[:, None] * freq  # (L, D/2)
    angle = torch.cat((angle, angle), dim=-1) if layout == "cat" else angle.repeat_interleave(2, dim=-1)
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    if swap:
        cos, sin = sin, cos
    return x * cos + rotate(x) * sin


def _rope_interleaved(x, positions, base=10000.0):  # chapter 4's layout: pairs (2i, 2i + 1)
    angle = positions.to(torch.float64)[:, None] * _inv_freq(x.shape[-1], base)  # (L, D/2)
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


def _rope_sign_flipped(x, positions, base=10000.0):
    def rotate(v):
        first, second = v.chunk(2, dim=-1)
        return torch.cat((second, -first), dim=-1)
    return _rope(x, positions, base, rotate=rotate)


def _rope_repeat_interleaved(x, positions, base=10000.0):
    return _rope(x, positions, base, layout="interleave")


def _rope_positions_ignored(x, positions, base=10000.0):
    return _rope(x, torch.arange(x.shape[-2]), base)


def _rope_base_ignored(x, positions, base=10000.0):
    return _rope(x, positions, 10000.0)


def _rope_pair_index(x, positions, base=10000.0):  # base^(-i/D): i, not 2i
    return _rope(x, positions, base, inv_freq=_inv_freq(x.shape[-1], base, lambda two_i, D: two_i / 2 / D))


def _rope_exponent_doubled(x, positions, base=10000.0):  # arange(0, D, 2) / (D / 2): 4i/D
    return _rope(x, positions, base, inv_freq=_inv_freq(x.shape[-1], base, lambda two_i, D: two_i / (D // 2)))


def _rope_exponent_positive(x, positions, base=10000.0):
    return _rope(x, positions, base, inv_freq=_inv_freq(x.shape[-1], base, lambda two_i, D: -two_i / D))


def _rope_cos_sin_swapped(x, positions, base=10000.0):
    return _rope(x, positions, base, swap=True)


def _rope_no_minus(x, positions, base=10000.0):  # rotate_half as [x2, x1]: a reflection, not a rotation
    def rotate(v):
        first, second = v.chunk(2, dim=-1)
        return torch.cat((second, first), dim=-1)
    return _rope(x, positions, base, rotate=rotate)


def _rope_chunk_first_dim(x, positions, base=10000.0):  # x.chunk(2): along dim 0
    def rotate(v):
        first, second = v.chunk(2)
        return torch.cat((-second, first), dim=-1)
    return _rope(x, positions, base, rotate=rotate)


def _rope_angles_cat_first_dim(x, positions, base=10000.0):  # torch.cat((angle, angle)): (2L, D/2)
    angle = positions.to(torch.float64)[:, None] * _inv_freq(x.shape[-1], base)
    angle = torch.cat((angle, angle))
    return x * angle.cos().to(x.dtype) + _rotate_half(x) * angle.sin().to(x.dtype)


def _rope_no_outer_product(x, positions, base=10000.0):  # positions * θ: entry by entry, not (L, D/2)
    angle = positions.to(torch.float64) * _inv_freq(x.shape[-1], base)
    angle = torch.cat((angle, angle), dim=-1)
    return x * angle.cos().to(x.dtype) + _rotate_half(x) * angle.sin().to(x.dtype)


# --------------------------------------------------------------------------------------------------
# ch7.grouped_query_attention
# --------------------------------------------------------------------------------------------------


def _attend(query, key, value, is_causal=False, *, scale=None, dim=-1, diagonal=0, causal=True, tiled=False,
            G=None, values_repeated=True, masking="fill"):
    """Grouped-query attention with one part changeable: how the K/V heads are repeated (and how many
    times), the scale, the softmax's dim, which diagonal the causal mask keeps and how it is applied."""
    G = query.shape[1] // key.shape[1] if G is None else G
    if tiled:
        key, value = key.repeat(1, G, 1, 1), value.repeat(1, G, 1, 1)
    else:
        key = key.repeat_interleave(G, dim=1)
        value = value.repeat_interleave(G, dim=1) if values_repeated else value
    scores = query @ key.transpose(-2, -1) / (math.sqrt(query.shape[-1]) if scale is None else scale)
    if is_causal and causal:
        L, S = scores.shape[-2:]
        keep = torch.ones(L, S, dtype=torch.bool).tril(diagonal=diagonal)
        if masking == "multiply":  # scores times a 0/1 mask: the future keys score 0, not -inf
            scores = scores * keep
        else:  # "inverted": masked_fill where the kept keys are True, so the past is hidden
            scores = scores.masked_fill(keep if masking == "inverted" else ~keep, float("-inf"))
    return torch.softmax(scores, dim=dim) @ value


def _gqa_tiled(query, key, value, is_causal=False):
    return _attend(query, key, value, is_causal, tiled=True)


def _gqa_query_mean(query, key, value, is_causal=False):  # the queries of a group averaged: Q shared, not K/V
    N, H, L, D = query.shape
    H_kv = key.shape[1]
    shared = query.reshape(N, H_kv, H // H_kv, L, D).mean(dim=2)  # (N, H_kv, L, D)
    return _attend(shared, key, value, is_causal).repeat_interleave(H // H_kv, dim=1)


def _gqa_query_heads_dropped(query, key, value, is_causal=False):  # one query head per K/V head: H_kv outputs
    return _attend(query[:, ::query.shape[1] // key.shape[1]], key, value, is_causal)


def _gqa_no_scale(query, key, value, is_causal=False):
    return _attend(query, key, value, is_causal, scale=1.0)


def _gqa_scale_dv(query, key, value, is_causal=False):
    return _attend(query, key, value, is_causal, scale=math.sqrt(value.shape[-1]))


def _gqa_scale_keys(query, key, value, is_causal=False):  # sqrt(S), key.shape[-2]: the number of keys
    return _attend(query, key, value, is_causal, scale=math.sqrt(key.shape[-2]))


def _gqa_softmax_queries(query, key, value, is_causal=False):
    return _attend(query, key, value, is_causal, dim=-2)


def _gqa_causal_one_ahead(query, key, value, is_causal=False):  # tril(diagonal=1): the next key too
    return _attend(query, key, value, is_causal, diagonal=1)


def _gqa_causal_no_self(query, key, value, is_causal=False):  # tril(diagonal=-1): not itself
    return _attend(query, key, value, is_causal, diagonal=-1)


def _gqa_causal_ignored(query, key, value, is_causal=False):
    return _attend(query, key, value, is_causal, causal=False)


def _gqa_causal_always(query, key, value, is_causal=False):  # the mask applied whatever is_causal says
    return _attend(query, key, value, True)


def _gqa_causal_multiplied(query, key, value, is_causal=False):  # scores * tril: exp(0) = 1 for the future
    return _attend(query, key, value, is_causal, masking="multiply")


def _gqa_causal_inverted(query, key, value, is_causal=False):  # masked_fill(tril, -inf): the past hidden
    return _attend(query, key, value, is_causal, masking="inverted")


def _gqa_returns_weights(query, key, value, is_causal=False):  # (output, weights), as chapter 2's function
    identity = torch.eye(key.shape[2], dtype=value.dtype).expand(*key.shape[:2], -1, -1)  # values = weights
    return _attend(query, key, value, is_causal), _attend(query, key, identity, is_causal)


def _gqa_values_not_repeated(query, key, value, is_causal=False):  # K repeated, V left with H_kv heads
    return _attend(query, key, value, is_causal, values_repeated=False)


def _gqa_group_inverted(query, key, value, is_causal=False):  # G = H_kv // H: 0 wherever H > H_kv
    return _attend(query, key, value, is_causal, G=key.shape[1] // query.shape[1])


# --------------------------------------------------------------------------------------------------
# ch7.sink_window_mask
# --------------------------------------------------------------------------------------------------


def _offsets(L):
    i = torch.arange(L)
    return i[:, None] - i[None, :], i[None, :]  # (L, L) i - j, (1, L) j


def _sink_mask(L, window, sinks, *, recent=None, sink_end=None):
    """The right mask with the number of recent keys and the end of the sinks changeable."""
    offset, j = _offsets(L)
    recent = window if recent is None else recent
    sink_end = sinks if sink_end is None else sink_end
    return (offset >= 0) & ((offset < recent) | (j < sink_end))


def _sink_window_plus_one(L, window, sinks):  # i - j <= window
    return _sink_mask(L, window, sinks, recent=window + 1)


def _sink_window_minus_one(L, window, sinks):
    return _sink_mask(L, window, sinks, recent=window - 1)


def _sink_future(L, window, sinks):  # the sink columns set after the causal cut
    offset, _ = _offsets(L)
    mask = (offset >= 0) & (offset < window)
    mask[:, :sinks] = True
    return mask


def _sink_future_past_window(L, window, sinks):  # (j <= i) & (i - j < window) | (j < sinks) & (i >= window)
    offset, j = _offsets(L)
    i = offset + j
    return (offset >= 0) & (offset < window) | (j < sinks) & (i >= window)


def _sink_ignored(L, window, sinks):
    return _sink_mask(L, window, 0)


def _sink_not_causal(L, window, sinks):  # a symmetric band: |i - j| < window
    offset, j = _offsets(L)
    return (offset.abs() < window) | (j < sinks)


def _sink_no_lower_bound(L, window, sinks):  # i - j < window alone: every future key kept
    offset, j = _offsets(L)
    return (offset < window) | (j < sinks)


def _sink_inside_window(L, window, sinks):  # window - sinks recent keys: the sinks counted in the window
    return _sink_mask(L, window, sinks, recent=window - sinks)


def _sink_one_too_many(L, window, sinks):  # j <= sinks
    return _sink_mask(L, window, sinks, sink_end=sinks + 1)


def _sink_inverted(L, window, sinks):
    return ~_sink_mask(L, window, sinks)


def _sink_additive(L, window, sinks):  # the mask added to scores (0 / -inf), not the bool mask itself
    return torch.where(_sink_mask(L, window, sinks), 0.0, float("-inf"))


def _sink_python_and_or(L, window, sinks):  # `and` / `or` ask a whole tensor for one truth value
    offset, j = _offsets(L)
    return (offset >= 0) and ((offset < window) or (j < sinks))
