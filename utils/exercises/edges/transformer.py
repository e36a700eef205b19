"""Chapter 5's hidden edge cases: the chapter's own cases cut to a batch of 1, and longer inputs."""

from __future__ import annotations

import random

import torch

from utils.exercises.common import Case
from utils.exercises.edges.derive import CaseMaker, derived, first_of_batch


def feed_forward_edges(rng: random.Random, gen: torch.Generator) -> list[Case]:
    """A single vector (E,), and a (1, L, E) batch whose hidden pre-activations are large."""
    E = rng.choice([4, 6])
    def weights(hidden: int) -> Case:
        return {"w1": torch.randn(E, hidden, generator=gen) / E ** 0.5, "b1": torch.randn(hidden, generator=gen),
                "w2": torch.randn(hidden, E, generator=gen) / hidden ** 0.5, "b2": torch.randn(E, generator=gen)}
    return [{"x": torch.randn(E, generator=gen), **weights(2 * E)},
            {"x": 8 * torch.randn(1, rng.randint(5, 9), E, generator=gen), **weights(4 * E)}]


def encoder_edges(make_cases: CaseMaker) -> CaseMaker:
    """The first and fifth of the chapter's cases (several heads, several tokens) cut to a batch of 1."""
    return derived(make_cases, (0, lambda case: first_of_batch(case, ("x",))),
                   (4, lambda case: first_of_batch(case, ("x",))))
