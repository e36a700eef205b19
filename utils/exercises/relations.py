"""Relations between a learner's wrong output and the reference's, read from outcomes already recorded.

The first kind of probe of :mod:`utils.exercises.probes` (no extra run of the learner's function): for
the failing cases, is the learner's output the reference's times a constant (which: √D, 1/D, -1…),
transposed, shifted by one position, permuted along a dim or in blocks, a softmax over the wrong dim,
NaN only in fully masked rows, or different only in one region (masked positions, the diagonal, odd
columns, the second half…)? A relation is reported only when it holds on every failing case whose
output has the right shape, so a coincidence on one small case names nothing. Trusted side.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

import torch

from utils.exercises.common import Case, Outcome, clone_case, plain_copy
from utils.i18n.messages import tr


class ProbedExercise(Protocol):
    """What the probes read of an :class:`~utils.exercises.definition.Exercise` (a protocol, so that
    :mod:`utils.exercises.definition` may import :class:`~utils.exercises.probes.Probe` without a circle)."""

    reference: Any
    probes: Sequence[Any]
    atol: float
    rtol: float

    def public_cases(self) -> list[Case]: ...

Failure = tuple[int, Case, Outcome, "tuple[str, str] | None"]
"""A failing case as the judge records it: ``(index, case, outcome, (category, reason) or None)``."""

Found = dict[str, "str | None"]
"""Relation key -> the observation's text (a key says the same thing on every case), or None where the relation
holds only trivially on this case (a bias on an output of one row): it must show on some other case."""


def relate(exercise: ProbedExercise, failures: Sequence[Failure], only: tuple[str, ...] = ()
           ) -> tuple[str, int] | None:
    """The relation between the learner's output and the reference's that holds on every failing case
    whose output is a tensor (or tuple of tensors) of the right shape; its text and the first such case.
    Relations are tried from the most specific (a transpose) to the least (where the differences are);
    ``only`` keeps the relations whose key ends with one of these names."""
    common: Found | None = None
    first = None
    for position, (_, case, outcome, reason) in enumerate(failures):
        if outcome.error or reason is None:
            continue
        expected = plain_copy(exercise.reference(**clone_case(case)))
        found = _relations_of(plain_copy(outcome.output), expected, case, exercise.atol, exercise.rtol)
        if found is not None and only:
            found = {k: v for k, v in found.items() if k.endswith(only)}
        if found is None:
            continue  # nothing comparable in this case (a wrong type, say)
        common = found if common is None else {k: v or found[k] for k, v in common.items() if k in found}
        first = position if first is None else first
        if not common:
            return None
    shown = [text for text in (common or {}).values() if text is not None]  # None: it holds, but trivially
    if not shown or first is None:
        return None
    return shown[0], first


def _relations_of(got: Any, expected: Any, case: Case, atol: float, rtol: float) -> Found | None:
    if isinstance(expected, tuple) and isinstance(got, (tuple, list)) and len(got) == len(expected):
        for i, (g, e) in enumerate(zip(got, expected)):
            found = _relations_of(g, e, case, atol, rtol)
            if found is not None and not (isinstance(g, torch.Tensor) and _close(g, e, atol, rtol).all()):
                return {f"{i}:{k}": None if v is None else tr("output[{i}]: {text}", i=i, text=v)
                        for k, v in found.items()}
        return None
    if not (isinstance(got, torch.Tensor) and isinstance(expected, torch.Tensor) and expected.is_floating_point()
            and got.is_floating_point() and got.numel() > 0):
        return None
    g, e = got.double(), expected.double()
    found: Found = {}
    if g.ndim >= 2 and min(g.shape[-2:]) > 1 and g.shape == e.mT.shape and _close(g, e.mT, atol, rtol).all():
        found["transpose"] = tr("your output is the reference's transposed (its last two dimensions swapped): "
                                "check the order of the operands of `@` and which dims `.transpose` swaps")
    if g.shape != e.shape:
        return found
    bad = ~_close(g, e, atol, rtol)
    if not bad.any():
        return found
    found.update(_plus_input(g, e, case, atol, rtol))
    found.update(_plus_bias(g, e, atol, rtol))
    found.update(_nonfinite_in_masked_rows(g, e, case))
    found.update(_scale(g, e, case, atol, rtol))
    found.update(_shift(g, e, atol, rtol))
    found.update(_permutation(g, e, atol, rtol))
    found.update(_wrong_sum_dim(g, e))
    found.update(_regions(g, e, bad, case))
    return found


def _close(g: torch.Tensor, e: torch.Tensor, atol: float, rtol: float) -> torch.Tensor:
    return torch.isclose(g.double(), e.double(), atol=atol, rtol=rtol, equal_nan=True)


def _plus_input(g: torch.Tensor, e: torch.Tensor, case: Case, atol: float, rtol: float) -> Found:
    for name, value in case.items():
        if (isinstance(value, torch.Tensor) and value.is_floating_point() and value.shape == e.shape
                and bool(value.abs().max() > 1e-3) and _close(g, e + value.double(), atol, rtol).all()):
            return {"plus_input": tr("your output is the reference's plus the input `{name}`: an extra residual "
                                     "connection, or `{name}` added where it does not belong", name=name)}
    return {}


def _plus_bias(g: torch.Tensor, e: torch.Tensor, atol: float, rtol: float) -> Found:
    """The output is the reference's plus one vector, the same for every token: a bias (trivially so on one row)."""
    if g.ndim < 1 or not torch.isfinite(g).all():
        return {}
    if g.ndim < 2 or g.numel() // max(g.shape[-1], 1) < 2:
        return {"plus_bias": None}
    rows = (g - e).reshape(-1, g.shape[-1])
    bias = rows[0]
    if bool(bias.abs().max() <= 10 * atol) or not _close(g, e + bias, atol, rtol).all():
        return {}
    return {"plus_bias": tr("your output is the reference's plus one vector, the same for every token (a constant "
                            "per output feature): a bias added where none belongs, or added twice (an nn.Linear "
                            "adds one unless bias=False)")}


def _masks(case: Case) -> list[torch.Tensor]:
    return [v for v in case.values() if isinstance(v, torch.Tensor) and v.dtype == torch.bool and v.ndim >= 1]


def _rows_of(mask_rows: torch.Tensor, shape: torch.Size) -> torch.Tensor | None:
    """``mask_rows`` (one flag per query row) spread over an output of ``shape`` (rows on dim -2)."""
    try:
        return torch.broadcast_to(mask_rows.unsqueeze(-1), shape)
    except RuntimeError:
        return None


def _nonfinite_in_masked_rows(g: torch.Tensor, e: torch.Tensor, case: Case) -> Found:
    bad = ~torch.isfinite(g) & torch.isfinite(e)
    if not bad.any() or g.ndim < 2:
        return {}
    for mask in _masks(case):
        rows = _rows_of(~mask.any(-1), g.shape) if mask.ndim >= 2 else None
        if rows is not None and rows.any() and not (bad & ~rows).any():
            return {"nan_rows": tr("your output is NaN only in the fully masked rows (queries that may attend to no "
                                   "key): a softmax over a row of -inf is 0/0; give such rows zero weights")}
    return {}


def _dims(case: Case, e: torch.Tensor) -> list[tuple[int, str]]:
    dims = [(v.shape[-1], f"`{k}`") for k, v in case.items() if isinstance(v, torch.Tensor)
            and v.is_floating_point() and v.ndim >= 1 and v.shape[-1] > 1]
    if e.ndim and e.shape[-1] > 1:
        dims.append((e.shape[-1], tr("the output")))
    return dims


def _scale(g: torch.Tensor, e: torch.Tensor, case: Case, atol: float, rtol: float) -> Found:
    finite = torch.isfinite(g) & torch.isfinite(e)
    ge, ee = g[finite], e[finite]
    norm = float((ee * ee).sum())
    if norm < 1e-12 or ge.numel() < 2:
        return {}
    c = float((ge * ee).sum()) / norm
    if abs(c) < 1e-3:
        return {}  # an output of zeros is no scale: the region detectors say where it is 0
    if abs(c - 1) < 1e-3 or not _close(ge, c * ee, atol, max(rtol, 1e-4)).all() or not finite.all():
        return {}
    if abs(c + 1) < 1e-3:
        return {"scale:-1": tr("your output is the reference's with the opposite sign: a minus sign too many, or a "
                               "difference taken the wrong way round")}
    factors = [(2.0, "2", "2"), (0.5, "1/2", "1/2")]
    for n, whose in _dims(case, e):  # every name that fits: √4 is also 2; the names common to all cases win
        factors += [(math.sqrt(n), f"sqrt {whose}", tr("√{n} (√ of the last dimension of {whose})", n=n, whose=whose)),
                    (1 / math.sqrt(n), f"1/sqrt {whose}",
                     tr("1/√{n} (1/√ of the last dimension of {whose})", n=n, whose=whose)),
                    (float(n), f"n {whose}", tr("{n} (the last dimension of {whose})", n=n, whose=whose)),
                    (1 / n, f"1/n {whose}", tr("1/{n} (1/the last dimension of {whose})", n=n, whose=whose))]
    found = {"scale:" + key: tr("your output is the reference's times {factor}: a scale is missing, inverted or "
                                "applied twice", factor=text)
             for value, key, text in factors if abs(c - value) <= 1e-3 * abs(value)}
    found[f"scale:{c:.3g}"] = tr("your output is the reference's times {c:.3g}: a constant factor is wrong", c=c)
    return found


def _shift(g: torch.Tensor, e: torch.Tensor, atol: float, rtol: float) -> Found:
    for dim in range(g.ndim):
        n = g.shape[dim]
        if n < 3:
            continue
        ahead = _close(g.narrow(dim, 1, n - 1), e.narrow(dim, 0, n - 1), atol, rtol).all()
        behind = _close(g.narrow(dim, 0, n - 1), e.narrow(dim, 1, n - 1), atol, rtol).all()
        if ahead or behind:
            where = _dim_name(dim, g.ndim)
            text = (tr("your output is the reference's shifted by one position along {where}: your entry i is the "
                       "reference's entry i - 1 (an off-by-one in a position or an index)", where=where) if ahead else
                    tr("your output is the reference's shifted by one position along {where}: your entry i is the "
                       "reference's entry i + 1 (an off-by-one in a position or an index)", where=where))
            return {f"shift:{dim - g.ndim}:{ahead}": text}
    return {}


def _dim_name(dim: int, ndim: int) -> str:
    negative = dim - ndim
    if negative == -1:
        return tr("the last dimension")
    if negative == -2:
        return tr("the rows (dimension -2)")
    return tr("dimension {dim}", dim=negative)


def _permutation(g: torch.Tensor, e: torch.Tensor, atol: float, rtol: float) -> Found:
    """Slices along one dim (or blocks of the last dim) in another order than the reference's."""
    for dim in range(g.ndim):
        for blocks in ([g.shape[dim]] if dim != g.ndim - 1 else []) + (
                [b for b in range(2, 9) if g.shape[-1] % b == 0 and g.shape[-1] > b] if dim == g.ndim - 1 else []):
            if blocks < 2:
                continue
            gs, es = g.tensor_split(blocks, dim), e.tensor_split(blocks, dim)
            match = [next((j for j, eb in enumerate(es) if _close(gb, eb, atol, rtol).all()), None) for gb in gs]
            if None in match or sorted(match) != list(range(blocks)) or match == list(range(blocks)):
                continue
            if dim == g.ndim - 1:
                return {f"perm:last:{blocks}": tr("your output holds the reference's {n} blocks of the last "
                                                  "dimension in another order ({order}): the heads (or blocks) are "
                                                  "split or merged in the wrong order", n=blocks, order=match)}
            return {f"perm:{dim - g.ndim}": tr("your output holds the reference's slices along {where} in another "
                                               "order ({order}): dimensions mixed up by a reshape or a permute",
                                               where=_dim_name(dim, g.ndim), order=match)}
    return {}


def _wrong_sum_dim(g: torch.Tensor, e: torch.Tensor) -> Found:
    if g.ndim < 2 or (e < 0).any() or not torch.allclose(e.sum(-1), torch.ones(()).double(), atol=1e-4):
        return {}
    if torch.allclose(g.sum(-1), torch.ones(()).double(), atol=1e-4):
        return {}
    for dim in range(g.ndim - 1):
        if g.shape[dim] > 1 and torch.allclose(g.sum(dim), torch.ones(()).double(), atol=1e-4):
            return {"sum_dim": tr("your weights sum to 1 over {where}, not over the keys (the last dimension): take "
                                  "the softmax with `dim=-1`", where=_dim_name(dim, g.ndim))}
    return {}


def _regions(g: torch.Tensor, e: torch.Tensor, bad: torch.Tensor, case: Case) -> Found:
    """Every named region that holds all the differences, smallest first."""
    shape, last = g.shape, g.shape[-1]
    cols = torch.arange(last)
    named: list[tuple[str, str, torch.Tensor]] = []
    for mask in _masks(case):
        try:
            named.append(("masked", tr("at masked positions (where the mask is False)"),
                          torch.broadcast_to(~mask, shape)))
        except RuntimeError:
            pass
        if mask.ndim >= 2:
            for key, text, rows in (("full_rows", tr("in the fully masked rows"), ~mask.any(-1)),
                                    ("some_rows", tr("in the rows that have masked keys"), ~mask.all(-1))):
                spread = _rows_of(rows, shape)
                if spread is not None:
                    named.append((key, text, spread))
    if g.ndim >= 2 and shape[-2] > 1:
        rows = torch.arange(shape[-2]).unsqueeze(-1)
        named += [("diag", tr("on the diagonal"), torch.broadcast_to(rows == cols, shape)),
                  ("first_row", tr("in the first row"), torch.broadcast_to(rows == 0, shape)),
                  ("last_row", tr("in the last row"), torch.broadcast_to(rows == shape[-2] - 1, shape))]
    if last >= 4:
        for key, text, columns in (
                ("odd", tr("in the odd columns (1, 3, 5, …) of the last dimension"), cols % 2 == 1),
                ("even", tr("in the even columns (0, 2, 4, …) of the last dimension"), cols % 2 == 0),
                ("last_pair", tr("in the last pair of the last dimension"), cols >= last - 2),
                ("second_half", tr("in the second half of the last dimension"), cols >= last // 2),
                ("first_half", tr("in the first half of the last dimension"), cols < last // 2)):
            named.append((key, text, torch.broadcast_to(columns, shape)))
    fits = [(int(region.sum()), key, text) for key, text, region in named
            if region.any() and not region.all() and not (bad & ~region).any()]
    zeros = bool(((g == 0) & (e != 0))[bad].all())
    found: Found = {}
    for _, key, text in sorted(fits, key=lambda item: item[0]):
        found[f"region:{key}:{zeros}"] = (
            tr("your output differs from the reference's only {where}, where it is 0 and the reference's is not",
               where=text) if zeros else tr("your output differs from the reference's only {where}", where=text))
    if zeros and not found:
        found["zeros"] = tr("your output is 0 wherever it differs from the reference's (which is not 0 there): "
                            "something zeroes entries that should be kept")
    return found
