"""Small helpers the chapters' probes share (``utils.exercises.probing.<slug>``): read a learner's output
from its outcomes, compare it with an expected tensor, and print a few numbers for a message.

Trusted side only, like the probes' ``explain``: nothing here calls the learner's code.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from utils.exercises.common import Case, Outcome, clone_case, plain_copy


def probe_output(outcomes: Sequence[Outcome], index: int, item: int | None = None) -> torch.Tensor | None:
    """The learner's output tensor on input ``index`` (item ``item`` of a tuple output), or None when the
    call raised, the run stopped before it, or the output is not a tensor (the cases' diagnosis says so).

    >>> probe_output([Outcome(output=(torch.zeros(1), torch.ones(1)))], 0, 1)
    tensor([1.])
    >>> probe_output([Outcome(error=("ValueError", "no"))], 0) is None
    True
    """
    if index >= len(outcomes) or outcomes[index].error is not None:
        return None
    value = outcomes[index].output
    if item is not None:
        if not isinstance(value, (tuple, list)) or len(value) <= item:
            return None
        value = value[item]
    return value if isinstance(value, torch.Tensor) else None


def reference_output(reference: Callable[..., Any], case: Case) -> Any:
    """What the reference returns on a copy of ``case``, as a plain copy."""
    return plain_copy(reference(**clone_case(case)))


def same(got: torch.Tensor | None, expected: torch.Tensor, atol: float = 1e-5, rtol: float = 1e-4) -> bool:
    """Whether ``got`` has ``expected``'s shape and values (compared in float64; NaN equals NaN, a bool
    tensor must be equal).

    >>> same(torch.tensor([1.0, float("nan")]), torch.tensor([1.0 + 1e-7, float("nan")]))
    True
    >>> same(torch.ones(2), torch.ones(3)), same(None, torch.ones(1))
    (False, False)
    """
    if got is None or got.shape != expected.shape:
        return False
    if expected.dtype == torch.bool or got.dtype == torch.bool:
        return got.dtype == expected.dtype and bool(torch.equal(got, expected))
    return bool(torch.allclose(got.double(), expected.double(), atol=atol, rtol=rtol, equal_nan=True))


def max_error(got: torch.Tensor, expected: torch.Tensor) -> float:
    """The largest absolute difference of two same-shaped tensors (inf where one is NaN and the other not)."""
    difference = (got.double() - expected.double()).abs().masked_fill(got.double() == expected.double(), 0.0)
    return float(difference.nan_to_num(nan=float("inf")).max()) if difference.numel() else 0.0


def numbers(values: torch.Tensor | Sequence[float], digits: int = 3) -> str:
    """A few numbers for a message: ``[0, 0.5, 2, -inf]`` (``digits`` significant digits).

    >>> numbers(torch.tensor([0.0, 0.5, 2.0, float("-inf")]))
    '[0, 0.5, 2, -inf]'
    """
    items = values.flatten().tolist() if isinstance(values, torch.Tensor) else list(values)
    return "[" + ", ".join(f"{float(v):.{digits}g}" for v in items) + "]"
