"""Exercises of chapter 4, "Positional encoding". See :mod:`utils.exercises.definition`.

Shape letters: N batch, L sequence length, E model dimension (``d_model``).

* ``ch4.sinusoidal_encoding(length, d_model) -> (L, E)``: the fixed sin/cos table.
* ``ch4.add_positional_encoding(x, pe) -> (N, L, E)``: add ``pe[:L]`` to a batch-first ``x``.
* ``ch4.relative_shift_matrix(k, d_model) -> (E, E)``: the matrix ``M`` with ``M @ PE(p) == PE(p + k)``
  for every position ``p`` (``PE(p)`` is the 1-D row ``pe[p]`` of the table, read as a column vector;
  for the whole table, ``pe[k:] == pe[:-k] @ M.T``).
"""

from __future__ import annotations

import math
import random

import torch

from utils.exercises.common import Case
from utils.exercises.definition import Exercise, Mistake
from utils.positional import sinusoidal_encoding as _sinusoidal_table

__all__ = [
    "ADD",
    "EXERCISES",
    "SHIFT",
    "SINUSOIDAL",
    "add_positional_encoding_reference",
    "relative_shift_matrix_reference",
    "sinusoidal_encoding_reference",
]

BASE = 10000.0


# --------------------------------------------------------------------------------------------------
# ch4.sinusoidal_encoding
# --------------------------------------------------------------------------------------------------


def sinusoidal_encoding_reference(length: int, d_model: int) -> torch.Tensor:
    """PE[p, 2i] = sin(p / 10000^(2i/E)), PE[p, 2i+1] = cos(p / 10000^(2i/E)). Returns (L, E) float32."""
    return _sinusoidal_table(length, d_model, dtype=torch.float32)


def _table(length: int, d_model: int, exponent, even_fn=torch.sin, odd_fn=torch.cos) -> torch.Tensor:
    """A (L, E) table whose column j uses ``p / base^(exponent(j) / E)``; even columns ``even_fn``."""
    position = torch.arange(length, dtype=torch.float64)[:, None]  # (L, 1)
    column = torch.arange(d_model, dtype=torch.float64)  # (E,)
    angle = position / BASE ** (exponent(column) / d_model)  # (L, E)
    pe = torch.where(column % 2 == 0, even_fn(angle), odd_fn(angle))  # (L, E)
    return pe.float()


def _sin_cos_swapped(length: int, d_model: int) -> torch.Tensor:
    return _table(length, d_model, lambda j: 2 * (j // 2), even_fn=torch.cos, odd_fn=torch.sin)


def _exponent_pair_index(length: int, d_model: int) -> torch.Tensor:
    # i instead of 2i: the frequencies fall only half as fast
    return _table(length, d_model, lambda j: j // 2)


def _exponent_column_index(length: int, d_model: int) -> torch.Tensor:
    # the column index j instead of 2i: each cosine gets a slightly different frequency from its sine
    return _table(length, d_model, lambda j: j)


def _odd_crash(length: int, d_model: int) -> torch.Tensor:
    # the common recipe: fine for even E, a shape error for odd E (ceil(E/2) cosines for floor(E/2) columns)
    position = torch.arange(length, dtype=torch.float32)[:, None]  # (L, 1)
    angle = position * BASE ** (-torch.arange(0, d_model, 2) / d_model)  # (L, ceil(E/2))
    pe = torch.zeros(length, d_model)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe


def _odd_padded(length: int, d_model: int) -> torch.Tensor:
    # rounds E up to an even number and forgets to drop the extra column
    padded = d_model + d_model % 2
    return _sinusoidal_table(length, padded, dtype=torch.float32)


def _sinusoidal_cases(rng: random.Random, gen: torch.Generator) -> list[Case]:
    del gen  # the inputs are two ints
    cases = [
        {"length": 1, "d_model": 2 * rng.randint(1, 4)},  # a single position: all sines 0, all cosines 1
        {"length": rng.randint(5, 20), "d_model": 2 * rng.randint(2, 8)},
        {"length": rng.randint(20, 64), "d_model": 2 * rng.randint(8, 32)},
        {"length": rng.randint(3, 16), "d_model": 2 * rng.randint(1, 6) + 1},  # odd E
        {"length": rng.randint(2, 10), "d_model": 2 * rng.randint(1, 3)},
    ]
    return cases


SINUSOIDAL = Exercise(
    id="ch4.sinusoidal_encoding",
    reference=sinusoidal_encoding_reference,
    make_cases=_sinusoidal_cases,
    points=2,
    mistakes=[
        Mistake(
            "sin_cos_swapped", _sin_cos_swapped,
            "Sin and cos are swapped: even columns (0, 2, 4, ...) take the sine and odd columns the cosine, "
            "so row 0 should read 0, 1, 0, 1, ...",
        ),
        Mistake(
            "exponent_pair_index", _exponent_pair_index,
            "The exponent is off by a factor 2: the pair (2i, 2i+1) uses 10000^(2i / d_model), and you "
            "used the pair index i instead of 2i",
        ),
        Mistake(
            "exponent_column_index", _exponent_column_index,
            "The cosine column 2i+1 must share the frequency of its sine column 2i: use 10000^(2i / d_model) "
            "for both, not the column index (2i+1) for the cosine",
        ),
        Mistake(
            "odd_crash", _odd_crash,
            "With an odd d_model there is one more sine column than cosine columns: assign "
            "cos(angle[:, :d_model // 2]) to pe[:, 1::2]",
        ),
        Mistake(
            "odd_padded", _odd_padded,
            "With an odd d_model your table has one column too many: return exactly (length, d_model), "
            "whose last column is a sine",
        ),
    ],
    forbidden=("utils", "utils.positional.sinusoidal_encoding", "utils.positional.PositionalEncoding"),
    atol=1e-4,
    rtol=1e-4,
    hint="compute the angle p / 10000^(2i / d_model) once for each pair, then fill columns 0::2 and 1::2.",
)


# --------------------------------------------------------------------------------------------------
# ch4.add_positional_encoding
# --------------------------------------------------------------------------------------------------


def add_positional_encoding_reference(x: torch.Tensor, pe: torch.Tensor) -> torch.Tensor:
    """x (N, L, E) + pe[:L] (L, E), broadcast over N. Returns (N, L, E)."""
    L = x.size(1)
    return x + pe[:L]  # (N, L, E) + (L, E)


def _batch_axis(x: torch.Tensor, pe: torch.Tensor) -> torch.Tensor:
    return x + pe[: x.size(0)]  # indexes the table with N: (N, L, E) + (N, E)


def _whole_table(x: torch.Tensor, pe: torch.Tensor) -> torch.Tensor:
    return x + pe  # (N, L, E) + (max_len, E)


def _feature_axis(x: torch.Tensor, pe: torch.Tensor) -> torch.Tensor:
    # a recipe written for a (1, max_len, E) table, used on a (max_len, E) one: slices E instead of L
    return x + pe[:, : x.size(1)]


def _add_cases(rng: random.Random, gen: torch.Generator) -> list[Case]:
    shapes = [
        (1, rng.randint(3, 9), 2 * rng.randint(2, 6)),  # batch 1: the batch-axis bug adds PE(0) everywhere
        (4, 4, 2 * rng.randint(2, 6)),  # N == L: pe[:N] is pe[:L], so the batch-axis bug passes here (only)
        (rng.randint(2, 5), 1, 2 * rng.randint(1, 4)),  # length 1
        (rng.randint(2, 4), rng.randint(5, 12), 2 * rng.randint(1, 5) + 1),  # odd E
        (rng.randint(2, 3), rng.randint(10, 20), 16),
    ]
    cases = []
    for N, L, E in shapes:
        max_len = L + rng.randint(0, 12)
        cases.append({
            "x": torch.randn(N, L, E, generator=gen),
            "pe": _sinusoidal_table(max_len, E, dtype=torch.float32),
        })
    return cases


ADD = Exercise(
    id="ch4.add_positional_encoding",
    reference=add_positional_encoding_reference,
    make_cases=_add_cases,
    points=1,
    mistakes=[
        Mistake(
            "batch_axis", _batch_axis,
            "You sliced the table with x.size(0), which is the batch size N in a batch-first (N, L, E) "
            "tensor: use the length L = x.size(1), i.e. pe[:x.size(1)]",
        ),
        Mistake(
            "whole_table", _whole_table,
            "You added the whole (max_len, E) table: keep only the first L rows, pe[:x.size(1)]",
        ),
        Mistake(
            "feature_axis", _feature_axis,
            "Your pe[:, :L] slices the feature axis of a (max_len, E) table (that recipe is for a "
            "(1, max_len, E) table): slice the rows, pe[:L]",
        ),
    ],
    forbidden=("utils", "utils.positional.PositionalEncoding", "utils.positional.sinusoidal_encoding"),
    hint="x is (N, L, E) and pe is (max_len, E); (L, E) broadcasts over N.",
)


# --------------------------------------------------------------------------------------------------
# ch4.relative_shift_matrix
# --------------------------------------------------------------------------------------------------


def _blocks(k: int, d_model: int, block) -> torch.Tensor:
    """Block-diagonal (E, E) with ``block(c, s)`` (a 2 x 2 tensor) for each pair, c = cos(k w_i), s = sin(k w_i)."""
    freq = BASE ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (E/2,)
    angle = k * freq  # (E/2,)
    return torch.block_diag(*[block(math.cos(a), math.sin(a)) for a in angle.tolist()]).float()  # (E, E)


def relative_shift_matrix_reference(k: int, d_model: int) -> torch.Tensor:
    """The (E, E) matrix M with M @ PE(p) == PE(p + k) for every p; E even. Block i is
    [[cos(k w_i), sin(k w_i)], [-sin(k w_i), cos(k w_i)]] acting on (sin(p w_i), cos(p w_i))."""
    return _blocks(k, d_model, lambda c, s: torch.tensor([[c, s], [-s, c]], dtype=torch.float64))


def _transposed(k: int, d_model: int) -> torch.Tensor:
    return _blocks(k, d_model, lambda c, s: torch.tensor([[c, -s], [s, c]], dtype=torch.float64))


def _missing_minus(k: int, d_model: int) -> torch.Tensor:
    return _blocks(k, d_model, lambda c, s: torch.tensor([[c, s], [s, c]], dtype=torch.float64))


def _no_frequency(k: int, d_model: int) -> torch.Tensor:
    # rotates every pair by k radians instead of k * w_i
    return torch.block_diag(*[torch.tensor([[math.cos(k), math.sin(k)], [-math.sin(k), math.cos(k)]])
                              for _ in range(d_model // 2)]).float()


def _shift_cases(rng: random.Random, gen: torch.Generator) -> list[Case]:
    del gen
    return [
        {"k": rng.randint(1, 5), "d_model": 2},  # one pair
        {"k": rng.randint(1, 20), "d_model": 2 * rng.randint(2, 8)},
        {"k": 0, "d_model": 2 * rng.randint(1, 4)},  # no shift: the identity
        {"k": -rng.randint(1, 10), "d_model": 2 * rng.randint(2, 6)},  # a shift to the left
        {"k": rng.randint(20, 60), "d_model": 2 * rng.randint(8, 16)},
    ]


SHIFT = Exercise(
    id="ch4.relative_shift_matrix",
    reference=relative_shift_matrix_reference,
    make_cases=_shift_cases,
    points=3,
    mistakes=[
        Mistake(
            "transposed", _transposed,
            "Your matrix shifts by -k: each pair is (sin, cos), not (cos, sin), so the block is "
            "[[cos, sin], [-sin, cos]] (the transpose of the textbook rotation)",
        ),
        Mistake(
            "missing_minus", _missing_minus,
            "A sign is wrong: cos(a + b) = cos a cos b - sin a sin b, so the second row of each block is "
            "[-sin(k w_i), cos(k w_i)]",
        ),
        Mistake(
            "no_frequency", _no_frequency,
            "Every pair turns by its own angle k * w_i with w_i = 10000^(-2i / d_model), not by k radians",
        ),
    ],
    forbidden=("utils", "utils.exercises.positional.relative_shift_matrix_reference"),
    atol=1e-5,
    rtol=1e-4,
    hint="expand sin((p + k) w) and cos((p + k) w) with the angle-addition formulas; put one 2 x 2 block "
         "per pair on the diagonal (torch.block_diag).",
)


EXERCISES: tuple[Exercise, ...] = (SINUSOIDAL, SHIFT, ADD)  # notebook order
