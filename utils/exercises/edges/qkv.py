"""Chapter 1's hidden edge cases and parts: with and without a batch dim; the input dtype is kept."""

from __future__ import annotations

import math
import random

import torch

from utils.exercises.common import Case
from utils.exercises.definition import Part


def _batched(case: Case) -> bool:
    return case[next(iter(case))].dim() >= 3


PROJECT_PARTS = (Part("batched x (N, L, E)", 1, _batched), Part("unbatched x (L, E)", 1))
SCORES_PARTS = (Part("batched q, k (..., L, D)", 1, _batched), Part("unbatched q, k (L, D)", 1))


def project_edges(rng: random.Random, gen: torch.Generator) -> list[Case]:
    """float64 inputs (the output keeps their dtype), and a long unbatched sequence with E = 1."""
    E, D = rng.choice([5, 7]), rng.choice([2, 3])
    double = {"x": torch.randn(2, rng.randint(2, 5), E, generator=gen, dtype=torch.float64)}
    for name, width in (("w_q", D), ("w_k", D), ("w_v", D + 1)):
        double[name] = torch.randn(E, width, generator=gen, dtype=torch.float64) / math.sqrt(E)
    long = {"x": torch.randn(rng.randint(20, 40), 1, generator=gen)}
    for name in ("w_q", "w_k", "w_v"):
        long[name] = torch.randn(1, rng.randint(1, 3), generator=gen)
    return [double, long]


def scores_edges(rng: random.Random, gen: torch.Generator) -> list[Case]:
    """(N, H, L, D) with one head and L != S in float64, and an unbatched single query and key."""
    L, S, D = rng.randint(2, 4), rng.randint(5, 7), rng.choice([3, 5])
    heads = {"q": torch.randn(2, 1, L, D, generator=gen, dtype=torch.float64),
             "k": torch.randn(2, 1, S, D, generator=gen, dtype=torch.float64)}
    single = {"q": torch.randn(1, D, generator=gen), "k": torch.randn(1, D, generator=gen)}
    return [heads, single]
