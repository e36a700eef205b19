"""Chapter 6's hidden edge cases and parts: masked rows (the NaN trap), float16, windows, caches."""

from __future__ import annotations

import random

import torch

from utils.exercises.common import Case
from utils.exercises.definition import Part


def _has_masked_rows(case: Case) -> bool:
    return bool(torch.isinf(case["running_max"]).any() or torch.isinf(case["block"]).any())


ONLINE_PARTS = (Part("float16", "0.5", lambda case: case["block"].dtype != torch.float32),
                Part("masked rows (-inf)", "0.5", _has_masked_rows),
                Part("finite scores", 1))


def online_edges(rng: random.Random, gen: torch.Generator) -> list[Case]:
    """Every row fully masked so far and in this block; and float16 values whose sums are exact."""
    R, B = rng.randint(2, 4), rng.randint(2, 5)
    inf = float("-inf")
    masked = {"running_max": torch.full((R,), inf), "running_sum": torch.zeros(R), "block": torch.full((R, B), inf)}
    top = rng.choice([-1.0, 0.5, 2.0])
    half = {"running_max": torch.full((3,), top, dtype=torch.float16),
            "running_sum": torch.tensor([1.0, 2.0, 3.0], dtype=torch.float16),
            "block": torch.full((3, B), top, dtype=torch.float16)}
    return [masked, half]


def window_edges(rng: random.Random, gen: torch.Generator) -> list[Case]:
    del gen
    L = rng.randint(6, 12)
    return [{"L": L, "window": L - 1}, {"L": L, "window": 1}]


def cache_edges(rng: random.Random, gen: torch.Generator) -> list[Case]:
    """A long cache with one head, and a batch of 1 with many heads and a small head dim."""
    def case(N: int, H: int, T: int, D: int) -> Case:
        return {"q_new": torch.randn(N, H, 1, D, generator=gen), "k_new": torch.randn(N, H, 1, D, generator=gen),
                "v_new": torch.randn(N, H, 1, D, generator=gen), "k_cache": torch.randn(N, H, T, D, generator=gen),
                "v_cache": torch.randn(N, H, T, D, generator=gen)}
    return [case(2, 1, rng.randint(30, 60), 4), case(1, rng.randint(5, 8), rng.randint(2, 4), 2)]
