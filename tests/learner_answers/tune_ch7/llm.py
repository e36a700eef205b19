"""Chapter 7 tune batch (tune_ch7): realistic wrong answers to the four exercises of chapter 7, written as a learner
would from the exercise text (RMSNorm, rotate-half RoPE, grouped-query attention, the sink-window mask). They are
the half to tune diagnoses against; no held-out half is written here (it is written blind, later)."""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401

# --------------------------------------------------------------------------------------------------
# rms_norm
# --------------------------------------------------------------------------------------------------


def rms_norm__mean_abs(x, weight, eps=1e-6):
    return x / (x.abs().mean(dim=-1, keepdim=True) + eps) * weight


def rms_norm__vector_norm(x, weight, eps=1e-6):
    return x / (torch.linalg.vector_norm(x, dim=-1, keepdim=True) + eps) * weight


def rms_norm__eps_squared(x, weight, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps ** 2) * weight


def rms_norm__float32(x, weight, eps=1e-6):
    x = x.float()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()


def rms_norm__weight_inside(x, weight, eps=1e-6):
    scaled = x * weight
    return scaled / torch.sqrt(scaled.pow(2).mean(-1, keepdim=True) + eps)


def rms_norm__in_place(x, weight, eps=1e-6):
    rms = torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    x /= rms
    return x * weight


def rms_norm__mean_of_everything(x, weight, eps=1e-6):
    return x / torch.sqrt(x.pow(2).mean() + eps) * weight


# --------------------------------------------------------------------------------------------------
# rotate_half_rope
# --------------------------------------------------------------------------------------------------


def _angles(positions, D, base):
    inv_freq = 1.0 / (base ** (torch.arange(0, D, 2).float() / D))
    return positions.float()[:, None] * inv_freq[None, :]  # (L, D/2)


def rotate_half_rope__gptj_rotate(x, positions, base=10000.0):
    angle = _angles(positions, x.shape[-1], base)
    angle = torch.cat((angle, angle), dim=-1)
    rotated = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)  # the neighbours' rotate
    return x * angle.cos() + rotated * angle.sin()


def rotate_half_rope__positions_from_one(x, positions, base=10000.0):
    angle = _angles(positions + 1, x.shape[-1], base)
    angle = torch.cat((angle, angle), dim=-1)
    x1, x2 = x.chunk(2, dim=-1)
    return x * angle.cos() + torch.cat((-x2, x1), dim=-1) * angle.sin()


def rotate_half_rope__integer_exponent(x, positions, base=10000.0):
    D = x.shape[-1]
    inv_freq = 1.0 / (base ** (torch.arange(0, D, 2) // D))
    angle = positions[:, None] * inv_freq[None, :]
    angle = torch.cat((angle, angle), dim=-1)
    x1, x2 = x.chunk(2, dim=-1)
    return x * angle.cos() + torch.cat((-x2, x1), dim=-1) * angle.sin()


def rotate_half_rope__exponent_over_d_minus_2(x, positions, base=10000.0):
    D = x.shape[-1]
    inv_freq = base ** (-torch.arange(0, D, 2).float() / max(D - 2, 1))
    angle = positions.float()[:, None] * inv_freq
    angle = torch.cat((angle, angle), dim=-1)
    x1, x2 = x.chunk(2, dim=-1)
    return x * angle.cos() + torch.cat((-x2, x1), dim=-1) * angle.sin()


def rotate_half_rope__first_half_only(x, positions, base=10000.0):
    angle = _angles(positions, x.shape[-1], base)
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * angle.cos() - x2 * angle.sin(), x2), dim=-1)


def rotate_half_rope__float32(x, positions, base=10000.0):
    angle = _angles(positions, x.shape[-1], base)
    angle = torch.cat((angle, angle), dim=-1)
    x = x.float()
    x1, x2 = x.chunk(2, dim=-1)
    return x * angle.cos() + torch.cat((-x2, x1), dim=-1) * angle.sin()


def rotate_half_rope__no_outer_product(x, positions, base=10000.0):
    D = x.shape[-1]
    inv_freq = 1.0 / (base ** (torch.arange(0, D, 2).float() / D))
    angle = torch.cat((positions * inv_freq, positions * inv_freq))  # (D,) when L == D/2, else an error
    x1, x2 = x.chunk(2, dim=-1)
    return x * angle.cos() + torch.cat((-x2, x1), dim=-1) * angle.sin()


# --------------------------------------------------------------------------------------------------
# grouped_query_attention
# --------------------------------------------------------------------------------------------------


def grouped_query_attention__expand_groups_first(query, key, value, is_causal=False):
    N, H, L, D = query.shape
    H_kv, S = key.shape[1], key.shape[2]
    G = H // H_kv
    k = key[:, None].expand(N, G, H_kv, S, D).reshape(N, H, S, D)
    v = value[:, None].expand(N, G, H_kv, S, value.shape[-1]).reshape(N, H, S, value.shape[-1])
    scores = query @ k.transpose(-2, -1) / math.sqrt(D)
    if is_causal:
        scores = scores.masked_fill(torch.ones(L, S, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def grouped_query_attention__scale_by_heads(query, key, value, is_causal=False):
    G = query.shape[1] // key.shape[1]
    k, v = key.repeat_interleave(G, dim=1), value.repeat_interleave(G, dim=1)
    scores = query @ k.transpose(-2, -1) / math.sqrt(query.shape[1])
    if is_causal:
        L, S = scores.shape[-2:]
        scores = scores.masked_fill(torch.ones(L, S, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def grouped_query_attention__triu_kept(query, key, value, is_causal=False):
    G = query.shape[1] // key.shape[1]
    k, v = key.repeat_interleave(G, dim=1), value.repeat_interleave(G, dim=1)
    scores = query @ k.transpose(-2, -1) / math.sqrt(query.shape[-1])
    if is_causal:
        L, S = scores.shape[-2:]
        keep = torch.ones(L, S, dtype=torch.bool).triu()
        scores = scores.masked_fill(~keep, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def grouped_query_attention__masked_with_zero(query, key, value, is_causal=False):
    G = query.shape[1] // key.shape[1]
    k, v = key.repeat_interleave(G, dim=1), value.repeat_interleave(G, dim=1)
    scores = query @ k.transpose(-2, -1) / math.sqrt(query.shape[-1])
    if is_causal:
        L, S = scores.shape[-2:]
        scores = scores.masked_fill(torch.ones(L, S, dtype=torch.bool).triu(1), 0.0)
    return torch.softmax(scores, dim=-1) @ v


def grouped_query_attention__scale_after_softmax(query, key, value, is_causal=False):
    G = query.shape[1] // key.shape[1]
    k, v = key.repeat_interleave(G, dim=1), value.repeat_interleave(G, dim=1)
    scores = query @ k.transpose(-2, -1)
    if is_causal:
        L, S = scores.shape[-2:]
        scores = scores.masked_fill(torch.ones(L, S, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(scores, dim=-1) / math.sqrt(query.shape[-1]) @ v


def grouped_query_attention__repeat_on_batch(query, key, value, is_causal=False):
    G = query.shape[1] // key.shape[1]
    k, v = key.repeat_interleave(G, dim=0), value.repeat_interleave(G, dim=0)
    scores = query @ k.transpose(-2, -1) / math.sqrt(query.shape[-1])
    if is_causal:
        L, S = scores.shape[-2:]
        scores = scores.masked_fill(torch.ones(L, S, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def grouped_query_attention__float32(query, key, value, is_causal=False):
    G = query.shape[1] // key.shape[1]
    k, v = key.repeat_interleave(G, dim=1).float(), value.repeat_interleave(G, dim=1).float()
    scores = query.float() @ k.transpose(-2, -1) / math.sqrt(query.shape[-1])
    if is_causal:
        L, S = scores.shape[-2:]
        scores = scores.masked_fill(torch.ones(L, S, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


# --------------------------------------------------------------------------------------------------
# sink_window_mask
# --------------------------------------------------------------------------------------------------


def sink_window_mask__loop(L, window, sinks):
    mask = torch.zeros(L, L, dtype=torch.bool)
    for i in range(L):
        mask[i, max(0, i - window):i + 1] = True
        mask[i, :sinks] = True
    return mask


def sink_window_mask__band_tril_triu(L, window, sinks):
    mask = torch.ones(L, L, dtype=torch.bool).tril().triu(-window)
    mask[:, :sinks] = mask[:, :sinks] | torch.ones(L, sinks, dtype=torch.bool).tril()
    return mask


def sink_window_mask__sinks_at_the_end(L, window, sinks):
    i = torch.arange(L)[:, None]
    j = torch.arange(L)[None, :]
    return (j <= i) & ((i - j < window) | (j >= L - sinks))


def sink_window_mask__float(L, window, sinks):
    i = torch.arange(L)[:, None]
    j = torch.arange(L)[None, :]
    return ((j <= i) & ((i - j < window) | (j < sinks))).float()


def sink_window_mask__window_before_the_query(L, window, sinks):
    i = torch.arange(L)[:, None]
    j = torch.arange(L)[None, :]
    return ((i - j > 0) & (i - j <= window)) | ((j < sinks) & (j <= i))


def sink_window_mask__sink_rows(L, window, sinks):
    i = torch.arange(L)[:, None]
    j = torch.arange(L)[None, :]
    mask = (j <= i) & (i - j < window)
    mask[:sinks, :] = mask[:sinks, :] | (j <= i)[:sinks, :]
    return mask


def sink_window_mask__sinks_widen_the_window(L, window, sinks):
    i = torch.arange(L)[:, None]
    j = torch.arange(L)[None, :]
    return (j <= i) & (i - j < window + sinks)


# --------------------------------------------------------------------------------------------------
# Issue 38 (review V7b): a fresh learner's wrong answers, added to the tune half
# --------------------------------------------------------------------------------------------------


def rms_norm__detached_factor(x, weight, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps).detach() * weight


def rms_norm__factor_under_no_grad(x, weight, eps=1e-6):
    with torch.no_grad():
        inv_rms = 1.0 / torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + eps)
    return weight * (x * inv_rms)


def rms_norm__eps_written_in(x, weight, eps=1e-6):
    variance = x.pow(2).mean(-1, keepdim=True)
    return weight * x * torch.rsqrt(variance + 1e-6)


def rms_norm__own_eps_1e5(x, weight, eps=1e-6):
    return weight * x / torch.sqrt((x ** 2).mean(dim=-1, keepdim=True) + 1e-5)


def _freqs(x, positions, base):
    D = x.shape[-1]
    inv_freq = 1.0 / (base ** (torch.arange(0, D, 2, dtype=torch.float32) / D))
    return torch.outer(positions.float(), inv_freq)  # (L, D/2)


def rotate_half_rope__halves_swapped_no_minus(x, positions, base=10000.0):
    half = x.shape[-1] // 2
    emb = torch.cat([_freqs(x, positions, base)] * 2, dim=-1)
    rotated = torch.cat([x[..., half:], x[..., :half]], dim=-1)
    return x * emb.cos().to(x.dtype) + rotated * emb.sin().to(x.dtype)


def rotate_half_rope__chunk_without_dim(x, positions, base=10000.0):
    emb = torch.cat((_freqs(x, positions, base), _freqs(x, positions, base)), dim=-1)
    x1, x2 = torch.chunk(x, 2)
    return x * emb.cos().to(x.dtype) + torch.cat((-x2, x1), dim=-1) * emb.sin().to(x.dtype)


def rotate_half_rope__angles_cat_without_dim(x, positions, base=10000.0):
    freqs = _freqs(x, positions, base)
    emb = torch.cat((freqs, freqs))
    x1, x2 = x.chunk(2, dim=-1)
    return x * emb.cos().to(x.dtype) + torch.cat((-x2, x1), dim=-1) * emb.sin().to(x.dtype)


def _scores(query, key):
    return query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))


def grouped_query_attention__mask_multiplied(query, key, value, is_causal=False):
    n_rep = query.size(1) // key.size(1)
    key, value = key.repeat_interleave(n_rep, dim=1), value.repeat_interleave(n_rep, dim=1)
    scores = _scores(query, key)
    if is_causal:
        scores = scores * torch.tril(torch.ones_like(scores))
    return F.softmax(scores, dim=-1) @ value


def grouped_query_attention__tril_filled(query, key, value, is_causal=False):
    n_rep = query.size(1) // key.size(1)
    key, value = key.repeat_interleave(n_rep, dim=1), value.repeat_interleave(n_rep, dim=1)
    scores = _scores(query, key)
    if is_causal:
        L, S = scores.shape[-2:]
        scores = scores.masked_fill(torch.tril(torch.ones(L, S)).bool(), float("-inf"))
    return torch.softmax(scores, dim=-1) @ value


def grouped_query_attention__values_not_repeated(query, key, value, is_causal=False):
    n_rep = query.size(1) // key.size(1)
    scores = _scores(query, torch.repeat_interleave(key, n_rep, dim=1))
    if is_causal:
        scores = scores.masked_fill(torch.ones_like(scores, dtype=torch.bool).triu(1), float("-inf"))
    return torch.einsum("nhls,nhsd->nhld", scores.softmax(-1), value)


def grouped_query_attention__group_upside_down(query, key, value, is_causal=False):
    n_rep = key.size(1) // query.size(1)
    key, value = key.repeat_interleave(n_rep, dim=1), value.repeat_interleave(n_rep, dim=1)
    scores = _scores(query, key)
    if is_causal:
        scores = scores.masked_fill(torch.ones_like(scores, dtype=torch.bool).triu(1), float("-inf"))
    return scores.softmax(-1) @ value


def _allowed(L, window, sinks):
    q = torch.arange(L).unsqueeze(1)
    k = torch.arange(L).unsqueeze(0)
    return (k <= q) & ((q - k < window) | (k < sinks))


def sink_window_mask__additive(L, window, sinks):
    return torch.zeros(L, L).masked_fill(~_allowed(L, window, sinks), float("-inf"))


def sink_window_mask__additive_large_negative(L, window, sinks):
    return torch.where(_allowed(L, window, sinks), torch.tensor(0.0), torch.tensor(-1e9))


def sink_window_mask__python_and_or(L, window, sinks):
    q = torch.arange(L).unsqueeze(1)
    k = torch.arange(L).unsqueeze(0)
    return k <= q and (q - k < window or k < sinks)


# issue 38, review V7c: a fresh learner's wrong answers that were told a different mistake, or none


def rms_norm__eps_as_floor(x, weight, eps=1e-6):
    return x / x.pow(2).mean(dim=-1, keepdim=True).sqrt().clamp_min(eps) * weight


def rms_norm__normalize_times_root_e(x, weight, eps=1e-6):
    return F.normalize(x, dim=-1, eps=eps) * math.sqrt(x.shape[-1]) * weight


def rms_norm__mean_square_floor(x, weight, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True).clamp_min(eps)) * weight


def grouped_query_attention__always_causal(query, key, value, is_causal=False):
    G = query.shape[1] // key.shape[1]
    k, v = key.repeat_interleave(G, 1), value.repeat_interleave(G, 1)
    s = query @ k.transpose(-1, -2) / math.sqrt(query.shape[-1])
    L, S = s.shape[-2:]
    s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    return s.softmax(-1) @ v


def grouped_query_attention__always_causal_bottom_right(query, key, value, is_causal=False):
    G = query.shape[1] // key.shape[1]
    k, v = key.repeat_interleave(G, 1), value.repeat_interleave(G, 1)
    s = query @ k.transpose(-1, -2) / math.sqrt(query.shape[-1])
    L, S = s.shape[-2:]
    s = s.masked_fill(torch.ones(L, S, dtype=torch.bool).triu(S - L + 1), float("-inf"))
    return s.softmax(-1) @ v


def grouped_query_attention__scale_by_keys(query, key, value, is_causal=False):
    G = query.shape[1] // key.shape[1]
    k, v = key.repeat_interleave(G, 1), value.repeat_interleave(G, 1)
    s = query @ k.transpose(-1, -2) / math.sqrt(key.shape[-2])
    if is_causal:
        L, S = s.shape[-2:]
        s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    return s.softmax(-1) @ v


def sink_window_mask__precedence(L, window, sinks):
    i, j = torch.arange(L)[:, None], torch.arange(L)[None, :]
    return (j <= i) & (i - j < window) | (j < sinks) & (i >= window)


ANSWERS = [
    {"exercise": "ch7.rms_norm", "fn": rms_norm__mean_abs,
     "mistake": "divides by the mean absolute value, not the root mean square; eps outside", "part": "divisor"},
    {"exercise": "ch7.rms_norm", "fn": rms_norm__vector_norm,
     "mistake": "divides by the L2 norm (a sum, not a mean) plus eps", "part": "divisor"},
    {"exercise": "ch7.rms_norm", "fn": rms_norm__eps_squared,
     "mistake": "eps squared inside the root", "part": "eps"},
    {"exercise": "ch7.rms_norm", "fn": rms_norm__float32,
     "mistake": "casts to float32: a float64 input comes back float32", "part": "dtype"},
    {"exercise": "ch7.rms_norm", "fn": rms_norm__weight_inside,
     "mistake": "multiplies by weight before normalising: the gain cancels out", "part": "gain"},
    {"exercise": "ch7.rms_norm", "fn": rms_norm__in_place,
     "mistake": "divides x in place (x /= rms)", "part": "in place"},
    {"exercise": "ch7.rms_norm", "fn": rms_norm__mean_of_everything,
     "mistake": "mean square over the whole tensor, not each vector's last dim", "part": "reduction dim"},
    {"exercise": "ch7.rotate_half_rope", "fn": rotate_half_rope__gptj_rotate,
     "mistake": "rotate_half written for neighbouring pairs (GPT-J's rotate_every_two) with rotate-half angles",
     "part": "layout"},
    {"exercise": "ch7.rotate_half_rope", "fn": rotate_half_rope__positions_from_one,
     "mistake": "positions + 1: counts positions from 1", "part": "positions"},
    {"exercise": "ch7.rotate_half_rope", "fn": rotate_half_rope__integer_exponent,
     "mistake": "integer division in the exponent: every frequency is 1", "part": "frequencies"},
    {"exercise": "ch7.rotate_half_rope", "fn": rotate_half_rope__exponent_over_d_minus_2,
     "mistake": "exponent 2i / (D - 2) so that the last pair reaches base^-1", "part": "frequencies"},
    {"exercise": "ch7.rotate_half_rope", "fn": rotate_half_rope__first_half_only,
     "mistake": "writes only the first half's rotation; the second half is copied unchanged", "part": "rotation"},
    {"exercise": "ch7.rotate_half_rope", "fn": rotate_half_rope__float32,
     "mistake": "computes in float32: a float64 input comes back float32", "part": "dtype"},
    {"exercise": "ch7.rotate_half_rope", "fn": rotate_half_rope__no_outer_product,
     "mistake": "positions * inv_freq without [:, None]: no (L, D/2) table of angles", "part": "angles"},
    {"exercise": "ch7.grouped_query_attention", "fn": grouped_query_attention__expand_groups_first,
     "mistake": "expands with the group axis before H_kv: query head h reads K/V head h % H_kv", "part": "repeat"},
    {"exercise": "ch7.grouped_query_attention", "fn": grouped_query_attention__scale_by_heads,
     "mistake": "scales by sqrt(H), the number of heads, instead of sqrt(D)", "part": "scale"},
    {"exercise": "ch7.grouped_query_attention", "fn": grouped_query_attention__triu_kept,
     "mistake": "keeps triu (the future and itself) as the causal mask", "part": "causal mask"},
    {"exercise": "ch7.grouped_query_attention", "fn": grouped_query_attention__masked_with_zero,
     "mistake": "masked_fill with 0 instead of -inf: future keys still get weight", "part": "causal mask"},
    {"exercise": "ch7.grouped_query_attention", "fn": grouped_query_attention__scale_after_softmax,
     "mistake": "divides the weights by sqrt(D) after the softmax", "part": "scale"},
    {"exercise": "ch7.grouped_query_attention", "fn": grouped_query_attention__repeat_on_batch,
     "mistake": "repeat_interleave along dim 0, the batch, instead of the heads", "part": "repeat"},
    {"exercise": "ch7.grouped_query_attention", "fn": grouped_query_attention__float32,
     "mistake": "casts to float32: a float64 input comes back float32", "part": "dtype"},
    {"exercise": "ch7.sink_window_mask", "fn": sink_window_mask__loop,
     "mistake": "a loop from i - window (one key too many) that sets the sink columns for every row (future sinks)",
     "part": "window and causality"},
    {"exercise": "ch7.sink_window_mask", "fn": sink_window_mask__band_tril_triu,
     "mistake": "triu(-window) keeps window + 1 recent keys", "part": "window"},
    {"exercise": "ch7.sink_window_mask", "fn": sink_window_mask__sinks_at_the_end,
     "mistake": "the sinks taken as the last positions, j >= L - sinks", "part": "sinks"},
    {"exercise": "ch7.sink_window_mask", "fn": sink_window_mask__float,
     "mistake": "returns a float 0/1 mask, not bool", "part": "dtype"},
    {"exercise": "ch7.sink_window_mask", "fn": sink_window_mask__window_before_the_query,
     "mistake": "the window is the `window` keys before the query, without the query itself", "part": "window"},
    {"exercise": "ch7.sink_window_mask", "fn": sink_window_mask__sink_rows,
     "mistake": "marks the first sinks rows instead of the first sinks columns", "part": "sinks"},
    {"exercise": "ch7.sink_window_mask", "fn": sink_window_mask__sinks_widen_the_window,
     "mistake": "widens the window by sinks instead of keeping the first positions", "part": "sinks"},
    {"exercise": "ch7.rms_norm", "fn": rms_norm__detached_factor,
     "mistake": "the 1/rms factor .detach()-ed: right output, wrong gradient", "part": "gradients"},
    {"exercise": "ch7.rms_norm", "fn": rms_norm__factor_under_no_grad,
     "mistake": "the 1/rms factor computed under torch.no_grad(): right output, wrong gradient", "part": "gradients"},
    {"exercise": "ch7.rms_norm", "fn": rms_norm__eps_written_in,
     "mistake": "eps argument ignored: 1e-6 written in", "part": "eps"},
    {"exercise": "ch7.rms_norm", "fn": rms_norm__own_eps_1e5,
     "mistake": "eps argument ignored: 1e-5 written in", "part": "eps"},
    {"exercise": "ch7.rotate_half_rope", "fn": rotate_half_rope__halves_swapped_no_minus,
     "mistake": "rotate_half as [x2, x1], no minus", "part": "rotation"},
    {"exercise": "ch7.rotate_half_rope", "fn": rotate_half_rope__chunk_without_dim,
     "mistake": "torch.chunk(x, 2) without dim=-1", "part": "rotation"},
    {"exercise": "ch7.rotate_half_rope", "fn": rotate_half_rope__angles_cat_without_dim,
     "mistake": "torch.cat((freqs, freqs)) without dim=-1", "part": "angles"},
    {"exercise": "ch7.grouped_query_attention", "fn": grouped_query_attention__mask_multiplied,
     "mistake": "multiplies the scores by a 0/1 tril instead of filling -inf", "part": "causal mask"},
    {"exercise": "ch7.grouped_query_attention", "fn": grouped_query_attention__tril_filled,
     "mistake": "masked_fill on the tril: the past hidden, the future kept", "part": "causal mask"},
    {"exercise": "ch7.grouped_query_attention", "fn": grouped_query_attention__values_not_repeated,
     "mistake": "repeats the keys only, not the values", "part": "repeat"},
    {"exercise": "ch7.grouped_query_attention", "fn": grouped_query_attention__group_upside_down,
     "mistake": "G = H_kv // H, upside down", "part": "repeat"},
    {"exercise": "ch7.sink_window_mask", "fn": sink_window_mask__additive,
     "mistake": "returns the additive float mask (0 / -inf), not bool", "part": "dtype"},
    {"exercise": "ch7.sink_window_mask", "fn": sink_window_mask__additive_large_negative,
     "mistake": "returns an additive float mask with -1e9, not bool", "part": "dtype"},
    {"exercise": "ch7.sink_window_mask", "fn": sink_window_mask__python_and_or,
     "mistake": "Python and / or on tensors", "part": "combining conditions"},
    {"exercise": "ch7.rms_norm", "fn": rms_norm__eps_as_floor,
     "mistake": "eps as a floor on the root mean square, clamp_min(eps), not added inside the root", "part": "eps"},
    {"exercise": "ch7.rms_norm", "fn": rms_norm__normalize_times_root_e,
     "mistake": "F.normalize(x, eps=eps) * sqrt(E): eps a floor on the length", "part": "eps"},
    {"exercise": "ch7.rms_norm", "fn": rms_norm__mean_square_floor,
     "mistake": "rsqrt(mean(x²).clamp_min(eps)): eps a floor on the mean square", "part": "eps"},
    {"exercise": "ch7.grouped_query_attention", "fn": grouped_query_attention__always_causal,
     "mistake": "masks the future even with is_causal=False", "part": "causal mask"},
    {"exercise": "ch7.grouped_query_attention", "fn": grouped_query_attention__always_causal_bottom_right,
     "mistake": "masks the future (bottom-right aligned) even with is_causal=False", "part": "causal mask"},
    {"exercise": "ch7.grouped_query_attention", "fn": grouped_query_attention__scale_by_keys,
     "mistake": "scales by sqrt(S), key.shape[-2], the number of keys", "part": "scale"},
    {"exercise": "ch7.sink_window_mask", "fn": sink_window_mask__precedence,
     "mistake": "(j<=i)&(i-j<window) | (j<sinks)&(i>=window): sinks visible from the future", "part": "sinks"},
]
