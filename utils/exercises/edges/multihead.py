"""Chapter 3's hidden edge cases and parts: masks (including queries that see no key), float16,
bfloat16, a batch of 1, one head; and the two rule cases the public cases of ``ch3.multi_head_attention``
start with (float16, scores of order 1e4)."""

from __future__ import annotations

import math
import random

import torch

from utils.attention import causal_mask
from utils.exercises.common import Case
from utils.exercises.definition import Part

MHA_PARTS = (
    Part("float16", 1, lambda case: case["x"].dtype != torch.float32),
    Part("without a mask", 1, lambda case: case.get("mask") is None),
    Part("with a mask", 1),
)


def mha_float16_case(gen: torch.Generator) -> dict:
    """float16, where -1e9 cannot be stored. Small integers (x) and quarters (weights) with D = 4 make
    the projections and scores exact, so every correct order of operations gives the same output."""
    N, L, H, D = 2, 5, 2, 4
    E = H * D
    case = {"x": torch.randint(-2, 3, (N, L, E), generator=gen).half()}
    for name in ("w_q", "w_k", "w_v", "w_o"):
        case[name] = torch.randint(-1, 2, (E, E), generator=gen).half() / 4
    return {**case, "num_heads": H, "mask": causal_mask(L)}


def large_score_case(gen: torch.Generator) -> dict:
    """Scores of order 1e6, exact in float32 (integers below 2**24, D = 4): in row 0 of both heads the one
    allowed key scores -2e6 and a masked key +2e6, so a finite fill (-1e4, or float16's -65504, added or
    filled) lets the masked keys win; only -inf is a wall at any score."""
    N, L, H, D = 1, 4, 2, 4
    E = H * D
    x = torch.zeros(N, L, E)
    x[0, :, :L] = 1000 * torch.eye(L)  # token i's query and key are rows i of W_Q and W_K, times 1000
    w_q = torch.randint(-2, 3, (E, E), generator=gen).float()
    w_k = torch.randint(-2, 3, (E, E), generator=gen).float()
    w_q[0] = torch.randint(0, 2, (E,), generator=gen).float() * 2 - 1  # +-1: |block|^2 = 4 per head
    w_k[0], w_k[1] = -w_q[0], w_q[0]  # row 0: key 0 (allowed) 1e6 * (-4) / 2, key 1 (masked) +2e6
    w_v, w_o = (torch.randn(E, E, generator=gen) / math.sqrt(E) for _ in range(2))
    return {"x": x, "w_q": w_q, "w_k": w_k, "w_v": w_v, "w_o": w_o, "num_heads": H, "mask": causal_mask(L)}


def split_edges(rng: random.Random, gen: torch.Generator) -> list[Case]:
    """bfloat16, and heads of width 1 (num_heads = E) with a batch of 1."""
    E = rng.choice([3, 5])
    return [{"x": torch.randn(2, rng.randint(2, 4), 6, generator=gen).to(torch.bfloat16), "num_heads": 3},
            {"x": torch.randn(1, rng.randint(2, 5), E, generator=gen), "num_heads": E}]


def merge_edges(rng: random.Random, gen: torch.Generator) -> list[Case]:
    """bfloat16, and heads of width 1 with a batch of 1."""
    return [{"x": torch.randn(2, 3, rng.randint(2, 4), 2, generator=gen).to(torch.bfloat16)},
            {"x": torch.randn(1, rng.choice([3, 5]), rng.randint(2, 5), 1, generator=gen)}]


def _weights(gen: torch.Generator, E: int, dtype: torch.dtype = torch.float32) -> Case:
    return {name: (torch.randn(E, E, generator=gen) / math.sqrt(E)).to(dtype) for name in ("w_q", "w_k", "w_v", "w_o")}


def mha_edges(rng: random.Random, gen: torch.Generator) -> list[Case]:
    L = rng.randint(3, 6)
    # batch 1, 2 heads, a causal mask and left padding: the first query sees no key at all
    padded = {"x": torch.randn(1, L, 8, generator=gen), **_weights(gen, 8), "num_heads": 2}
    keys = torch.arange(L) >= 1
    padded["mask"] = causal_mask(L) & keys  # (L, L): row 0 sees nothing
    # one head of width 6, no mask
    single = {"x": torch.randn(2, L, 6, generator=gen), **_weights(gen, 6), "num_heads": 1, "mask": None}
    # float16 with small exact values (integers and quarters), a padding mask (N, 1, 1, L)
    half = {"x": torch.randint(-2, 3, (2, L, 4), generator=gen).half(), "num_heads": 2}
    for name in ("w_q", "w_k", "w_v", "w_o"):
        half[name] = torch.randint(-1, 2, (4, 4), generator=gen).half() / 4
    lengths = torch.tensor([L, max(1, L - 2)])
    half["mask"] = (torch.arange(L) < lengths[:, None])[:, None, None, :]
    return [padded, single, half]
