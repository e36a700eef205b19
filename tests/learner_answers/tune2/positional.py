"""Wrong learner answers to chapter 4 (positional), tune half of the second batch: see
tests/learner_answers/README.md."""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def sinusoidal_encoding__padded_to_even(length, d_model):
    even = d_model + d_model % 2  # build an even table, then drop the extra column
    position = torch.arange(length, dtype=torch.float32)[:, None]
    angle = position * 10000.0 ** (-torch.arange(0, even, 2) / even)
    pe = torch.zeros(length, even)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe[:, :d_model]


def sinusoidal_encoding__columns_first(length, d_model):
    pe = torch.zeros(d_model, length)
    for pos in range(length):
        for i in range(0, d_model, 2):
            pe[i, pos] = math.sin(pos / 10000 ** (i / d_model))
            if i + 1 < d_model:
                pe[i + 1, pos] = math.cos(pos / 10000 ** (i / d_model))
    return pe


def add_positional_encoding__skips_position_zero(x, pe):
    length = x.size(1)
    return x + pe[1 : length + 1]  # position 0 is reserved


def add_positional_encoding__concatenated(x, pe):
    n, length, _ = x.shape
    return torch.cat([x, pe[:length].expand(n, -1, -1)], dim=-1)


def relative_shift_matrix__no_frequency(k, d_model):
    c, s = math.cos(k), math.sin(k)
    block = torch.tensor([[c, s], [-s, c]])
    return torch.block_diag(*[block] * (d_model // 2))


def relative_shift_matrix__elementwise_power(k, d_model):
    blocks = []
    for i in range(d_model // 2):
        omega = 10000 ** (-2 * i / d_model)
        c, s = math.cos(omega), math.sin(omega)
        blocks.append(torch.tensor([[c, s], [-s, c]]))
    return torch.block_diag(*blocks) ** k  # M_1 applied k times


ANSWERS = [
    {"exercise": "ch4.sinusoidal_encoding", "fn": sinusoidal_encoding__padded_to_even,
     "mistake": "for an odd E builds the table for E + 1 and drops a column, so the frequencies use E + 1",
     "part": "the frequencies for an odd d_model"},
    {"exercise": "ch4.sinusoidal_encoding", "fn": sinusoidal_encoding__columns_first,
     "mistake": "fills a (d_model, length) table, the transpose of the one asked",
     "part": "the shape (transposed)"},
    {"exercise": "ch4.add_positional_encoding", "fn": add_positional_encoding__skips_position_zero,
     "mistake": "adds rows 1..L instead of 0..L-1 (off by one)",
     "part": "the rows of the table"},
    {"exercise": "ch4.add_positional_encoding", "fn": add_positional_encoding__concatenated,
     "mistake": "concatenates the encoding to the features, returning (N, L, 2E), instead of adding it",
     "part": "the output shape (concatenation)"},
    {"exercise": "ch4.relative_shift_matrix", "fn": relative_shift_matrix__no_frequency,
     "mistake": "rotates every pair by the angle k, forgetting the pair's frequency (k * omega_i)",
     "part": "the rotation angle of each block"},
    {"exercise": "ch4.relative_shift_matrix", "fn": relative_shift_matrix__elementwise_power,
     "mistake": "raises M_1 to the k-th power with ** (elementwise) instead of a matrix power",
     "part": "the matrix for k != 1"},
]
