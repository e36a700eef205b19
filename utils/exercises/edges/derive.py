"""Edge cases made from a chapter's own case generator: a case in another dtype, or cut to a batch of 1."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import torch

from utils.exercises.common import Case

CaseMaker = Callable[[random.Random, torch.Generator], list[Case]]


def retyped(case: Case, dtype: torch.dtype) -> Case:
    """``case`` with every floating tensor cast to ``dtype`` (other values unchanged)."""
    return {k: (v.to(dtype) if isinstance(v, torch.Tensor) and v.is_floating_point() else v) for k, v in case.items()}


def first_of_batch(case: Case, names: Sequence[str]) -> Case:
    """``case`` with the tensors ``names`` cut to their first batch entry (a batch of 1)."""
    return {k: (v[:1] if k in names else v) for k, v in case.items()}


def derived(make_cases: CaseMaker, *transforms: tuple[int, Callable[[Case], Case]]) -> CaseMaker:
    """An edge-case maker: draw ``make_cases``'s cases with the same ``rng``/``gen`` (so each seed gives
    others), then apply each ``(index, transform)`` to the case at ``index``."""

    def make(rng: random.Random, gen: torch.Generator) -> list[Case]:
        base = make_cases(rng, gen)
        return [transform(base[index % len(base)]) for index, transform in transforms]

    return make
