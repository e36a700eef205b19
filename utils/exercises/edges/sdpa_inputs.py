"""The constructed inputs of chapter 2's public attention cases (trusted side; imports no chapter module).

Masks with an allowed and a blocked key in every row, scores set exactly (of order 1e4, where a finite
fill is no wall), a float16 case whose right answers are exact, and queries that may see no key.
"""

from __future__ import annotations

import torch

from utils.exercises.common import Case


def mixed_mask(gen: torch.Generator, shape: tuple[int, ...]) -> torch.Tensor:
    """A random bool mask (..., L, S), S >= 2, with at least one True and one False in every row."""
    mask = torch.rand(shape, generator=gen) < 0.6
    *_, S = shape
    keep = torch.randint(0, S, (*shape[:-1], 1), generator=gen)
    block = (keep + 1 + torch.randint(0, S - 1, keep.shape, generator=gen)) % S  # another column
    columns = torch.arange(S)
    return (mask | (columns == keep)) & (columns != block)


def set_scores(scores: torch.Tensor) -> dict[str, torch.Tensor]:
    """q and k whose scaled scores q @ k^T / sqrt(D) are exactly ``scores`` (..., L, S), with D = 16.

    Key j is 4·e_j (so S <= 16) and query i carries its scores in its first S entries: the products are
    exact in float32 whatever the order of the operations, so any correct solution matches the reference."""
    *batch, L, S = scores.shape
    q = torch.zeros(*batch, L, 16)
    q[..., :S] = scores
    k = torch.zeros(*batch, S, 16)
    k[..., range(S), range(S)] = 4.0  # sqrt(16)
    return {"q": q, "k": k}


def large_score_cases(gen: torch.Generator, N: int, L: int, S: int) -> list[Case]:
    """Scores of order 1e4 and 1e5, where a finite fill such as -1e4, or even float16's -65504, is no wall
    (the -1e4 myth check, and the chapter's rule: -inf is exact at any score)."""
    mask = mixed_mask(gen, (N, L, S))
    moderate = torch.randint(-96, 97, (N, L, S), generator=gen) / 8  # in [-12, 12], exact
    v = torch.randn(N, S, 3, generator=gen)
    # (a) every masked key scores about 2.5e4 above the allowed ones: adding -1e4 leaves it on top
    above = torch.where(mask, moderate, 25000 + moderate)
    # (b) every allowed key scores about -1e5 (float32 holds it; exact in steps of 1/32): replacing the
    # masked scores by -1e4, or by torch.finfo(torch.float16).min = -65504, puts them on top; in every
    # other query row about -3e4 instead, where -1e4 still leaks and -65504 does not: the two are told apart
    base = torch.where(torch.arange(L)[:, None] % 2 == 0, 100000.0, 30000.0)  # (L, 1)
    below = torch.where(mask, moderate / 4 - base, moderate)
    return [{**set_scores(above), "v": v, "mask": mask}, {**set_scores(below), "v": v.flip(0), "mask": mask}]


def sdpa_float16_case(gen: torch.Generator) -> Case:
    """A float16 case whose every correct answer is exact in float16 (so any order of operations matches).

    The keys of an example are one vector repeated, so each query scores its keys equally and its weights
    are 1/n over its n allowed keys, n = 1 or 2; q, k and v are small multiples of 1/4."""
    N, L, S, D = 2, 3, 4, 4
    quarter = lambda *shape: (torch.randint(-8, 9, shape, generator=gen) / 4).half()  # noqa: E731
    patterns = torch.tensor([[1, 1, 0, 0], [0, 1, 0, 0], [1, 0, 1, 0], [0, 0, 1, 1], [0, 0, 0, 1], [0, 1, 1, 0]])
    mask = patterns[torch.randperm(N * L, generator=gen)].view(N, L, S).bool()  # 2 or 1 allowed keys a row
    return {"q": quarter(N, L, D), "k": quarter(N, 1, D).expand(N, S, D).clone(), "v": quarter(N, S, 5), "mask": mask}


def fully_masked_case(gen: torch.Generator, N: int, L: int, S: int, D: int) -> Case:
    """Heads, and queries that may see no key at all: an empty sentence, and one more fully-masked row."""
    mask = mixed_mask(gen, (N, 1, L, S))
    mask[-1] = False  # an empty (all-padding) sentence: all its queries see nothing
    mask[0, 0, torch.randint(0, L, (1,), generator=gen)] = False  # one query of the first sentence too
    return {"q": torch.randn(N, 2, L, D, generator=gen), "k": torch.randn(N, 2, S, D, generator=gen),
            "v": torch.randn(N, 2, S, 3, generator=gen), "mask": mask}
