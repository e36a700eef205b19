"""Chapter 4's hidden edge cases and parts: even and odd model widths, shifts either way, dtypes kept."""

from __future__ import annotations

import random

import torch

from utils.exercises.common import Case
from utils.exercises.definition import Part

SINUSOIDAL_PARTS = (Part("odd d_model", 1, lambda case: case["d_model"] % 2 == 1), Part("even d_model", 1))
SHIFT_PARTS = (Part("shifts to the right (k > 0)", 2, lambda case: case["k"] > 0),
               Part("no shift and shifts to the left (k <= 0)", 1))


def sinusoidal_edges(rng: random.Random, gen: torch.Generator) -> list[Case]:
    del gen
    return [{"length": rng.randint(60, 100), "d_model": 2}, {"length": 2, "d_model": rng.choice([3, 7])}]


def shift_edges(rng: random.Random, gen: torch.Generator) -> list[Case]:
    del gen
    return [{"k": -rng.randint(30, 90), "d_model": 2}, {"k": 1, "d_model": 2 * rng.randint(10, 20)}]


def add_edges(rng: random.Random, gen: torch.Generator) -> list[Case]:
    """A sequence exactly as long as the table, and a batch of 1 in float64 with a float32 table."""
    L, E = rng.randint(3, 8), 2 * rng.randint(2, 5)
    full = {"x": torch.randn(2, L, E, generator=gen), "pe": torch.randn(L, E, generator=gen)}
    double = {"x": torch.randn(1, L, E, generator=gen, dtype=torch.float64),
              "pe": torch.randn(L + 3, E, generator=gen)}
    return [full, double]
