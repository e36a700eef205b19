"""Plausible wrong answers to the exercises of chapter 2, "Scaled dot-product attention and masks".

Each function is the ``fn`` of a :class:`~utils.exercises.definition.Mistake` declared, with its
diagnosis, in :mod:`utils.exercises.sdpa`: first those of ``ch2.scaled_dot_product_attention`` (mostly
the recipe with one realistic thing changed), then those of ``ch2.causal_mask``, then those of
``ch2.padding_mask``.
"""

from __future__ import annotations

import math
import warnings

import torch

# --------------------------------------------------------------------------------------------------
# ch2.scaled_dot_product_attention
# --------------------------------------------------------------------------------------------------


def _fully_masked_to_zero(weights: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    if mask is None:
        return weights
    return weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)  # rows that may see no key


def _sdpa_variant(q, k, v, mask=None, *, scale=None, dim=-1, invert=False, fill=float("-inf"), guard=True):
    """The recipe with one thing changed. ``guard`` gives fully-masked rows zero weights, as the reference."""
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ k.transpose(-2, -1) * scale  # (..., L, S)
    if mask is not None:
        mask = ~mask if invert else mask
        scores = scores.masked_fill(~mask, fill)
    weights = scores.softmax(dim)  # (..., L, S)
    if guard:
        weights = _fully_masked_to_zero(weights, mask)
    return weights @ v, weights  # (..., L, Dv), (..., L, S)


def _sdpa_from_scores(q, k, v, mask, make_weights):
    """Scaled scores, then ``make_weights(scores, mask)`` in place of mask + softmax."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., L, S)
    weights = make_weights(scores, mask)
    return weights @ v, weights


# Masking mistakes: the values and forms that tutorials spread.
def _sdpa_minus_1e9(q, k, v, mask=None):
    return _sdpa_variant(q, k, v, mask, fill=-1e9, guard=False)


def _sdpa_fill_minus_1e4(q, k, v, mask=None):
    return _sdpa_variant(q, k, v, mask, fill=-1e4, guard=False)


def _sdpa_fill_float16_min(q, k, v, mask=None):
    return _sdpa_variant(q, k, v, mask, fill=torch.finfo(torch.float16).min, guard=False)


def _guarded(fn):
    """``fn`` with the guard added after it: a fully masked row gets zero weights and a zero output."""
    def guarded(q, k, v, mask=None):
        _, weights = fn(q, k, v, mask)
        weights = _fully_masked_to_zero(weights, mask)
        return weights @ v, weights
    guarded.__name__ = f"{fn.__name__}_guarded"
    return guarded


def _sdpa_add_minus_1e4(q, k, v, mask=None):
    add = lambda s, m: s if m is None else s + (~m).to(s.dtype) * -1e4  # noqa: E731
    return _sdpa_from_scores(q, k, v, mask, lambda s, m: add(s, m).softmax(-1))


def _sdpa_finfo_min(q, k, v, mask=None):
    return _sdpa_variant(q, k, v, mask, fill=torch.finfo(q.dtype).min, guard=False)


def _sdpa_nan_rows(q, k, v, mask=None):
    return _sdpa_variant(q, k, v, mask, guard=False)


def _sdpa_times_minus_inf(q, k, v, mask=None):
    add = lambda s, m: s if m is None else s + (~m).to(s.dtype) * float("-inf")  # noqa: E731
    return _sdpa_from_scores(q, k, v, mask, lambda s, m: add(s, m).softmax(-1))


def _sdpa_fill_zero(q, k, v, mask=None):
    return _sdpa_variant(q, k, v, mask, fill=0.0, guard=False)


def _sdpa_guard_all(q, k, v, mask=None):  # `all` for `any` in the guard: zeroes every row with a blocked key
    out, weights = _sdpa_variant(q, k, v, mask, guard=False)
    if mask is not None:
        weights = weights.masked_fill(~mask.all(-1, keepdim=True), 0.0)
    return weights @ v, weights


def _sdpa_guard_output_only(q, k, v, mask=None):  # the output is zeroed, the NaN weights are returned
    out, weights = _sdpa_variant(q, k, v, mask, guard=False)
    return out.nan_to_num(0.0), weights


def _sdpa_no_none_check(q, k, v, mask=None):  # masks unconditionally: raises for mask=None
    return _sdpa_variant(q, k, v, ~~mask)


def _sdpa_mask_unsqueezed(q, k, v, mask=None):  # the Annotated Transformer's mask.unsqueeze(1)
    return _sdpa_variant(q, k, v, None if mask is None else mask.unsqueeze(1))


def _manual_softmax(scores, mask, times_mask):
    """exp / sum written by hand, without subtracting the row max first."""
    if mask is not None and not times_mask:
        scores = scores.masked_fill(~mask, float("-inf"))
    exp = scores.exp()
    if mask is not None and times_mask:
        exp = exp * mask
    return _fully_masked_to_zero(exp / exp.sum(-1, keepdim=True), mask)


def _sdpa_softmax_overflow(q, k, v, mask=None):
    return _sdpa_from_scores(q, k, v, mask, lambda s, m: _manual_softmax(s, m, times_mask=False))


def _sdpa_exp_times_mask(q, k, v, mask=None):
    return _sdpa_from_scores(q, k, v, mask, lambda s, m: _manual_softmax(s, m, times_mask=True))


def _sdpa_mask_after_softmax(q, k, v, mask=None):
    return _sdpa_from_scores(q, k, v, mask, lambda s, m: s.softmax(-1) if m is None else s.softmax(-1) * m)


def _renormalised(scores, mask, floor=0.0):
    weights = scores.softmax(-1)
    if mask is None:
        return weights
    weights = weights * mask
    return weights / weights.sum(-1, keepdim=True).clamp_min(floor)  # floor > 0 keeps 0/0 finite (0)


def _sdpa_renormalise_after_softmax(q, k, v, mask=None):
    return _sdpa_from_scores(q, k, v, mask, _renormalised)


def _sdpa_renormalise_clamped(q, k, v, mask=None):
    return _sdpa_from_scores(q, k, v, mask, lambda s, m: _renormalised(s, m, 1e-30))


def _sdpa_bool_added(q, k, v, mask=None):  # scores + mask: True becomes +1, False 0
    return _sdpa_from_scores(q, k, v, mask, lambda s, m: (s if m is None else s + m).softmax(-1))


def _sdpa_inverted_mask(q, k, v, mask=None):
    return _sdpa_variant(q, k, v, mask, invert=True, guard=False)


def _sdpa_ignores_mask(q, k, v, mask=None):
    return _sdpa_variant(q, k, v, None)


def _sdpa_if_mask(q, k, v, mask=None):
    if mask:  # raises for a mask of more than one element, as the learner's code does
        pass
    return _sdpa_variant(q, k, v, mask)


def _sdpa_one_minus_mask(q, k, v, mask=None):
    if mask is not None:
        mask = 1 - mask  # raises for a bool mask
    return _sdpa_variant(q, k, v, mask)


# Scaling mistakes
def _sdpa_no_scale(q, k, v, mask=None):
    return _sdpa_variant(q, k, v, mask, scale=1.0)


def _sdpa_divide_by_d(q, k, v, mask=None):
    return _sdpa_variant(q, k, v, mask, scale=1 / q.shape[-1])


def _sdpa_times_sqrt_d(q, k, v, mask=None):
    return _sdpa_variant(q, k, v, mask, scale=math.sqrt(q.shape[-1]))


def _sdpa_sqrt_dv(q, k, v, mask=None):
    return _sdpa_variant(q, k, v, mask, scale=1 / math.sqrt(v.shape[-1]))


def _sdpa_sqrt_dim_1(q, k, v, mask=None):
    return _sdpa_variant(q, k, v, mask, scale=1 / math.sqrt(q.shape[1]))


def _sdpa_sqrt_num_keys(q, k, v, mask=None):
    return _sdpa_variant(q, k, v, mask, scale=1 / math.sqrt(k.shape[-2]))


def _sdpa_torch_sqrt_int(q, k, v, mask=None):
    return _sdpa_variant(q, k, v, mask, scale=1 / torch.sqrt(q.shape[-1]))  # raises: sqrt of an int


def _sdpa_sqrt_dim_2(q, k, v, mask=None):
    return _sdpa_variant(q, k, v, mask, scale=1 / math.sqrt(q.shape[2]))


def _sdpa_sqrt_num_queries(q, k, v, mask=None):
    return _sdpa_variant(q, k, v, mask, scale=1 / math.sqrt(q.shape[-2]))


def _sdpa_scale_output(q, k, v, mask=None):  # the unscaled weights, and the output divided instead
    out, weights = _sdpa_variant(q, k, v, mask, scale=1.0)
    return out / math.sqrt(q.shape[-1]), weights


def _sdpa_fixed_d_8(q, k, v, mask=None):
    return _sdpa_variant(q, k, v, mask, scale=1 / math.sqrt(8))


def _sdpa_scale_after_softmax(q, k, v, mask=None):
    out, weights = _sdpa_variant(q, k, v, mask, scale=1.0)
    weights = weights / math.sqrt(q.shape[-1])
    return weights @ v, weights


def _sdpa_clamp_scores(q, k, v, mask=None):
    def make(scores, m):
        scores = scores.clamp(-5, 5)
        return _fully_masked_to_zero(scores.softmax(-1) if m is None else scores.masked_fill(~m, float("-inf"))
                                     .softmax(-1), m)
    return _sdpa_from_scores(q, k, v, mask, make)


# Softmax mistakes
def _sdpa_softmax_dim_2(q, k, v, mask=None):
    return _sdpa_variant(q, k, v, mask, dim=2)


def _sdpa_softmax_dim_1(q, k, v, mask=None):
    return _sdpa_variant(q, k, v, mask, dim=1)


def _sdpa_softmax_no_dim(q, k, v, mask=None):
    ndim = q.dim()
    return _sdpa_variant(q, k, v, mask, dim=0 if ndim in (0, 1, 3) else 1)  # F.softmax's legacy choice


def _sdpa_softmax_dim_3(q, k, v, mask=None):
    return _sdpa_variant(q, k, v, mask, dim=3)


def _sdpa_softmax_over_queries(q, k, v, mask=None):
    return _sdpa_variant(q, k, v, mask, dim=-2)


def _masked(scores, mask):
    return scores if mask is None else scores.masked_fill(~mask, float("-inf"))


def _sdpa_log_softmax(q, k, v, mask=None):
    return _sdpa_from_scores(q, k, v, mask, lambda s, m: _fully_masked_to_zero(_masked(s, m).log_softmax(-1), m))


def _sdpa_sigmoid(q, k, v, mask=None):
    return _sdpa_from_scores(q, k, v, mask, lambda s, m: _masked(s, m).sigmoid())


# Transpose and matmul mistakes
def _sdpa_k_dot_T(q, k, v, mask=None):
    with warnings.catch_warnings():  # k.T on more than 2 dims is deprecated, and still reverses them all
        warnings.simplefilter("ignore")
        scores = q @ k.T / math.sqrt(q.shape[-1])
    weights = _fully_masked_to_zero(_masked(scores, mask).softmax(-1), mask)
    return weights @ v, weights


def _sdpa_transpose_1_2(q, k, v, mask=None):
    scores = q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])
    weights = _fully_masked_to_zero(_masked(scores, mask).softmax(-1), mask)
    return weights @ v, weights


def _sdpa_bmm(q, k, v, mask=None):
    scores = torch.bmm(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    weights = _fully_masked_to_zero(_masked(scores, mask).softmax(-1), mask)
    return torch.bmm(weights, v), weights


def _sdpa_reshape_k(q, k, v, mask=None):
    scores = q @ k.reshape(*k.shape[:-2], k.shape[-1], k.shape[-2]) / math.sqrt(q.shape[-1])
    weights = _fully_masked_to_zero(_masked(scores, mask).softmax(-1), mask)
    return weights @ v, weights


# What is returned
def _sdpa_swapped(q, k, v, mask=None):
    out, weights = _sdpa_variant(q, k, v, mask)
    return weights, out


def _sdpa_output_only(q, k, v, mask=None):
    return _sdpa_variant(q, k, v, mask)[0]


def _sdpa_scores_as_weights(q, k, v, mask=None):
    out, _ = _sdpa_variant(q, k, v, mask)
    return out, _masked(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), mask)


def _sdpa_in_float16(q, k, v, mask=None):
    return _sdpa_variant(q.half(), k.half(), v.half(), mask)


def _sdpa_in_float32(q, k, v, mask=None):
    return _sdpa_variant(q.float(), k.float(), v.float(), mask)


# --------------------------------------------------------------------------------------------------
# ch2.causal_mask
# --------------------------------------------------------------------------------------------------


def _causal_future(size: int) -> torch.Tensor:
    return torch.ones(size, size, dtype=torch.bool).triu()


def _causal_no_self(size: int) -> torch.Tensor:
    return torch.ones(size, size, dtype=torch.bool).tril(-1)


def _causal_blocked(size: int) -> torch.Tensor:
    return torch.ones(size, size, dtype=torch.bool).triu(1)


def _causal_float(size: int) -> torch.Tensor:
    return torch.ones(size, size).tril()


def _causal_integer(size: int) -> torch.Tensor:
    return torch.ones(size, size, dtype=torch.long).tril()


def _causal_one_ahead(size: int) -> torch.Tensor:
    return torch.ones(size, size, dtype=torch.bool).tril(1)


def _causal_flipped(size: int) -> torch.Tensor:
    return torch.ones(size, size, dtype=torch.bool).tril().flip(-1)


def _causal_additive(size: int) -> torch.Tensor:
    return torch.zeros(size, size).masked_fill(torch.ones(size, size, dtype=torch.bool).triu(1), float("-inf"))


def _causal_extra_dims(size: int) -> torch.Tensor:
    return torch.ones(size, size, dtype=torch.bool).tril()[None, None]


# --------------------------------------------------------------------------------------------------
# ch2.padding_mask
# --------------------------------------------------------------------------------------------------


def _padding_flat(lengths, max_len):
    return torch.arange(max_len) < lengths[:, None]  # (N, S): missing the broadcasting dims


def _padding_inverted(lengths, max_len):
    return (torch.arange(max_len) >= lengths[:, None])[:, None, None, :]


def _padding_off_by_one(lengths, max_len):
    return (torch.arange(max_len) <= lengths[:, None])[:, None, None, :]


def _padding_drops_last(lengths, max_len):
    return (torch.arange(1, max_len + 1) < lengths[:, None])[:, None, None, :]


def _padding_key_axis_first(lengths, max_len):
    return (torch.arange(max_len) < lengths[:, None])[:, :, None, None]  # (N, S, 1, 1)


def _padding_query_axis(lengths, max_len):
    return (torch.arange(max_len) < lengths[:, None])[:, None, :, None]  # (N, 1, S, 1)


def _padding_dims_in_front(lengths, max_len):
    return (torch.arange(max_len) < lengths[:, None])[None, None]  # (1, 1, N, S)


def _padding_three_dims(lengths, max_len):
    return (torch.arange(max_len) < lengths[:, None])[:, None, :]  # (N, 1, S)


def _padding_queries_too(lengths, max_len):
    real = torch.arange(max_len) < lengths[:, None]  # (N, S)
    return real[:, None, :, None] & real[:, None, None, :]  # (N, 1, S, S)


def _padding_no_new_axis(lengths, max_len):
    return (torch.arange(max_len) < lengths)[:, None, None, :]  # raises, or compares position n with lengths[n]


def _padding_float(lengths, max_len):
    return (torch.arange(max_len) < lengths[:, None]).float()[:, None, None, :]


def _padding_integer(lengths, max_len):
    return (torch.arange(max_len) < lengths[:, None]).long()[:, None, None, :]


def _padding_longest(lengths, max_len):
    return (torch.arange(int(lengths.max())) < lengths[:, None])[:, None, None, :]


def _padding_additive(lengths, max_len):
    real = torch.arange(max_len) < lengths[:, None]
    return torch.zeros(real.shape).masked_fill(~real, float("-inf"))[:, None, None, :]
