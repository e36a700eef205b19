"""Blind held-out batch for chapter 7 (heldout_ch7): wrong answers written from the student notebook only.

Written from the prose, formulas, templates and hints of chapters/07_attention_in_a_real_model.ipynb, without
reading the course's references, listed mistakes, probes, diagnoses or the tune_ch7 answers. Each answer was
checked to differ from a careful hand-written version (or from PyTorch's F.rms_norm and
F.scaled_dot_product_attention) on some valid input, or to change its input in place.
"""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401

ROPE_BASE = 100000.0  # a notebook cell: "SmolLM2 uses 100000"
GROUPS = 3  # a notebook cell: SmolLM2 has H = 9 query heads and H_kv = 3, G = 3


# ---------------------------------------------------------------- Exercise 1: rms_norm

def rms_norm__eps_outside_sqrt(x, weight, eps=1e-6):
    rms = x.pow(2).mean(dim=-1, keepdim=True).sqrt()
    return x / (rms + eps) * weight


def rms_norm__no_keepdim(x, weight, eps=1e-6):
    ms = x.pow(2).mean(dim=-1)
    return x * torch.rsqrt(ms + eps) * weight


def rms_norm__sum_not_mean(x, weight, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).sum(dim=-1, keepdim=True) + eps) * weight


def rms_norm__square_of_mean(x, weight, eps=1e-6):
    ms = x.mean(dim=-1, keepdim=True) ** 2
    return x * torch.rsqrt(ms + eps) * weight


def rms_norm__subtracts_mean(x, weight, eps=1e-6):
    centred = x - x.mean(dim=-1, keepdim=True)
    return centred * torch.rsqrt(centred.pow(2).mean(dim=-1, keepdim=True) + eps) * weight


def rms_norm__divides_by_rsqrt(x, weight, eps=1e-6):
    return x / torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight


def rms_norm__l2_norm(x, weight, eps=1e-6):
    return x / (x.norm(dim=-1, keepdim=True) + eps) * weight


def rms_norm__float32_upcast_kept(x, weight, eps=1e-6):
    x = x.float()
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.float()


def rms_norm__in_place(x, weight, eps=1e-6):
    x.mul_(torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps))
    return x * weight


def rms_norm__eps_hard_coded(x, weight, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6) * weight


def rms_norm__no_gain(x, weight, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)


def rms_norm__mean_over_dim0(x, weight, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(dim=0, keepdim=True) + eps) * weight


# ---------------------------------------------------------------- Exercise 2: rotate_half_rope

def _angles(positions, D, base):
    inv_freq = base ** (-torch.arange(0, D, 2) / D)
    return positions[:, None] * inv_freq  # (L, D/2)


def rotate_half_rope__rotate_half_sign(x, positions, base=10000.0):
    angle = _angles(positions, x.shape[-1], base)
    emb = torch.cat((angle, angle), dim=-1)
    x1, x2 = x.chunk(2, dim=-1)
    rotated = torch.cat((x2, -x1), dim=-1)
    return x * emb.cos() + rotated * emb.sin()


def rotate_half_rope__angles_interleaved(x, positions, base=10000.0):
    angle = _angles(positions, x.shape[-1], base)
    emb = angle.repeat_interleave(2, dim=-1)
    x1, x2 = x.chunk(2, dim=-1)
    rotated = torch.cat((-x2, x1), dim=-1)
    return x * emb.cos() + rotated * emb.sin()


def rotate_half_rope__pairs_interleaved(x, positions, base=10000.0):
    angle = _angles(positions, x.shape[-1], base)
    cos, sin = angle.cos(), angle.sin()
    even, odd = x[..., 0::2], x[..., 1::2]
    out = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
    return out.flatten(-2)


def rotate_half_rope__exponent_i_over_D(x, positions, base=10000.0):
    D = x.shape[-1]
    inv_freq = base ** (-torch.arange(D // 2) / D)
    angle = positions[:, None] * inv_freq
    emb = torch.cat((angle, angle), dim=-1)
    x1, x2 = x.chunk(2, dim=-1)
    return x * emb.cos() + torch.cat((-x2, x1), dim=-1) * emb.sin()


def rotate_half_rope__arange_not_positions(x, positions, base=10000.0):
    L, D = x.shape[-2], x.shape[-1]
    angle = _angles(torch.arange(L), D, base)
    emb = torch.cat((angle, angle), dim=-1)
    x1, x2 = x.chunk(2, dim=-1)
    return x * emb.cos() + torch.cat((-x2, x1), dim=-1) * emb.sin()


def rotate_half_rope__global_base(x, positions, base=10000.0):
    angle = _angles(positions, x.shape[-1], ROPE_BASE)
    emb = torch.cat((angle, angle), dim=-1)
    x1, x2 = x.chunk(2, dim=-1)
    return x * emb.cos() + torch.cat((-x2, x1), dim=-1) * emb.sin()


def rotate_half_rope__out_buffer_float32(x, positions, base=10000.0):
    D = x.shape[-1]
    half = D // 2
    angle = _angles(positions, D, base)
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., :half], x[..., half:]
    out = torch.empty(x.shape)
    out[..., :half] = x1 * cos - x2 * sin
    out[..., half:] = x2 * cos + x1 * sin
    return out


def rotate_half_rope__neg_in_place(x, positions, base=10000.0):
    angle = _angles(positions, x.shape[-1], base)
    emb = torch.cat((angle, angle), dim=-1)
    x1, x2 = x.chunk(2, dim=-1)
    rotated = torch.cat((x2.neg_(), x1), dim=-1)
    return x * emb.cos() + rotated * emb.sin()


def rotate_half_rope__chunk_default_dim(x, positions, base=10000.0):
    angle = _angles(positions, x.shape[-1], base)
    emb = torch.cat((angle, angle), dim=-1)
    x1, x2 = x.chunk(2)
    return x * emb.cos() + torch.cat((-x2, x1), dim=-1) * emb.sin()


def rotate_half_rope__D_from_dim1(x, positions, base=10000.0):
    D = x.shape[1]
    angle = _angles(positions, D, base)
    emb = torch.cat((angle, angle), dim=-1)
    x1, x2 = x.chunk(2, dim=-1)
    return x * emb.cos() + torch.cat((-x2, x1), dim=-1) * emb.sin()


def rotate_half_rope__exponent_sign(x, positions, base=10000.0):
    D = x.shape[-1]
    inv_freq = base ** (torch.arange(0, D, 2) / D)
    angle = positions[:, None] * inv_freq
    emb = torch.cat((angle, angle), dim=-1)
    x1, x2 = x.chunk(2, dim=-1)
    return x * emb.cos() + torch.cat((-x2, x1), dim=-1) * emb.sin()


def rotate_half_rope__sin_cos_swapped(x, positions, base=10000.0):
    angle = _angles(positions, x.shape[-1], base)
    emb = torch.cat((angle, angle), dim=-1)
    x1, x2 = x.chunk(2, dim=-1)
    return x * emb.sin() + torch.cat((-x2, x1), dim=-1) * emb.cos()


# ---------------------------------------------------------------- Exercise 3: grouped_query_attention

def _attend(query, key, value, is_causal):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    if is_causal:
        L, S = scores.shape[-2:]
        future = torch.triu(torch.ones(L, S, dtype=torch.bool), diagonal=1)
        scores = scores.masked_fill(future, float("-inf"))
    return torch.softmax(scores, dim=-1) @ value


def grouped_query_attention__repeat_tiles(query, key, value, is_causal=False):
    G = query.shape[1] // key.shape[1]
    return _attend(query, key.repeat(1, G, 1, 1), value.repeat(1, G, 1, 1), is_causal)


def grouped_query_attention__expand_new_dim_first(query, key, value, is_causal=False):
    N, H = query.shape[:2]
    H_kv, S = key.shape[1], key.shape[2]
    G = H // H_kv
    k = key[:, None].expand(N, G, H_kv, S, key.shape[-1]).reshape(N, H, S, key.shape[-1])
    v = value[:, None].expand(N, G, H_kv, S, value.shape[-1]).reshape(N, H, S, value.shape[-1])
    return _attend(query, k, v, is_causal)


def grouped_query_attention__repeat_by_h_kv(query, key, value, is_causal=False):
    H_kv = key.shape[1]
    k = key.repeat_interleave(H_kv, dim=1)
    v = value.repeat_interleave(H_kv, dim=1)
    return _attend(query, k, v, is_causal)


def grouped_query_attention__value_not_repeated(query, key, value, is_causal=False):
    G = query.shape[1] // key.shape[1]
    return _attend(query, key.repeat_interleave(G, dim=1), value, is_causal)


def grouped_query_attention__scale_by_dv(query, key, value, is_causal=False):
    G = query.shape[1] // key.shape[1]
    k, v = key.repeat_interleave(G, dim=1), value.repeat_interleave(G, dim=1)
    scores = query @ k.transpose(-2, -1) / math.sqrt(value.shape[-1])
    if is_causal:
        L, S = scores.shape[-2:]
        scores = scores.masked_fill(torch.triu(torch.ones(L, S, dtype=torch.bool), diagonal=1), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def grouped_query_attention__causal_tril(query, key, value, is_causal=False):
    G = query.shape[1] // key.shape[1]
    k, v = key.repeat_interleave(G, dim=1), value.repeat_interleave(G, dim=1)
    scores = query @ k.transpose(-2, -1) / math.sqrt(query.shape[-1])
    if is_causal:
        L, S = scores.shape[-2:]
        mask = torch.tril(torch.ones(L, S, dtype=torch.bool), diagonal=-1)
        scores = scores.masked_fill(mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def grouped_query_attention__causal_masks_diagonal(query, key, value, is_causal=False):
    G = query.shape[1] // key.shape[1]
    k, v = key.repeat_interleave(G, dim=1), value.repeat_interleave(G, dim=1)
    scores = query @ k.transpose(-2, -1) / math.sqrt(query.shape[-1])
    if is_causal:
        L, S = scores.shape[-2:]
        scores = scores.masked_fill(torch.triu(torch.ones(L, S, dtype=torch.bool)), -1e9)
    return torch.softmax(scores, dim=-1) @ v


def grouped_query_attention__softmax_over_queries(query, key, value, is_causal=False):
    G = query.shape[1] // key.shape[1]
    k, v = key.repeat_interleave(G, dim=1), value.repeat_interleave(G, dim=1)
    scores = query @ k.transpose(-2, -1) / math.sqrt(query.shape[-1])
    if is_causal:
        L, S = scores.shape[-2:]
        scores = scores.masked_fill(torch.triu(torch.ones(L, S, dtype=torch.bool), diagonal=1), float("-inf"))
    return torch.softmax(scores, dim=-2) @ v


def grouped_query_attention__causal_ignored(query, key, value, is_causal=False):
    G = query.shape[1] // key.shape[1]
    k, v = key.repeat_interleave(G, dim=1), value.repeat_interleave(G, dim=1)
    weights = torch.softmax(query @ k.transpose(-2, -1) / math.sqrt(query.shape[-1]), dim=-1)
    return weights @ v


def grouped_query_attention__softmax_in_float32(query, key, value, is_causal=False):
    G = query.shape[1] // key.shape[1]
    k, v = key.repeat_interleave(G, dim=1), value.repeat_interleave(G, dim=1)
    scores = query @ k.transpose(-2, -1) / math.sqrt(query.shape[-1])
    if is_causal:
        L, S = scores.shape[-2:]
        scores = scores.masked_fill(torch.triu(torch.ones(L, S, dtype=torch.bool), diagonal=1), float("-inf"))
    weights = torch.softmax(scores.float(), dim=-1)
    return weights @ v.float()


def grouped_query_attention__query_scaled_in_place(query, key, value, is_causal=False):
    G = query.shape[1] // key.shape[1]
    query /= math.sqrt(query.shape[-1])
    k, v = key.repeat_interleave(G, dim=1), value.repeat_interleave(G, dim=1)
    scores = query @ k.transpose(-2, -1)
    if is_causal:
        L, S = scores.shape[-2:]
        scores = scores.masked_fill(torch.triu(torch.ones(L, S, dtype=torch.bool), diagonal=1), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def grouped_query_attention__global_groups(query, key, value, is_causal=False):
    k = key.repeat_interleave(GROUPS, dim=1)
    v = value.repeat_interleave(GROUPS, dim=1)
    return _attend(query, k, v, is_causal)


def grouped_query_attention__head_loop_modulo(query, key, value, is_causal=False):
    H, H_kv = query.shape[1], key.shape[1]
    outs = []
    for h in range(H):
        kv = h % H_kv
        outs.append(_attend(query[:, h], key[:, kv], value[:, kv], is_causal))
    return torch.stack(outs, dim=1)


# ---------------------------------------------------------------- Exercise 4: sink_window_mask

def sink_window_mask__window_le(L, window, sinks):
    i = torch.arange(L)[:, None]
    j = torch.arange(L)[None, :]
    return (j <= i) & ((i - j <= window) | (j < sinks))


def sink_window_mask__precedence(L, window, sinks):
    i = torch.arange(L)[:, None]
    j = torch.arange(L)[None, :]
    return (j <= i) & (i - j < window) | (j < sinks)


def sink_window_mask__sinks_le(L, window, sinks):
    i = torch.arange(L)[:, None]
    j = torch.arange(L)[None, :]
    return (j <= i) & ((i - j < window) | (j <= sinks))


def sink_window_mask__true_means_masked(L, window, sinks):
    i = torch.arange(L)[:, None]
    j = torch.arange(L)[None, :]
    allowed = (j <= i) & ((i - j < window) | (j < sinks))
    return ~allowed


def sink_window_mask__two_sided_window(L, window, sinks):
    i = torch.arange(L)[:, None]
    j = torch.arange(L)[None, :]
    return ((i - j).abs() < window) | ((j < sinks) & (j <= i))


def sink_window_mask__sink_columns_set(L, window, sinks):
    mask = torch.ones(L, L).tril().triu(-(window - 1)).bool()
    mask[:, :sinks] = True
    return mask


def sink_window_mask__sink_rows(L, window, sinks):
    i = torch.arange(L)[:, None]
    j = torch.arange(L)[None, :]
    return (j <= i) & ((i - j < window) | (i < sinks))


def sink_window_mask__float_mask(L, window, sinks):
    i = torch.arange(L)[:, None]
    j = torch.arange(L)[None, :]
    return ((j <= i) & ((i - j < window) | (j < sinks))).float()


def sink_window_mask__sinks_inside_window(L, window, sinks):
    i = torch.arange(L)[:, None]
    j = torch.arange(L)[None, :]
    return (j <= i) & ((i - j < window - sinks) | (j < sinks))


def sink_window_mask__negative_slice_start(L, window, sinks):
    mask = torch.zeros(L, L, dtype=torch.bool)
    for i in range(L):
        mask[i, i - window + 1:i + 1] = True
        mask[i, :min(sinks, i + 1)] = True
    return mask


def sink_window_mask__sink_index_tensor(L, window, sinks):
    i = torch.arange(L)[:, None]
    j = torch.arange(L)[None, :]
    causal = j <= i
    mask = causal & (i - j < window)
    cols = torch.arange(sinks)
    mask[:, cols] = causal[:, cols]
    return mask


def sink_window_mask__band_by_diagonals(L, window, sinks):
    ones = torch.ones(L, L, dtype=torch.bool)
    mask = torch.tril(ones) & ~torch.tril(ones, diagonal=-window - 1)
    i = torch.arange(L)[:, None]
    j = torch.arange(L)[None, :]
    return mask | ((j < sinks) & (j <= i))


# ---------------------------------------------------------------- the list

_RMS = "ch7.rms_norm"
_ROPE = "ch7.rotate_half_rope"
_GQA = "ch7.grouped_query_attention"
_SINK = "ch7.sink_window_mask"

ANSWERS = [
    {"exercise": _RMS, "fn": rms_norm__eps_outside_sqrt,
     "mistake": "eps added to the root mean square outside the square root: x / (sqrt(mean(x^2)) + eps)",
     "part": "eps"},
    {"exercise": _RMS, "fn": rms_norm__no_keepdim,
     "mistake": "mean square taken without keepdim=True, so (..., ) does not broadcast against (..., E)",
     "part": "reduction shape"},
    {"exercise": _RMS, "fn": rms_norm__sum_not_mean,
     "mistake": "sum of squares instead of their mean (missing the 1/E)",
     "part": "mean square"},
    {"exercise": _RMS, "fn": rms_norm__square_of_mean,
     "mistake": "square of the mean, mean(x)^2, instead of the mean of the squares",
     "part": "mean square"},
    {"exercise": _RMS, "fn": rms_norm__subtracts_mean,
     "mistake": "subtracts the mean first, as LayerNorm does (RMSNorm does not centre)",
     "part": "centring"},
    {"exercise": _RMS, "fn": rms_norm__divides_by_rsqrt,
     "mistake": "divides by rsqrt(...) instead of multiplying: multiplies x by its root mean square",
     "part": "rsqrt"},
    {"exercise": _RMS, "fn": rms_norm__l2_norm,
     "mistake": "divides by the L2 norm (no 1/E, eps outside): the result is sqrt(E) times too small",
     "part": "mean square"},
    {"exercise": _RMS, "fn": rms_norm__float32_upcast_kept,
     "mistake": "casts x to float32 for the computation and never casts back: float64 input gives float32",
     "part": "dtype"},
    {"exercise": _RMS, "fn": rms_norm__in_place,
     "mistake": "x.mul_ normalises the caller's x in place (the output is right, the input is changed)",
     "part": "in-place"},
    {"exercise": _RMS, "fn": rms_norm__eps_hard_coded,
     "mistake": "the eps argument is ignored: 1e-6 is written in the formula",
     "part": "eps"},
    {"exercise": _RMS, "fn": rms_norm__no_gain,
     "mistake": "the gain weight is never multiplied in",
     "part": "gain"},
    {"exercise": _RMS, "fn": rms_norm__mean_over_dim0,
     "mistake": "mean square over dim 0 instead of the last dimension",
     "part": "reduction dim"},

    {"exercise": _ROPE, "fn": rotate_half_rope__rotate_half_sign,
     "mistake": "rotate_half written [x2, -x1] instead of [-x2, x1]: every pair turns by minus the angle",
     "part": "rotate_half sign"},
    {"exercise": _ROPE, "fn": rotate_half_rope__angles_interleaved,
     "mistake": "angles repeated with repeat_interleave (θ0, θ0, θ1, θ1, ...) instead of cat(angle, angle)",
     "part": "angle layout"},
    {"exercise": _ROPE, "fn": rotate_half_rope__pairs_interleaved,
     "mistake": "chapter 4's interleaved layout: rotates pairs (2i, 2i + 1) instead of (i, i + D/2)",
     "part": "pair layout"},
    {"exercise": _ROPE, "fn": rotate_half_rope__exponent_i_over_D,
     "mistake": "frequencies base ** (-i / D) with i = 0..D/2-1 instead of base ** (-2i / D)",
     "part": "frequencies"},
    {"exercise": _ROPE, "fn": rotate_half_rope__arange_not_positions,
     "mistake": "uses torch.arange(L) as the positions and ignores the positions argument",
     "part": "positions"},
    {"exercise": _ROPE, "fn": rotate_half_rope__global_base,
     "mistake": "uses the notebook global ROPE_BASE = 100000 instead of the base argument",
     "part": "base"},
    {"exercise": _ROPE, "fn": rotate_half_rope__out_buffer_float32,
     "mistake": "output buffer made with torch.empty(x.shape) without dtype=: float64 input gives float32",
     "part": "dtype"},
    {"exercise": _ROPE, "fn": rotate_half_rope__neg_in_place,
     "mistake": "x2.neg_() negates the second half of the caller's x in place (and so the x * cos term too)",
     "part": "in-place"},
    {"exercise": _ROPE, "fn": rotate_half_rope__chunk_default_dim,
     "mistake": "x.chunk(2) without dim=-1 cuts the first dimension, not the features",
     "part": "halves"},
    {"exercise": _ROPE, "fn": rotate_half_rope__D_from_dim1,
     "mistake": "D taken as x.shape[1] (right only for 2-D x (L, D)), not x.shape[-1]",
     "part": "head dim"},
    {"exercise": _ROPE, "fn": rotate_half_rope__exponent_sign,
     "mistake": "frequencies base ** (+2i / D): the minus sign of the exponent is lost",
     "part": "frequencies"},
    {"exercise": _ROPE, "fn": rotate_half_rope__sin_cos_swapped,
     "mistake": "cos and sin swapped: x * sin + rotate_half(x) * cos",
     "part": "cos/sin"},

    {"exercise": _GQA, "fn": grouped_query_attention__repeat_tiles,
     "mistake": "key/value heads tiled with .repeat(1, G, 1, 1): query head h reads h % H_kv, not h // G",
     "part": "head grouping"},
    {"exercise": _GQA, "fn": grouped_query_attention__expand_new_dim_first,
     "mistake": "expand on a new axis before the heads, (N, G, H_kv, ...) then reshape: tiles the heads",
     "part": "head grouping"},
    {"exercise": _GQA, "fn": grouped_query_attention__repeat_by_h_kv,
     "mistake": "repeats each key/value head H_kv times instead of G = H / H_kv times",
     "part": "group size"},
    {"exercise": _GQA, "fn": grouped_query_attention__value_not_repeated,
     "mistake": "repeats the keys but not the values (broadcasts only when H_kv = 1 or H_kv = H)",
     "part": "values"},
    {"exercise": _GQA, "fn": grouped_query_attention__scale_by_dv,
     "mistake": "scores scaled by 1/sqrt(Dv) from value.shape[-1] instead of 1/sqrt(D)",
     "part": "scale"},
    {"exercise": _GQA, "fn": grouped_query_attention__causal_tril,
     "mistake": "causal mask with the wrong polarity: tril(diagonal=-1) masks the past, keeps the future",
     "part": "causal mask"},
    {"exercise": _GQA, "fn": grouped_query_attention__causal_masks_diagonal,
     "mistake": "causal mask triu without diagonal=1 also masks each query's own key (first row all masked)",
     "part": "causal mask"},
    {"exercise": _GQA, "fn": grouped_query_attention__softmax_over_queries,
     "mistake": "softmax over dim=-2 (the queries) instead of the keys",
     "part": "softmax dim"},
    {"exercise": _GQA, "fn": grouped_query_attention__causal_ignored,
     "mistake": "is_causal is ignored: no mask is ever applied",
     "part": "causal mask"},
    {"exercise": _GQA, "fn": grouped_query_attention__softmax_in_float32,
     "mistake": "softmax computed in float32 (scores.float(), v.float()) and never cast back: float64 lost",
     "part": "dtype"},
    {"exercise": _GQA, "fn": grouped_query_attention__query_scaled_in_place,
     "mistake": "query /= sqrt(D) scales the caller's query tensor in place",
     "part": "in-place"},
    {"exercise": _GQA, "fn": grouped_query_attention__global_groups,
     "mistake": "group size from the notebook global GROUPS = 3 (SmolLM2's) instead of H // H_kv",
     "part": "group size"},
    {"exercise": _GQA, "fn": grouped_query_attention__head_loop_modulo,
     "mistake": "per-head loop reading key/value head h % H_kv instead of h // G",
     "part": "head grouping"},

    {"exercise": _SINK, "fn": sink_window_mask__window_le,
     "mistake": "i - j <= window: the window keeps window + 1 keys (off by one)",
     "part": "window"},
    {"exercise": _SINK, "fn": sink_window_mask__precedence,
     "mistake": "a & b | c without brackets: (causal & window) | sinks lets queries see future sinks",
     "part": "sinks causality"},
    {"exercise": _SINK, "fn": sink_window_mask__sinks_le,
     "mistake": "j <= sinks: keeps sinks + 1 first keys (off by one)",
     "part": "sinks"},
    {"exercise": _SINK, "fn": sink_window_mask__true_means_masked,
     "mistake": "polarity flipped: True where the key is hidden, as in attn_mask conventions",
     "part": "polarity"},
    {"exercise": _SINK, "fn": sink_window_mask__two_sided_window,
     "mistake": "window written |i - j| < window: the band is not causal, queries see the next window - 1 keys",
     "part": "causality"},
    {"exercise": _SINK, "fn": sink_window_mask__sink_columns_set,
     "mistake": "mask[:, :sinks] = True sets the sink columns for every query, future ones included",
     "part": "sinks causality"},
    {"exercise": _SINK, "fn": sink_window_mask__sink_rows,
     "mistake": "i < sinks instead of j < sinks: the first queries see everything, no key is a sink",
     "part": "sinks"},
    {"exercise": _SINK, "fn": sink_window_mask__float_mask,
     "mistake": "returns a float 0/1 mask instead of a bool tensor",
     "part": "dtype"},
    {"exercise": _SINK, "fn": sink_window_mask__sinks_inside_window,
     "mistake": "counts the sinks inside the window: i - j < window - sinks (window shrinks by sinks)",
     "part": "window"},
    {"exercise": _SINK, "fn": sink_window_mask__negative_slice_start,
     "mistake": "loop slice mask[i, i - window + 1:i + 1]: a negative start counts from the end, so rows "
                "i < window - 1 lose their band (only a start <= -L clamps to 0)",
     "part": "window edge"},
    {"exercise": _SINK, "fn": sink_window_mask__sink_index_tensor,
     "mistake": "sink columns indexed with torch.arange(sinks): IndexError when sinks > L",
     "part": "sinks beyond L"},
    {"exercise": _SINK, "fn": sink_window_mask__band_by_diagonals,
     "mistake": "band built with tril(diagonal=-window - 1) removed: keeps i - j <= window (off by one)",
     "part": "window"},
]
