"""Small helpers the chapters' probes share (``utils.exercises.probing.<slug>``): read a learner's output
from its outcomes, compare it with an expected tensor, and print a few numbers for a message.

Trusted side only, like the probes' ``explain``: nothing here calls the learner's code.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from utils.exercises.common import Case, Outcome, clone_case, one_line, plain_copy
from utils.exercises.probes import Probe
from utils.i18n.messages import tr


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


def plus_input(got: torch.Tensor | None, expected: torch.Tensor, case: Case) -> str | None:
    """The name of the input ``x`` of ``case`` such that ``got`` is ``expected + x`` (an extra residual), if any.

    >>> plus_input(torch.tensor([3.0, 5.0]), torch.tensor([1.0, 2.0]), {"x": torch.tensor([2.0, 3.0])})
    'x'
    """
    if got is None or got.shape != expected.shape or not got.is_floating_point():
        return None
    for name, value in case.items():
        if (isinstance(value, torch.Tensor) and value.is_floating_point() and value.shape == expected.shape
                and bool(value.abs().max() > 1e-3) and same(got, expected + value, atol=1e-4)):
            return name
    return None


def summary(case: Case) -> str:
    """One probe input, briefly: ``x(2, 5, 6), num_heads=2``.

    >>> summary({"x": torch.zeros(2, 3), "k": -1, "mask": None})
    'x(2, 3), k=-1'
    """
    parts = []
    for key, value in case.items():
        if isinstance(value, torch.Tensor):
            parts.append(f"{key}{tuple(value.shape)}")
        elif value is not None:
            parts.append(f"{key}={value!r}")
    return ", ".join(parts)


def _matches(got: Any, expected: Any) -> bool:
    if isinstance(expected, (tuple, list)):
        return (isinstance(got, (tuple, list)) and len(got) == len(expected)
                and all(_matches(g, e) for g, e in zip(got, expected)))
    if isinstance(expected, torch.Tensor):
        return isinstance(got, torch.Tensor) and same(got, expected, atol=1e-4)
    return False


def contrast(name: str, make_inputs: Callable[[torch.Generator], list[Case]],
             describe: Callable[[Case], str] = summary) -> Probe:
    """A probe that runs the exercise on inputs that differ in one respect (a batch of 1 and of 2, a 2-D and a
    3-D ``x``, k > 0 and k < 0…) and, when the learner is right on some and wrong on others, says which: the
    boundary between them localises the fault. Silent when the learner is right everywhere or nowhere.
    ``describe`` names one input in the message (default :func:`summary`)."""

    def explain(reference, inputs, outcomes) -> str | None:
        if len(outcomes) < len(inputs):
            return None
        good, bad = [], []
        for case, outcome in zip(inputs, outcomes):
            expected = reference_output(reference, case)
            if outcome.error is not None:
                bad.append((case, tr("it raised {kind}: {message}", kind=outcome.error[0],
                                     message=one_line(outcome.error[1], 120))))
            elif _matches(plain_copy(outcome.output), expected):
                good.append(case)
            else:
                got = plain_copy(outcome.output)
                first = got[0] if isinstance(got, (tuple, list)) and got else got
                want = expected[0] if isinstance(expected, (tuple, list)) else expected
                if isinstance(first, torch.Tensor) and first.shape == want.shape and not first.is_complex():
                    what = tr("it is off by up to {error:.3g}", error=max_error(first, want))
                elif isinstance(first, torch.Tensor):
                    what = tr("it has shape {got}, not {want}", got=tuple(first.shape), want=tuple(want.shape))
                else:
                    what = tr("it returns {kind}, not a tensor", kind=type(first).__name__)
                bad.append((case, what))
        if not good or not bad:
            return None
        varying = [key for key in inputs[0] if len({summary({key: c.get(key)}) for c in inputs}) > 1]

        def name(case: Case) -> str:
            return describe({key: case[key] for key in varying} if describe is summary else case)

        return tr("your function is right on {good}, but not on {bad}: on {first}, {what}",
                  good="; ".join(name(c) for c in good), bad="; ".join(name(c) for c, _ in bad),
                  first=name(bad[0][0]), what=bad[0][1])

    return Probe(name, make_inputs, explain)
