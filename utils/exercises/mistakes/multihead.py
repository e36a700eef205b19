"""Plausible wrong answers to the exercises of chapter 3, "Multi-head attention".

Each function is the ``fn`` of a :class:`~utils.exercises.definition.Mistake` declared, with its
diagnosis, in :mod:`utils.exercises.multihead`. Most mistakes of ``ch3.multi_head_attention`` are
:func:`_mha_with`, one configurable implementation, with one option changed (:func:`_mha_variant`).
Shapes: N batch, L length, E model dimension, H heads, D = E // H head dimension.
"""

from __future__ import annotations

import math

import torch

# --------------------------------------------------------------------------------------------------
# split_heads
# --------------------------------------------------------------------------------------------------


def _split_no_transpose(x, num_heads):
    N, L, E = x.shape
    return x.reshape(N, num_heads, L, E // num_heads)


def _split_missing_transpose(x, num_heads):
    N, L, E = x.shape
    return x.reshape(N, L, num_heads, E // num_heads)


def _split_strided(x, num_heads):
    N, L, E = x.shape
    return x.reshape(N, L, E // num_heads, num_heads).permute(0, 3, 1, 2)


def _split_heads_and_dim_swapped(x, num_heads):
    N, L, E = x.shape
    return x.view(N, L, E // num_heads, num_heads).transpose(1, 2)


def _split_last_axes(x, num_heads):
    N, L, E = x.shape
    return x.view(N, L, num_heads, E // num_heads).transpose(-1, -2)


def _split_float_dim(x, num_heads):
    N, L, E = x.shape
    return x.view(N, L, num_heads, E / num_heads).transpose(1, 2)


def _split_chunks(x, num_heads):
    return x.chunk(num_heads, dim=-1)


def _split_batch_first(x, num_heads):
    N, L, E = x.shape
    return x.view(N, L, num_heads, E // num_heads).transpose(0, 2)


def _split_heads_axis_first(x, num_heads):
    return torch.stack(x.chunk(num_heads, dim=-1), dim=0)  # (H, N, L, D)


def _split_keys_last(x, num_heads):
    N, L, E = x.shape
    return x.view(N, L, num_heads, E // num_heads).permute(0, 2, 3, 1)  # (N, H, D, L)


def _split_batch_mixed(x, num_heads):
    N, L, E = x.shape
    D = E // num_heads
    return x.reshape(N * L, num_heads, D).transpose(0, 1).reshape(N, num_heads, L, D)


# --------------------------------------------------------------------------------------------------
# merge_heads
# --------------------------------------------------------------------------------------------------


def _merge_no_transpose(x):
    N, H, L, D = x.shape
    return x.reshape(N, L, H * D)


def _merge_feature_major(x):
    N, H, L, D = x.shape
    return x.permute(0, 2, 3, 1).reshape(N, L, D * H)


def _merge_view(x):
    N, H, L, D = x.shape
    return x.transpose(1, 2).view(N, L, H * D)


def _merge_mean(x):
    return x.mean(dim=1)


def _merge_sum(x):
    return x.sum(dim=1)


def _merge_along_tokens(x):
    return torch.cat(x.unbind(1), dim=1)


def _merge_wrong_unpack(x):
    N, L, H, D = x.shape
    return x.transpose(1, 2).reshape(N, L, H * D)


def _merge_flat(x):
    return x.transpose(1, 2).reshape(x.shape[0], -1)


def _merge_no_reshape(x):
    return x.transpose(1, 2)  # (N, L, H, D)


def _merge_last_axes(x):
    N, H, L, D = x.shape
    return x.transpose(2, 3).reshape(N, L, H * D)


# --------------------------------------------------------------------------------------------------
# multi_head_attention
# --------------------------------------------------------------------------------------------------


def _mha_with(x, w_q, w_k, w_v, w_o, num_heads, mask=None, *, split="right", merge="right", project="x@w",
              out="x@w", scale="head", fill=float("-inf"), masking="fill", guard=True, softmax_dim=-1,
              swap_kv=False, k_transpose="last", causal=False, manual_softmax=False, softmax_dtype=None,
              return_weights=False, guard_kind="fill", scale_weights=False, split_v=None):
    """One configurable implementation, written as a learner would; each mistake changes one thing.

    ``guard`` zeroes the weights of query rows with no allowed key (the rule); without it they are NaN.
    ``guard_kind`` is how: ``"fill"`` (right), ``"multiply"`` (NaN * 0 stays NaN), ``"all"`` (the rows
    with a blocked key) or ``"no_keepdim"`` (``mask.any(dim=-1)``, which lines up with the keys).
    """
    N, L, E = x.shape
    H = 1 if split == "one_head" else num_heads
    D = E // H

    def split_(t, how=split):
        if how == "no_transpose":
            return t.reshape(N, H, L, D)
        if how == "interleaved":
            return t.reshape(N, L, D, H).permute(0, 3, 1, 2)
        return t.reshape(N, L, H, D).transpose(1, 2)  # (N, H, L, D)

    wq, wk, wv = (w.T for w in (w_q, w_k, w_v)) if project == "x@w.T" else (w_q, w_k, w_v)
    q, k, v = split_(x @ wq), split_(x @ wk), split_(x @ wv, split_v or split)  # split_v: v alone differs
    if swap_kv:
        k, v = v, k
    divisor = {"head": math.sqrt(D), "model": math.sqrt(E), "heads": math.sqrt(H), "none": 1.0,
               "dim": float(D)}[scale]
    k_t = {"last": k.transpose(-2, -1), "1_2": k.transpose(1, 2), "all": k.permute(3, 2, 1, 0)}[k_transpose]
    scores = q @ k_t / divisor  # (N, H, L, L)
    if causal:
        scores = scores.masked_fill(~torch.ones(L, L, dtype=torch.bool).tril(), float("-inf"))
    allowed = mask
    if mask is not None:
        if masking == "invert":
            allowed = ~mask
        elif masking == "queries":
            allowed = mask.transpose(-2, -1)
        elif masking == "unsqueeze":
            allowed = mask.unsqueeze(1)
        elif masking == "rank_raised":
            allowed = mask[None, None]  # (1, 1, ...): an (N, 1, 1, S) mask becomes 6-D
        if masking in ("fill", "invert", "queries", "unsqueeze", "rank_raised"):
            scores = scores.masked_fill(~allowed, fill)
        elif masking == "additive":
            scores = scores + (~allowed).to(scores.dtype) * fill
        elif masking == "bool_add":
            scores = scores + allowed
        elif masking == "multiply":
            scores = scores * allowed
    if manual_softmax:
        e = scores.exp()
        weights = e / e.sum(dim=-1, keepdim=True)
    else:
        weights = torch.softmax(scores, dim=softmax_dim, dtype=softmax_dtype)  # (N, H, L, L)
    if mask is not None and masking == "after_softmax":
        weights = weights * allowed
    if scale_weights:
        weights = weights / math.sqrt(D)  # the weights divided, not the scores
    if mask is not None and guard:
        if guard_kind == "multiply":
            weights = weights * allowed.any(dim=-1, keepdim=True)
        elif guard_kind == "all":
            weights = weights.masked_fill(~allowed.all(dim=-1, keepdim=True), 0.0)
        elif guard_kind == "no_keepdim":
            weights = weights.masked_fill(~allowed.any(dim=-1), 0.0)
        else:
            weights = weights.masked_fill(~allowed.any(dim=-1, keepdim=True), 0.0)
    heads = weights @ v  # (N, H, L, D)
    if merge == "no_transpose":
        merged = heads.reshape(N, L, E)
    elif merge == "feature_major":
        merged = heads.permute(0, 2, 3, 1).reshape(N, L, E)
    elif merge == "view":
        merged = heads.transpose(1, 2).view(N, L, E)
    else:
        merged = heads.transpose(1, 2).reshape(N, L, E)  # (N, L, E)
    result = {"x@w": merged @ w_o, "x@w.T": merged @ w_o.T, "none": merged}[out]
    return (result, weights) if return_weights else result


def _mha_variant(name: str, **options):
    """:func:`_mha_with` with ``options``, named ``_mha_<name>``: the function of one of the chapter's mistakes."""

    def fn(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        return _mha_with(x, w_q, w_k, w_v, w_o, num_heads, mask, **options)

    fn.__name__ = fn.__qualname__ = f"_mha_{name}"
    return fn


def _mha_float_head_dim(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    N, L, E = x.shape
    return (x @ w_q).view(N, L, num_heads, E / num_heads)
