"""Wrong answers to chapter 4, batch 3, heldout3 half: written blind, from the notebook only."""

import math

import torch
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def sinusoidal_encoding__exponent_i_over_e(length, d_model):
    position = torch.arange(length, dtype=torch.float64)[:, None]
    i = torch.arange((d_model + 1) // 2, dtype=torch.float64)
    angle = position * 10000.0 ** (-i / d_model)
    pe = torch.zeros(length, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return pe.float()


def sinusoidal_encoding__positions_from_one(length, d_model):
    position = torch.arange(1, length + 1, dtype=torch.float64)[:, None]
    angle = position * 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(length, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return pe.float()


def sinusoidal_encoding__odd_last_column_zero(length, d_model):
    pairs = d_model // 2
    position = torch.arange(length, dtype=torch.float64)[:, None]
    angle = position * 10000.0 ** (-torch.arange(0, 2 * pairs, 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(length, d_model)
    pe[:, 0 : 2 * pairs : 2] = torch.sin(angle).float()
    pe[:, 1 : 2 * pairs : 2] = torch.cos(angle).float()
    return pe


def relative_shift_matrix__omega_i_over_e(k, d_model):
    blocks = []
    for i in range(d_model // 2):
        omega = 10000.0 ** (-i / d_model)
        c, s = math.cos(k * omega), math.sin(k * omega)
        blocks.append(torch.tensor([[c, s], [-s, c]]))
    return torch.block_diag(*blocks)


def relative_shift_matrix__absolute_shift(k, d_model):
    k = abs(k)  # a shift is a distance
    blocks = []
    for i in range(d_model // 2):
        omega = 10000.0 ** (-2 * i / d_model)
        c, s = math.cos(k * omega), math.sin(k * omega)
        blocks.append(torch.tensor([[c, s], [-s, c]]))
    return torch.block_diag(*blocks)


def relative_shift_matrix__halves_layout(k, d_model):
    half = d_model // 2
    omega = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    c, s = torch.cos(k * omega), torch.sin(k * omega)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    m[:half, :half] = torch.diag(c)
    m[:half, half:] = torch.diag(s)
    m[half:, :half] = -torch.diag(s)
    m[half:, half:] = torch.diag(c)
    return m.float()


def add_positional_encoding__adds_in_place(x, pe):
    x += pe[: x.size(1)]
    return x


def add_positional_encoding__whole_table(x, pe):
    return x + pe


def add_positional_encoding__rows_from_one(x, pe):
    length = x.size(1)
    return x + pe[1 : length + 1]


def add_positional_encoding__sequence_first_unsqueeze(x, pe):
    return x + pe[: x.size(1)].unsqueeze(1)


ANSWERS = [
    {
        "exercise": "ch4.sinusoidal_encoding",
        "fn": sinusoidal_encoding__exponent_i_over_e,
        "mistake": "uses 10000^(-i/E) with the pair index i instead of 10000^(-2i/E)",
        "part": "the frequency formula",
    },
    {
        "exercise": "ch4.sinusoidal_encoding",
        "fn": sinusoidal_encoding__positions_from_one,
        "mistake": "numbers the positions 1..L instead of 0..L-1",
        "part": "the positions",
    },
    {
        "exercise": "ch4.sinusoidal_encoding",
        "fn": sinusoidal_encoding__odd_last_column_zero,
        "mistake": "fills only d_model // 2 pairs, so an odd d_model leaves the last (sine) column at zero",
        "part": "the last column for an odd d_model",
    },
    {
        "exercise": "ch4.relative_shift_matrix",
        "fn": relative_shift_matrix__omega_i_over_e,
        "mistake": "uses omega_i = 10000^(-i/E) with the pair index i instead of 10000^(-2i/E)",
        "part": "the frequencies",
    },
    {
        "exercise": "ch4.relative_shift_matrix",
        "fn": relative_shift_matrix__absolute_shift,
        "mistake": "takes abs(k), so a shift back gives the matrix of the shift forward",
        "part": "negative shifts",
    },
    {
        "exercise": "ch4.relative_shift_matrix",
        "fn": relative_shift_matrix__halves_layout,
        "mistake": "lays the blocks out for a sines-then-cosines table (cos on the half diagonals) instead of 2 x 2 "
        "blocks on the diagonal",
        "part": "the layout of the blocks",
    },
    {
        "exercise": "ch4.add_positional_encoding",
        "fn": add_positional_encoding__adds_in_place,
        "mistake": "adds the encoding with x += ..., changing the caller's x in place",
        "part": "the input x, modified in place",
    },
    {
        "exercise": "ch4.add_positional_encoding",
        "fn": add_positional_encoding__whole_table,
        "mistake": "adds the whole (max_len, E) table instead of its first L rows",
        "part": "the rows of the table",
    },
    {
        "exercise": "ch4.add_positional_encoding",
        "fn": add_positional_encoding__rows_from_one,
        "mistake": "adds rows 1..L of the table instead of rows 0..L-1",
        "part": "the rows of the table",
    },
    {
        "exercise": "ch4.add_positional_encoding",
        "fn": add_positional_encoding__sequence_first_unsqueeze,
        "mistake": "unsqueezes the table at dim 1 as in sequence-first code, giving (L, 1, E) against (N, L, E)",
        "part": "the broadcasting of the table",
    },
]
