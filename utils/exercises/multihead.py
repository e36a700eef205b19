"""Exercises of chapter 3, "Multi-head attention": split heads, merge heads, the functional module.

Shapes: N batch, L length, E model dimension, H heads, D = E // H head dimension. The weights of
``multi_head_attention`` are ``(E, E)`` matrices used as ``x @ W`` (the maths convention; ``nn.Linear``
stores the transpose).
"""

from __future__ import annotations

import math
import random

import torch

from utils.attention import MultiHeadAttention, causal_mask, padding_mask
from utils.exercises.definition import Exercise, Mistake

__all__ = [
    "EXERCISES",
    "MERGE_HEADS",
    "MULTI_HEAD_ATTENTION",
    "SPLIT_HEADS",
    "merge_heads_reference",
    "multi_head_attention_reference",
    "split_heads_reference",
]

# The learner implements what the course's reference provides, so the bare package "utils" is forbidden:
# the static source check catches any use of it (forbid() skips bare names at run time). The reference
# module itself calls utils.attention's split_heads, merge_heads and scaled_dot_product_attention, so at
# run time only the class is blocked (the reference holds its own handle to it).
_NO_UTILS = ("utils", "utils.attention.MultiHeadAttention")


def _shapes(rng: random.Random) -> list[tuple[int, int, int, int]]:
    """(N, L, H, D) for one case each: edge shapes first, then random ones."""
    fixed = [(1, 1, 2, 3), (2, 5, 1, 4), (1, 3, 4, 1)]  # L == 1, H == 1, D == 1
    extra = [(rng.randint(1, 3), rng.randint(2, 7), rng.choice([2, 3, 4]), rng.randint(2, 5)) for _ in range(2)]
    return fixed + extra


# --------------------------------------------------------------------------------------------------
# split_heads
# --------------------------------------------------------------------------------------------------


def split_heads_reference(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    N, L, E = x.shape
    return x.view(N, L, num_heads, E // num_heads).transpose(1, 2)  # (N, H, L, D)


def _split_cases(rng: random.Random, gen: torch.Generator) -> list[dict]:
    return [{"x": torch.randn(N, L, H * D, generator=gen), "num_heads": H} for N, L, H, D in _shapes(rng)]


def _split_no_transpose(x, num_heads):
    N, L, E = x.shape
    return x.reshape(N, num_heads, L, E // num_heads)


def _split_missing_transpose(x, num_heads):
    N, L, E = x.shape
    return x.reshape(N, L, num_heads, E // num_heads)


def _split_strided(x, num_heads):
    N, L, E = x.shape
    return x.reshape(N, L, E // num_heads, num_heads).permute(0, 3, 1, 2)


# --------------------------------------------------------------------------------------------------
# merge_heads
# --------------------------------------------------------------------------------------------------


def merge_heads_reference(x: torch.Tensor) -> torch.Tensor:
    N, H, L, D = x.shape
    return x.transpose(1, 2).reshape(N, L, H * D)  # (N, L, E)


def _merge_cases(rng: random.Random, gen: torch.Generator) -> list[dict]:
    return [{"x": torch.randn(N, H, L, D, generator=gen)} for N, L, H, D in _shapes(rng)]


def _merge_no_transpose(x):
    N, H, L, D = x.shape
    return x.reshape(N, L, H * D)


def _merge_feature_major(x):
    N, H, L, D = x.shape
    return x.permute(0, 2, 3, 1).reshape(N, L, D * H)


def _merge_view(x):
    N, H, L, D = x.shape
    return x.transpose(1, 2).view(N, L, H * D)


# --------------------------------------------------------------------------------------------------
# multi_head_attention
# --------------------------------------------------------------------------------------------------


def multi_head_attention_reference(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    """The reference: :class:`utils.attention.MultiHeadAttention` (no biases) loaded with these weights.

    ``nn.Linear`` computes ``x @ weight.T``, so a weight ``W`` in the ``x @ W`` convention is stored as
    ``W.T``.
    """
    E = x.shape[-1]
    module = MultiHeadAttention(E, num_heads, bias=False).to(x.dtype)
    with torch.no_grad():
        for proj, w in ((module.q_proj, w_q), (module.k_proj, w_k), (module.v_proj, w_v), (module.out_proj, w_o)):
            proj.weight.copy_(w.T)
        out, _ = module(x, mask=mask)
    return out  # (N, L, E)


def _mha_cases(rng: random.Random, gen: torch.Generator) -> list[dict]:
    cases = []
    masks = ["none", "causal", "padding", "none", "causal"]
    for (N, L, H, D), kind in zip(_shapes(rng), masks):
        E = H * D
        case = {"x": torch.randn(N, L, E, generator=gen)}
        for name in ("w_q", "w_k", "w_v", "w_o"):
            case[name] = torch.randn(E, E, generator=gen) / math.sqrt(E)
        case["num_heads"] = H
        if kind == "causal":
            case["mask"] = causal_mask(L)  # (L, L)
        elif kind == "padding":
            lengths = torch.randint(1, L + 1, (N,), generator=gen)
            lengths[0] = max(1, L - 1)  # at least one padded key when L > 1
            case["mask"] = padding_mask(lengths, L)  # (N, 1, 1, L)
        else:
            case["mask"] = None
        cases.append(case)
    return cases


def _mha_with(x, w_q, w_k, w_v, w_o, num_heads, mask=None, *, merge="right", project=True, scale="head",
              invert_mask=False):
    """One configurable implementation; the mistakes below switch one thing off."""
    N, L, E = x.shape
    H, D = num_heads, E // num_heads

    def split(t):
        return t.reshape(N, L, H, D).transpose(1, 2)  # (N, H, L, D)

    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    divisor = {"head": math.sqrt(D), "model": math.sqrt(E), "none": 1.0}[scale]
    scores = q @ k.transpose(-2, -1) / divisor  # (N, H, L, L)
    if mask is not None:
        allowed = ~mask if invert_mask else mask
        scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # (N, H, L, L)
    heads = weights @ v  # (N, H, L, D)
    if merge == "right":
        merged = heads.transpose(1, 2).reshape(N, L, E)
    elif merge == "no_transpose":
        merged = heads.reshape(N, L, E)
    else:  # feature-major: D outer, H inner
        merged = heads.permute(0, 2, 3, 1).reshape(N, L, E)
    return merged @ w_o if project else merged


def _mha_merge_no_transpose(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    return _mha_with(x, w_q, w_k, w_v, w_o, num_heads, mask, merge="no_transpose")


def _mha_merge_feature_major(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    return _mha_with(x, w_q, w_k, w_v, w_o, num_heads, mask, merge="feature_major")


def _mha_no_w_o(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    return _mha_with(x, w_q, w_k, w_v, w_o, num_heads, mask, project=False)


def _mha_scale_model(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    return _mha_with(x, w_q, w_k, w_v, w_o, num_heads, mask, scale="model")


def _mha_no_scale(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    return _mha_with(x, w_q, w_k, w_v, w_o, num_heads, mask, scale="none")


def _mha_linear_convention(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    return _mha_with(x, w_q.T, w_k.T, w_v.T, w_o.T, num_heads, mask)


def _mha_inverted_mask(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    return _mha_with(x, w_q, w_k, w_v, w_o, num_heads, mask, invert_mask=True)


SPLIT_HEADS = Exercise(
    id="ch3.split_heads",
    reference=split_heads_reference,
    make_cases=_split_cases,
    points=1,
    mistakes=[
        Mistake(
            "missing_transpose", _split_missing_transpose,
            "your output is (N, L, H, D): after the view, call .transpose(1, 2) to bring the heads "
            "axis in front of the tokens, giving (N, H, L, D).",
        ),
        Mistake(
            "view_straight_to_NHLD", _split_no_transpose,
            "you reshaped (N, L, E) straight to (N, H, L, D), which mixes features of different tokens "
            "into one head's row; view as (N, L, H, D) first, then transpose(1, 2).",
        ),
        Mistake(
            "strided_heads", _split_strided,
            "your head h takes every H-th feature (h, h+H, ...) instead of the block h*D to (h+1)*D-1; "
            "split the last axis as (H, D), heads first: x.view(N, L, H, D).",
        ),
    ],
    forbidden=("utils",),
    hint="x.view(N, L, H, D) then .transpose(1, 2).",
)

MERGE_HEADS = Exercise(
    id="ch3.merge_heads",
    reference=merge_heads_reference,
    make_cases=_merge_cases,
    points=1,
    mistakes=[
        Mistake(
            "view_after_transpose", _merge_view,
            "after transpose(1, 2) the tensor is not contiguous, so .view cannot reinterpret it; use "
            ".reshape(N, L, H * D) or .contiguous().view(N, L, H * D).",
        ),
        Mistake(
            "no_transpose", _merge_no_transpose,
            "you reshaped (N, H, L, D) straight to (N, L, H*D), which scrambles tokens and heads "
            "(no error, just wrong numbers); transpose(1, 2) to (N, L, H, D) first, then reshape.",
        ),
        Mistake(
            "feature_major", _merge_feature_major,
            "your features come out interleaved (feature 0 of every head, then feature 1, ...); "
            "the heads must sit side by side: head 0's D features, then head 1's. Transpose only "
            "axes 1 and 2.",
        ),
    ],
    forbidden=("utils",),
    hint="x.transpose(1, 2) is (N, L, H, D); then reshape to (N, L, H * D).",
)

MULTI_HEAD_ATTENTION = Exercise(
    id="ch3.multi_head_attention",
    reference=multi_head_attention_reference,
    make_cases=_mha_cases,
    points=3,
    mistakes=[
        Mistake(
            "merge_no_transpose", _mha_merge_no_transpose,
            "the heads are merged in the wrong order: you reshaped (N, H, L, D) straight to (N, L, E); "
            "transpose(1, 2) before the reshape so that each token gets its own heads' outputs.",
        ),
        Mistake(
            "merge_feature_major", _mha_merge_feature_major,
            "the heads are merged in the wrong order: features are interleaved across heads; "
            "concatenate heads side by side with .transpose(1, 2).reshape(N, L, E).",
        ),
        Mistake(
            "missing_w_o", _mha_no_w_o,
            "your output equals the concatenated heads: you forgot the output projection "
            "(multiply the merged (N, L, E) tensor by w_o).",
        ),
        Mistake(
            "scale_by_model_dim", _mha_scale_model,
            "you scaled the scores by 1/sqrt(E); each head works in D = E // num_heads dimensions, "
            "so divide by sqrt(D).",
        ),
        Mistake(
            "no_scale", _mha_no_scale,
            "your scores are not scaled: divide q @ k^T by sqrt(D), with D = E // num_heads.",
        ),
        Mistake(
            "linear_convention", _mha_linear_convention,
            "you used x @ W.T (nn.Linear's storage convention); the weights here are given for "
            "x @ W, so compute x @ w_q, x @ w_k, x @ w_v and merged @ w_o.",
        ),
        Mistake(
            "inverted_mask", _mha_inverted_mask,
            "your mask is inverted: here True means *may attend* (like F.scaled_dot_product_attention), "
            "so fill the scores with -inf where the mask is False.",
        ),
    ],
    forbidden=(
        "torch.nn.functional.scaled_dot_product_attention",
        "torch.nn.functional.multi_head_attention_forward",
        "torch.nn.MultiheadAttention",
        *_NO_UTILS,
    ),
    hint="project with x @ w_q (and w_k, w_v), split heads, attend with scale 1/sqrt(D), merge, then @ w_o.",
)

EXERCISES: tuple[Exercise, ...] = (SPLIT_HEADS, MERGE_HEADS, MULTI_HEAD_ATTENTION)  # notebook order
