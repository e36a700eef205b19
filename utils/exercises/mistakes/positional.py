"""Plausible wrong answers to the exercises of chapter 4, "Positional encoding".

Each function is the ``fn`` of a :class:`~utils.exercises.definition.Mistake` declared, with its
diagnosis, in :mod:`utils.exercises.positional`. Shape letters: N batch, L sequence length, E model
dimension (``d_model``). :func:`rotation_blocks` and :func:`right_block` also build that module's reference for
``ch4.relative_shift_matrix``: the wrong answers are the same construction with one thing changed.
"""

from __future__ import annotations

import math

import torch

from utils.positional import sinusoidal_encoding as _sinusoidal_table

BASE = 10000.0
F64 = torch.float64


# --------------------------------------------------------------------------------------------------
# ch4.sinusoidal_encoding
# --------------------------------------------------------------------------------------------------


def _table(length: int, d_model: int, exponent, even_fn=torch.sin, odd_fn=torch.cos) -> torch.Tensor:
    """A (L, E) table whose column j uses ``p / base^(exponent(j) / E)``; even columns ``even_fn``."""
    position = torch.arange(length, dtype=F64)[:, None]  # (L, 1)
    column = torch.arange(d_model, dtype=F64)  # (E,)
    angle = position / BASE ** (exponent(column) / d_model)  # (L, E)
    pe = torch.where(column % 2 == 0, even_fn(angle), odd_fn(angle))  # (L, E)
    return pe.float()


def _recipe(length: int, d_model: int, *, base: float = BASE, exponent=lambda two_i, E: two_i / E,
            start: int = 0, unit: float = 1.0) -> torch.Tensor:
    """The interleaved recipe with one ingredient changed: the angle is ``(p + start) * unit / base^exponent``."""
    position = (torch.arange(length, dtype=F64)[:, None] + start) * unit  # (L, 1)
    two_i = torch.arange(0, d_model, 2, dtype=F64)  # (ceil(E/2),)
    angle = position / base ** exponent(two_i, d_model)  # (L, ceil(E/2))
    pe = torch.zeros(length, d_model, dtype=F64)
    pe[:, 0::2] = angle.sin()
    pe[:, 1::2] = angle[:, : d_model // 2].cos()
    return pe.float()


def _sin_cos_swapped(length: int, d_model: int) -> torch.Tensor:
    return _table(length, d_model, lambda j: 2 * (j // 2), even_fn=torch.cos, odd_fn=torch.sin)


def _exponent_pair_index(length: int, d_model: int) -> torch.Tensor:
    # i instead of 2i: the frequencies fall only half as fast
    return _table(length, d_model, lambda j: j // 2)


def _exponent_column_index(length: int, d_model: int) -> torch.Tensor:
    # the column index j instead of 2i: each cosine gets a slightly different frequency from its sine
    return _table(length, d_model, lambda j: j)


def _exponent_doubled(length: int, d_model: int) -> torch.Tensor:
    return _recipe(length, d_model, exponent=lambda two_i, E: 2 * two_i / E)  # 2 * arange(0, E, 2)


def _exponent_positive(length: int, d_model: int) -> torch.Tensor:
    return _recipe(length, d_model, exponent=lambda two_i, E: -two_i / E)  # p * 10000^(2i/E)


def _exponent_e_minus_1(length: int, d_model: int) -> torch.Tensor:
    return _recipe(length, d_model, exponent=lambda two_i, E: two_i / max(E - 1, 1))


def _one_frequency(length: int, d_model: int) -> torch.Tensor:
    return _recipe(length, d_model, exponent=lambda two_i, E: two_i * 0)  # e.g. -(two_i // E): always 0


def _base_1000(length: int, d_model: int) -> torch.Tensor:
    return _recipe(length, d_model, base=1000.0)


def _starts_at_one(length: int, d_model: int) -> torch.Tensor:
    return _recipe(length, d_model, start=1)


def _degrees(length: int, d_model: int) -> torch.Tensor:
    return _recipe(length, d_model, unit=math.pi / 180)


def _halves(length: int, d_model: int) -> torch.Tensor:
    # [sin ..., cos ...]: the layout of some codebases, not the interleaved table of the paper
    angle = torch.arange(length, dtype=F64)[:, None] / BASE ** (torch.arange(0, d_model, 2, dtype=F64) / d_model)
    return torch.cat([angle.sin(), angle[:, : d_model // 2].cos()], dim=-1).float()  # (L, E)


def _odd_crash(length: int, d_model: int) -> torch.Tensor:
    # the common recipe: fine for even E, a shape error for odd E (ceil(E/2) cosines for floor(E/2) columns)
    position = torch.arange(length, dtype=torch.float32)[:, None]  # (L, 1)
    angle = position * BASE ** (-torch.arange(0, d_model, 2) / d_model)  # (L, ceil(E/2))
    pe = torch.zeros(length, d_model)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe


def _odd_too_few_angles(length: int, d_model: int) -> torch.Tensor:
    # angles for d_model // 2 pairs only: one sine column short for odd E, a shape error
    i = torch.arange(d_model // 2, dtype=F64)
    angle = torch.arange(length, dtype=F64)[:, None] / BASE ** (2 * i / d_model)  # (L, floor(E/2))
    pe = torch.zeros(length, d_model, dtype=F64)
    pe[:, 0::2] = angle.sin()
    pe[:, 1::2] = angle.cos()
    return pe.float()


def _odd_last_zero(length: int, d_model: int) -> torch.Tensor:
    # d_model // 2 full pairs, and the last (sine) column of an odd table left at 0
    half = d_model // 2
    angle = torch.arange(length, dtype=F64)[:, None] / BASE ** (2 * torch.arange(half, dtype=F64) / d_model)
    pe = torch.zeros(length, d_model, dtype=F64)
    pe[:, 0 : 2 * half : 2] = angle.sin()
    pe[:, 1 : 2 * half : 2] = angle.cos()
    return pe.float()


def _odd_padded(length: int, d_model: int) -> torch.Tensor:
    # rounds E up to an even number and forgets to drop the extra column
    padded = d_model + d_model % 2
    return _sinusoidal_table(length, padded, dtype=torch.float32)


def _odd_padded_drop_first(length: int, d_model: int) -> torch.Tensor:
    # rounds E up, then drops the first column: every column moves one place, and the last is a cosine
    table = _sinusoidal_table(length, d_model + d_model % 2, dtype=torch.float32)
    return table[:, 1:] if d_model % 2 else table


def _odd_padded_frequencies(length: int, d_model: int) -> torch.Tensor:
    # rounds E up, builds that table (its frequencies divide by d_model + 1), then drops the extra cosine
    return _sinusoidal_table(length, d_model + d_model % 2, dtype=torch.float32)[:, :d_model]


def _float64_table(length: int, d_model: int) -> torch.Tensor:
    return _sinusoidal_table(length, d_model, dtype=F64)  # the .float() forgotten


def _batch_axis_added(length: int, d_model: int) -> torch.Tensor:
    return _sinusoidal_table(length, d_model, dtype=torch.float32)[None]  # (1, L, E), as for register_buffer


def _transposed_table(length: int, d_model: int) -> torch.Tensor:
    return _sinusoidal_table(length, d_model, dtype=torch.float32).T  # (E, L)


# --------------------------------------------------------------------------------------------------
# ch4.add_positional_encoding
# --------------------------------------------------------------------------------------------------


def _batch_axis(x: torch.Tensor, pe: torch.Tensor) -> torch.Tensor:
    return x + pe[: x.size(0)]  # indexes the table with N: (N, L, E) + (N, E)


def _sequence_first(x: torch.Tensor, pe: torch.Tensor) -> torch.Tensor:
    return x + pe.unsqueeze(1)[: x.size(0)]  # a (max_len, 1, E) table sliced with N: sample n gets PE(n)


def _unsqueeze_middle(x: torch.Tensor, pe: torch.Tensor) -> torch.Tensor:
    return x + pe[: x.size(1)].unsqueeze(1)  # (N, L, E) + (L, 1, E)


def _feature_size(x: torch.Tensor, pe: torch.Tensor) -> torch.Tensor:
    return x + pe[: x.size(-1)]  # slices the rows with E: right only when E == L, or the whole table


def _whole_table(x: torch.Tensor, pe: torch.Tensor) -> torch.Tensor:
    return x + pe  # (N, L, E) + (max_len, E)


def _feature_axis(x: torch.Tensor, pe: torch.Tensor) -> torch.Tensor:
    # a recipe written for a (1, max_len, E) table, used on a (max_len, E) one: slices E instead of L
    return x + pe[:, : x.size(1)]


def _off_by_one(x: torch.Tensor, pe: torch.Tensor) -> torch.Tensor:
    return x + pe[1 : x.size(1) + 1]


def _last_rows(x: torch.Tensor, pe: torch.Tensor) -> torch.Tensor:
    return x + pe[-x.size(1) :]


def _ignores_pe(x: torch.Tensor, pe: torch.Tensor) -> torch.Tensor:
    del pe  # recomputes the sinusoidal table instead of adding the one it was given
    return x + _sinusoidal_table(x.size(1), x.size(2), dtype=x.dtype)


def _multiplied(x: torch.Tensor, pe: torch.Tensor) -> torch.Tensor:
    return x * pe[: x.size(1)]


def _scaled(x: torch.Tensor, pe: torch.Tensor) -> torch.Tensor:
    return x * math.sqrt(x.size(-1)) + pe[: x.size(1)]


def _concatenated(x: torch.Tensor, pe: torch.Tensor) -> torch.Tensor:
    return torch.cat([x, pe[: x.size(1)].expand(x.size(0), -1, -1)], dim=-1)  # (N, L, 2E)


def _forgot_x(x: torch.Tensor, pe: torch.Tensor) -> torch.Tensor:
    return pe[: x.size(1)].expand_as(x).clone()


def _cast_to_float32(x: torch.Tensor, pe: torch.Tensor) -> torch.Tensor:
    return (x + pe[: x.size(1)]).float()


def _cast_to_table_dtype(x: torch.Tensor, pe: torch.Tensor) -> torch.Tensor:
    return (x + pe[: x.size(1)]).to(pe.dtype)  # the sum takes the table's dtype, not x's


# --------------------------------------------------------------------------------------------------
# ch4.relative_shift_matrix
# --------------------------------------------------------------------------------------------------


def _frequencies(d_model: int, exponent=lambda two_i, E: two_i / E) -> torch.Tensor:
    two_i = torch.arange(0, d_model, 2, dtype=F64)  # (E/2,)
    return BASE ** (-exponent(two_i, d_model))  # (E/2,) w_i


def rotation_blocks(k: int, d_model: int, block, exponent=lambda two_i, E: two_i / E) -> torch.Tensor:
    """Block-diagonal (E, E) with ``block(c, s)`` (a 2 x 2 nested list) for each pair, c = cos(k w_i), s = sin(k w_i).

    The reference, :func:`utils.exercises.positional.relative_shift_matrix_reference`, is
    ``rotation_blocks(k, d_model, right_block)``; most wrong answers change the block or the exponent."""
    angle = k * _frequencies(d_model, exponent)  # (E/2,)
    blocks = [torch.tensor(block(math.cos(a), math.sin(a)), dtype=F64) for a in angle.tolist()]
    return torch.block_diag(*blocks).float()  # (E, E)


def right_block(c: float, s: float) -> list[list[float]]:
    return [[c, s], [-s, c]]


def _absolute_k(k: int, d_model: int) -> torch.Tensor:
    return rotation_blocks(abs(k), d_model, right_block)


def _transposed(k: int, d_model: int) -> torch.Tensor:
    return rotation_blocks(k, d_model, lambda c, s: [[c, -s], [s, c]])


def _missing_minus(k: int, d_model: int) -> torch.Tensor:
    return rotation_blocks(k, d_model, lambda c, s: [[c, s], [s, c]])


def _block_sin_cos_swapped(k: int, d_model: int) -> torch.Tensor:
    return rotation_blocks(k, d_model, lambda c, s: [[s, c], [-c, s]])


def _no_frequency(k: int, d_model: int) -> torch.Tensor:
    # rotates every pair by k radians instead of k * w_i
    return torch.block_diag(*[torch.tensor(right_block(math.cos(k), math.sin(k))) for _ in range(d_model // 2)]).float()


def _cosines_only(k: int, d_model: int) -> torch.Tensor:  # the diagonal of each block, no sines beside it
    return rotation_blocks(k, d_model, lambda c, s: [[c, 0.0], [0.0, c]])


def _shift_exponent_pair_index(k: int, d_model: int) -> torch.Tensor:
    return rotation_blocks(k, d_model, right_block, exponent=lambda two_i, E: two_i / 2 / E)


def _shift_exponent_doubled(k: int, d_model: int) -> torch.Tensor:
    return rotation_blocks(k, d_model, right_block, exponent=lambda two_i, E: 2 * two_i / E)


def _shift_exponent_positive(k: int, d_model: int) -> torch.Tensor:
    return rotation_blocks(k, d_model, right_block, exponent=lambda two_i, E: -two_i / E)  # k * 10000^(2i/E)


def _halves_layout(k: int, d_model: int) -> torch.Tensor:
    # [[diag(c), diag(s)], [-diag(s), diag(c)]]: right for a [sin ..., cos ...] table, not the interleaved one
    angle = k * _frequencies(d_model)
    c, s = torch.diag(angle.cos()), torch.diag(angle.sin())
    return torch.cat([torch.cat([c, s], 1), torch.cat([-s, c], 1)], 0).float()


def _block_at_pair_index(k: int, d_model: int) -> torch.Tensor:
    # block i written at rows/columns (i, i + 1) instead of (2i, 2i + 1): the blocks overlap
    angle = k * _frequencies(d_model)
    M = torch.zeros(d_model, d_model, dtype=F64)
    for i, a in enumerate(angle.tolist()):
        c, s = math.cos(a), math.sin(a)
        M[i, i], M[i, i + 1], M[i + 1, i], M[i + 1, i + 1] = c, s, -s, c
    return M.float()


def _last_block_missing(k: int, d_model: int) -> torch.Tensor:
    full = rotation_blocks(k, d_model, right_block)
    full[-2:, -2:] = 0  # range(d_model // 2 - 1): one block short
    return full


def _block_diag_of_list(k: int, d_model: int) -> torch.Tensor:
    blocks = [torch.tensor(right_block(math.cos(a), math.sin(a))) for a in (k * _frequencies(d_model)).tolist()]
    return torch.block_diag(blocks)  # a list, not unpacked: raises TypeError


def _stacked_blocks(k: int, d_model: int) -> torch.Tensor:
    angle = k * _frequencies(d_model)
    c, s = angle.cos(), angle.sin()
    return torch.stack([torch.stack([c, s], -1), torch.stack([-s, c], -1)], -2).float()  # (E/2, 2, 2)


def _shift_float64(k: int, d_model: int) -> torch.Tensor:
    return rotation_blocks(k, d_model, right_block).double()
