"""Exercises of chapter 2: scaled dot-product attention, the causal mask and the padding mask.

See :mod:`utils.exercises.definition` for the contract. Masks follow the package convention: True = may attend.
"""

from __future__ import annotations

import math
import random

import torch

from utils import attention
from utils.exercises.common import Case
from utils.exercises.definition import Exercise, Mistake

__all__ = [
    "CAUSAL",
    "EXERCISES",
    "PADDING",
    "SDPA",
    "causal_mask_reference",
    "padding_mask_reference",
    "scaled_dot_product_attention_reference",
]


# --------------------------------------------------------------------------------------------------
# ch2.scaled_dot_product_attention
# --------------------------------------------------------------------------------------------------


# Bound at import: the check replaces the forbidden names in `utils.attention` while the learner's code runs.
_REFERENCE_SDPA = attention.scaled_dot_product_attention
_REFERENCE_CAUSAL = attention.causal_mask
_REFERENCE_PADDING = attention.padding_mask


def scaled_dot_product_attention_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None):
    return _REFERENCE_SDPA(q, k, v, mask)


def _sdpa_variant(q, k, v, mask=None, *, scale=None, dim=-1, invert=False):
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ k.transpose(-2, -1) * scale  # (..., L, S)
    if mask is not None:
        scores = scores.masked_fill(mask if invert else ~mask, float("-inf"))
    weights = scores.softmax(dim)
    return weights @ v, weights


def _sdpa_no_scale(q, k, v, mask=None):
    return _sdpa_variant(q, k, v, mask, scale=1.0)


def _sdpa_divide_by_d(q, k, v, mask=None):
    return _sdpa_variant(q, k, v, mask, scale=1 / q.shape[-1])


def _sdpa_softmax_over_queries(q, k, v, mask=None):
    return _sdpa_variant(q, k, v, mask, dim=-2)


def _sdpa_inverted_mask(q, k, v, mask=None):
    return _sdpa_variant(q, k, v, mask, invert=True)


def _mixed_mask(gen: torch.Generator, shape: tuple[int, ...]) -> torch.Tensor:
    """A random bool mask (..., L, S), S >= 2, with at least one True and one False in every row."""
    mask = torch.rand(shape, generator=gen) < 0.6
    *_, S = shape
    keep = torch.randint(0, S, (*shape[:-1], 1), generator=gen)
    block = (keep + 1 + torch.randint(0, S - 1, keep.shape, generator=gen)) % S  # another column
    columns = torch.arange(S)
    return (mask | (columns == keep)) & (columns != block)


def _sdpa_cases(rng: random.Random, gen: torch.Generator) -> list[Case]:
    def qkv(batch: tuple[int, ...], L: int, S: int, D: int, Dv: int, dtype=torch.float32):
        return {"q": torch.randn(*batch, L, D, generator=gen, dtype=dtype),
                "k": torch.randn(*batch, S, D, generator=gen, dtype=dtype),
                "v": torch.randn(*batch, S, Dv, generator=gen, dtype=dtype)}

    N, L, S = rng.randint(2, 3), rng.randint(3, 6), rng.randint(4, 8)
    D = rng.choice([8, 16, 32])
    cases = [
        # no mask, self-attention shapes, a large D so that a missing scale shows
        {**qkv((N,), L, L, D, rng.randint(2, 6)), "mask": None},
        # cross-attention L != S, one mask per example (N, L, S)
        {**qkv((N,), L, S, D, D), "mask": _mixed_mask(gen, (N, L, S))},
        # heads (N, H, L, D) and a padding-style mask (N, 1, 1, S)
        {**qkv((N, 2), L, S, D, 4), "mask": _mixed_mask(gen, (N, 1, 1, S))},
        # batch 1, one query, a shared (L, S) mask
        {**qkv((1,), 1, S, 4, 3), "mask": _mixed_mask(gen, (1, S))},
        # one key only: every weight is 1
        {**qkv((N,), L, 1, rng.randint(2, 5), 2), "mask": None},
        # float64, no batch dimension, a causal mask with S > L so every row has a blocked key
        {**qkv((), L, L + 2, 6, 5, torch.float64), "mask": _REFERENCE_CAUSAL(L, L + 2)},
    ]
    return cases


SDPA = Exercise(
    id="ch2.scaled_dot_product_attention",
    reference=scaled_dot_product_attention_reference,
    make_cases=_sdpa_cases,
    points=3,
    mistakes=(
        Mistake("no_scale", _sdpa_no_scale,
                "your weights are too peaked: you forgot to divide the scores by sqrt(D), "
                "D = q.shape[-1]"),
        Mistake("divide_by_d", _sdpa_divide_by_d,
                "your weights are too flat: divide the scores by math.sqrt(D), not by D"),
        Mistake("softmax_over_queries", _sdpa_softmax_over_queries,
                "your weights sum to 1 down each column, not along each row: take the softmax over "
                "the keys, dim=-1 (S), not dim=-2 (L)"),
        Mistake("inverted_mask", _sdpa_inverted_mask,
                "your mask works the wrong way round: True means *may attend*, so fill the scores where "
                "the mask is False (`scores.masked_fill(~mask, float('-inf'))`)"),
    ),
    forbidden=(
        "torch.nn.functional.scaled_dot_product_attention",
        "torch.nn.MultiheadAttention",
        "utils",  # the course's own reference: caught in the source; run time also blocks the function below
        "utils.attention.scaled_dot_product_attention",
    ),
    hint="compute scores = q @ k.transpose(-2, -1) / sqrt(D), mask, softmax over dim=-1, then weights @ v",
)


# --------------------------------------------------------------------------------------------------
# ch2.causal_mask
# --------------------------------------------------------------------------------------------------


def causal_mask_reference(size: int) -> torch.Tensor:
    return _REFERENCE_CAUSAL(size)


def _causal_future(size: int) -> torch.Tensor:
    return torch.ones(size, size, dtype=torch.bool).triu()


def _causal_no_self(size: int) -> torch.Tensor:
    return torch.ones(size, size, dtype=torch.bool).tril(-1)


def _causal_blocked(size: int) -> torch.Tensor:
    return torch.ones(size, size, dtype=torch.bool).triu(1)


def _causal_float(size: int) -> torch.Tensor:
    return torch.ones(size, size).tril()


def _causal_cases(rng: random.Random, gen: torch.Generator) -> list[Case]:
    return [{"size": rng.randint(3, 6)}, {"size": 2}, {"size": rng.randint(7, 16)}, {"size": 1}]  # 1: all masks agree


CAUSAL = Exercise(
    id="ch2.causal_mask",
    reference=causal_mask_reference,
    make_cases=_causal_cases,
    points=1,
    mistakes=(
        Mistake("future", _causal_future,
                "your mask lets query i see keys i and after: the future. Keep the lower triangle (tril), "
                "so query i sees keys 0..i"),
        Mistake("no_self", _causal_no_self,
                "query i must also see itself: keep the diagonal (tril(), not tril(-1)); otherwise the first "
                "row has no key at all"),
        Mistake("blocked_convention", _causal_blocked,
                "you returned True where a key is *blocked* (nn.MultiheadAttention's convention); here True "
                "means may attend: invert it"),
        Mistake("float", _causal_float,
                "return a bool tensor (dtype=torch.bool), not 1.0/0.0: a float mask would be *added* to the "
                "scores"),
    ),
    forbidden=("utils.attention.causal_mask",),
    hint="torch.ones(size, size, dtype=torch.bool).tril()",
)


# --------------------------------------------------------------------------------------------------
# ch2.padding_mask
# --------------------------------------------------------------------------------------------------


def padding_mask_reference(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    return _REFERENCE_PADDING(lengths, max_len)


def _padding_flat(lengths, max_len):
    return torch.arange(max_len) < lengths[:, None]  # (N, S): missing the broadcasting dims


def _padding_inverted(lengths, max_len):
    return (torch.arange(max_len) >= lengths[:, None])[:, None, None, :]


def _padding_off_by_one(lengths, max_len):
    return (torch.arange(max_len) <= lengths[:, None])[:, None, None, :]


def _padding_cases(rng: random.Random, gen: torch.Generator) -> list[Case]:
    cases = []
    for batch, max_len in ((rng.randint(3, 5), rng.randint(5, 9)), (1, rng.randint(2, 6)), (2, 1)):
        lengths = torch.randint(1, max_len + 1, (batch,), generator=gen)
        lengths[0] = max_len  # one full sentence in every batch
        cases.append({"lengths": lengths, "max_len": max_len})
    cases.append({"lengths": torch.tensor([1, rng.randint(2, 4), 0]), "max_len": 4})  # an empty one too
    return cases


PADDING = Exercise(
    id="ch2.padding_mask",
    reference=padding_mask_reference,
    make_cases=_padding_cases,
    points=1,
    mistakes=(
        Mistake("flat", _padding_flat,
                "your mask has shape (N, S); reshape it to (N, 1, 1, S) (e.g. mask[:, None, None, :]) so that "
                "it broadcasts over heads and queries"),
        Mistake("inverted", _padding_inverted,
                "your mask is True at the padding; here True means a real token that may be attended to"),
        Mistake("off_by_one", _padding_off_by_one,
                "a sentence of length n has real tokens at positions 0..n-1: use `<`, not `<=`"),
    ),
    forbidden=("utils.attention.padding_mask",),
    hint="compare torch.arange(max_len) with lengths[:, None], then add the two broadcasting dims",
)

EXERCISES: tuple[Exercise, ...] = (SDPA, CAUSAL, PADDING)  # notebook order
