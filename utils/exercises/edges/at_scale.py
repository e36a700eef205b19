"""Chapter 6's hidden edge cases and parts (masked rows, the NaN trap, float16, windows, caches), the
online-softmax exercise's public cases, and the block-gradient exercise's cases: blocks of a real
attention's weights, public and hidden."""

from __future__ import annotations

import random

import torch

from utils.exercises.common import Case
from utils.exercises.definition import Part

_NEG_INF = float("-inf")


def _has_masked_rows(case: Case) -> bool:
    return bool(torch.isinf(case["running_max"]).any() or torch.isinf(case["block"]).any())


ONLINE_PARTS = (Part("float16", "0.5", lambda case: case["block"].dtype != torch.float32),
                Part("masked rows (-inf)", "0.5", _has_masked_rows),
                Part("finite scores", 1))


def _masked_rows_case(rng: random.Random, gen: torch.Generator) -> Case:
    """Rows in all four states of a masked row: -inf so far or not, an all -inf block or not.

    Row 0 has seen only -inf and gets an all -inf block (its max stays -inf, its sum 0: the NaN trap);
    row 1 has seen only -inf and gets a partly masked block; row 2 has a history and gets an all -inf
    block (nothing changes); the others have a history and get partly masked blocks above and below it.
    """
    R, B = rng.randint(5, 7), rng.randint(3, 5)
    running_max = torch.randn(R, generator=gen) * 2
    running_sum = torch.rand(R, generator=gen) * 4 + 1.0  # >= 1: it contains exp(max - max) = 1
    block = torch.randn(R, B, generator=gen) * 2
    block[3] += 5.0  # the max rises
    running_max[:2], running_sum[:2] = _NEG_INF, 0.0
    block[0], block[2] = _NEG_INF, _NEG_INF
    block[1:, 0] = _NEG_INF  # every other row is partly masked; column 1 stays finite
    return {"running_max": running_max, "running_sum": running_sum, "block": block}


def _masked_rows_half_case(rng: random.Random, gen: torch.Generator) -> Case:
    """The same four states in float16 with (2, 3) rows. The finite scores equal their row's max, so
    every sum is a small integer and exact in float16 however it is computed."""
    B = 4
    rows = []  # (running_max, running_sum, block)
    for history, masked_block in ((False, True), (False, False), (True, True), (True, False), (True, False),
                                  (False, False)):
        top = rng.choice([-1.5, -0.25, 0.5, 1.0, 2.75])
        keep = [j for j in range(B) if rng.random() < 0.5] or [rng.randrange(B)]
        row = [top if j in keep and not masked_block else _NEG_INF for j in range(B)]
        rows.append((top if history else _NEG_INF, float(rng.randint(1, 4)) if history else 0.0, row))
    return {"running_max": torch.tensor([r[0] for r in rows], dtype=torch.float16).view(2, 3),
            "running_sum": torch.tensor([r[1] for r in rows], dtype=torch.float16).view(2, 3),
            "block": torch.tensor([r[2] for r in rows], dtype=torch.float16).view(2, 3, B)}


def online_cases(rng: random.Random, gen: torch.Generator) -> list[Case]:
    """The public cases of ``ch6.online_softmax_update``: a rising max at large scores, the NaN trap in
    float32 and float16, a falling block, the first block, one score."""
    def state(shape, scale=3.0):
        m = torch.randn(shape, generator=gen) * scale
        s = torch.rand(shape, generator=gen) * 5 + 1.0  # >= 1: it contains exp(max - max) = 1
        return m, s

    m, s = state((rng.randint(2, 5),))
    # a block whose values sit well above the running max: the max must rise and the old sum shrink; all of
    # it near 90, where exp alone overflows in float32 (exp(89) is inf) and only the shifted form is finite
    cases = [{"running_max": m + 90, "running_sum": s,
              "block": torch.randn(m.shape[0], rng.randint(2, 6), generator=gen) * 2 + 96}]
    cases.append(_masked_rows_case(rng, gen))  # the NaN trap: -inf history and an all -inf block
    m, s = state((2, 3))
    cases.append({"running_max": m, "running_sum": s, "block": torch.randn(2, 3, rng.randint(1, 4), generator=gen) - 6})
    # the first block: running max -inf, sum 0
    B = rng.randint(2, 5)
    cases.append({"running_max": torch.full((3,), _NEG_INF), "running_sum": torch.zeros(3),
                  "block": torch.randn(3, B, generator=gen)})
    cases.append(_masked_rows_half_case(rng, gen))  # float16: a -1e9 stand-in for -inf breaks here
    # one row, a block of one score
    cases.append({"running_max": torch.tensor([0.5]), "running_sum": torch.tensor([2.0]),
                  "block": torch.tensor([[3.0]])})
    return cases


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


def _block_grad_case(gen: torch.Generator, batch: tuple[int, ...], L: int, S: int, start: int, B: int, Dv: int,
                     *, masked: bool = False) -> Case:
    """One key block of a real attention: full rows of weights P (..., L, S), O = P V, and a random dO; the
    case holds dO, O, P's columns ``start:start + B`` and those keys' values. With ``masked``, a causal band
    is cut out and query row 0 sees no key at all (its P and O are zeros, as tiled attention gives)."""
    scores = torch.randn(*batch, L, S, generator=gen) * 2  # (..., L, S)
    if masked:
        keep = torch.arange(S)[None, :] <= torch.arange(L)[:, None] + (S - L)  # (L, S): causal, bottom-right
        keep[0] = False  # a query that sees nothing
        scores = scores.masked_fill(~keep, float("-inf"))
    weights = torch.nan_to_num(torch.softmax(scores, dim=-1))  # (..., L, S): the NaN row -> zeros
    value = torch.randn(*batch, S, Dv, generator=gen)  # (..., S, Dv)
    keys = slice(start, start + B)
    return {"grad_out": torch.randn(*batch, L, Dv, generator=gen), "out": weights @ value,  # (..., L, Dv)
            "weights": weights[..., keys].contiguous(), "value": value[..., keys, :].contiguous()}


def block_grad_cases(rng: random.Random, gen: torch.Generator) -> list[Case]:
    """Blocks inside a row (their weights do not sum to 1), a square block (L = B = Dv, where a wrong axis
    or a missing keepdim still broadcasts), the whole row as one block, masked rows, one score, float64."""
    B = rng.randint(3, 5)
    side = rng.randint(3, 5)
    return [
        _block_grad_case(gen, (2, rng.randint(2, 3)), B + 2, 3 * B, B, B, rng.randint(6, 8)),
        _block_grad_case(gen, (), side, 3 * side, side, side, side),
        _block_grad_case(gen, (2,), rng.randint(2, 4), B, 0, B, 4),
        _block_grad_case(gen, (1, 2), 6, 10, 4, rng.randint(3, 6), 5, masked=True),
        _block_grad_case(gen, (), 1, 1, 0, 1, 1),
        {name: t.double() for name, t in _block_grad_case(gen, (2,), 4, 6, 2, 2, 3).items()},  # float64 kept
    ]


def block_grad_edges(rng: random.Random, gen: torch.Generator) -> list[Case]:
    """The last, short block of a row that B does not divide; a single query; a block of one key in float64."""
    S = rng.randint(9, 13)
    case = _block_grad_case(gen, (3, 2), 7, S, S - S % 4 or S - 4, S % 4 or 4, 3, masked=True)
    one = _block_grad_case(gen, (2, 4), 1, 8, 2, 4, 16)
    double = {name: tensor.double() for name, tensor in _block_grad_case(gen, (2,), 5, 6, 3, 1, 2).items()}
    return [case, one, double]
