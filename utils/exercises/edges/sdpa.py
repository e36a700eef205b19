"""Chapter 2's hidden edge cases and parts: masks, fully masked rows, half precision, L != S, batch 1."""

from __future__ import annotations

import random

import torch

from utils.exercises.common import Case
from utils.exercises.definition import Part


def _fully_masked(case: Case) -> bool:
    mask = case.get("mask")
    return mask is not None and not bool(mask.any(-1).all())


SDPA_PARTS = (
    Part("fully masked rows", "0.5", _fully_masked),
    Part("float16, bfloat16 and float64", "0.5", lambda case: case["q"].dtype != torch.float32),
    Part("values without a mask", 1, lambda case: case.get("mask") is None),
    Part("with a mask", 1),
)


def _mask(gen: torch.Generator, shape: tuple[int, ...]) -> torch.Tensor:
    """A random bool mask with at least one allowed key in every row (column ``keep`` of each row)."""
    mask = torch.rand(shape, generator=gen) < 0.5
    keep = torch.randint(0, shape[-1], (*shape[:-1], 1), generator=gen)
    return mask | (torch.arange(shape[-1]) == keep)


def _qkv(gen: torch.Generator, batch: tuple[int, ...], L: int, S: int, D: int, Dv: int,
         dtype: torch.dtype = torch.float32) -> Case:
    return {"q": torch.randn(*batch, L, D, generator=gen, dtype=dtype),
            "k": torch.randn(*batch, S, D, generator=gen, dtype=dtype),
            "v": torch.randn(*batch, S, Dv, generator=gen, dtype=dtype)}


def sdpa_edges(rng: random.Random, gen: torch.Generator) -> list[Case]:
    L, S = rng.randint(2, 4), rng.randint(5, 7)
    # batch 1 with heads, L != S, a padding-style mask whose last query row sees nothing
    padded = {**_qkv(gen, (1, 2), L, S, 8, 3), "mask": _mask(gen, (1, 1, L, S))}
    padded["mask"][..., -1, :] = False
    # bfloat16 with a mask; small integer scores (D = 4, entries in {-1, 0, 1}) keep it well conditioned
    bf16 = {name: torch.randint(-1, 2, shape, generator=gen).to(torch.bfloat16)
             for name, shape in (("q", (2, L, 4)), ("k", (2, S, 4)), ("v", (2, S, 2)))}
    bf16["mask"] = _mask(gen, (2, L, S))
    # float16, a whole sentence of padding (every row masked) next to a full one
    empty = {name: torch.randint(-1, 2, shape, generator=gen).half()
             for name, shape in (("q", (2, L, 4)), ("k", (2, S, 4)), ("v", (2, S, 3)))}
    empty["mask"] = torch.ones(2, 1, S, dtype=torch.bool)
    empty["mask"][1] = False
    # no mask, L != S, a large head dim (a wrong scale shows), no batch dim
    unmasked = {**_qkv(gen, (), S, L, 64, 2), "mask": None}
    return [padded, bf16, empty, unmasked]


def causal_edges(rng: random.Random, gen: torch.Generator) -> list[Case]:
    del gen
    return [{"size": rng.randint(20, 40)}]


def padding_edges(rng: random.Random, gen: torch.Generator) -> list[Case]:
    """No padding at all, and a batch of empty sentences only."""
    max_len = rng.randint(3, 7)
    return [{"lengths": torch.full((rng.randint(1, 3),), max_len), "max_len": max_len},
            {"lengths": torch.zeros(2, dtype=torch.int64), "max_len": max_len}]
