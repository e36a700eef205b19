"""Wrong learner answers to chapter 4 (positional), tune half: see tests/learner_answers/README.md."""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def sinusoidal_encoding__sin_cos_swapped(length, d_model):
    pos = torch.arange(length, dtype=torch.float32)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)[None, :]
    angles = pos / 10000 ** (two_i / d_model)
    pe = torch.zeros(length, d_model)
    pe[:, 0::2] = torch.cos(angles)
    pe[:, 1::2] = torch.sin(angles[:, : d_model // 2])
    return pe


def sinusoidal_encoding__halves_concatenated(length, d_model):
    pos = torch.arange(length, dtype=torch.float32)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)[None, :]
    angles = pos / 10000 ** (two_i / d_model)
    return torch.cat([torch.sin(angles), torch.cos(angles[:, : d_model // 2])], dim=-1)


def sinusoidal_encoding__positions_from_one(length, d_model):
    pos = torch.arange(1, length + 1, dtype=torch.float32)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)[None, :]
    angles = pos / 10000 ** (two_i / d_model)
    pe = torch.zeros(length, d_model)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    return pe


def add_positional_encoding__in_place(x, pe):
    x += pe[: x.size(1)]
    return x


def add_positional_encoding__last_rows(x, pe):
    L = x.shape[1]
    return x + pe[-L:]


def relative_shift_matrix__float64_matrix(k, d_model):
    i = torch.arange(d_model // 2, dtype=torch.float64)
    angle = k / 10000 ** (2 * i / d_model)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    m[0::2, 0::2] = torch.diag(torch.cos(angle))
    m[0::2, 1::2] = torch.diag(torch.sin(angle))
    m[1::2, 0::2] = torch.diag(-torch.sin(angle))
    m[1::2, 1::2] = torch.diag(torch.cos(angle))
    return m


def relative_shift_matrix__both_sines_positive(k, d_model):
    m = torch.zeros(d_model, d_model)
    for i in range(d_model // 2):
        w = 1.0 / 10000 ** (2 * i / d_model)
        m[2 * i, 2 * i] = math.cos(k * w)
        m[2 * i + 1, 2 * i + 1] = math.cos(k * w)
        m[2 * i, 2 * i + 1] = math.sin(k * w)
        m[2 * i + 1, 2 * i] = math.sin(k * w)
    return m


def sinusoidal_encoding__log10(length, d_model):
    pos = torch.arange(length, dtype=torch.float32)[:, None]
    div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log10(10000.0) / d_model))
    angles = pos * div
    pe = torch.zeros(length, d_model)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    return pe


def add_positional_encoding__sequence_first_unsqueeze(x, pe):
    return x + pe[: x.size(1)].unsqueeze(1)


def add_positional_encoding__table_detached(x, pe):
    return x + pe[: x.shape[1]].detach()


def relative_shift_matrix__exponent_doubled(k, d_model):
    blocks = []
    for i in range(0, d_model, 2):
        w = 1.0 / 10000 ** (2 * i / d_model)
        c, s = math.cos(k * w), math.sin(k * w)
        blocks.append(torch.tensor([[c, s], [-s, c]], dtype=torch.float32))
    return torch.block_diag(*blocks)


ANSWERS = [
    {"exercise": "ch4.sinusoidal_encoding", "fn": sinusoidal_encoding__sin_cos_swapped,
     "mistake": "puts cosines in the even columns and sines in the odd ones",
     "part": "sin and cos swapped"},
    {"exercise": "ch4.sinusoidal_encoding", "fn": sinusoidal_encoding__halves_concatenated,
     "mistake": "concatenates all sines then all cosines instead of interleaving them",
     "part": "the column layout (halves instead of interleaved)"},
    {"exercise": "ch4.sinusoidal_encoding", "fn": sinusoidal_encoding__positions_from_one,
     "mistake": "counts positions from 1 instead of 0, so every row is shifted by one",
     "part": "the positions (off by one)"},
    {"exercise": "ch4.add_positional_encoding", "fn": add_positional_encoding__in_place,
     "mistake": "adds the encoding in place with +=, changing the caller's x",
     "part": "the input modified in place"},
    {"exercise": "ch4.add_positional_encoding", "fn": add_positional_encoding__last_rows,
     "mistake": "adds the last L rows of the table (pe[-L:]) instead of the first L",
     "part": "which rows of the table (the last instead of the first)"},
    {"exercise": "ch4.relative_shift_matrix", "fn": relative_shift_matrix__float64_matrix,
     "mistake": "builds the matrix in float64 and does not cast it to float32",
     "part": "the dtype"},
    {"exercise": "ch4.relative_shift_matrix", "fn": relative_shift_matrix__both_sines_positive,
     "mistake": "puts +sin in both off-diagonal entries of each block, forgetting the minus sign",
     "part": "the sign of one sine in each block"},
    {"exercise": "ch4.sinusoidal_encoding", "fn": sinusoidal_encoding__log10,
     "mistake": "uses math.log10 instead of the natural log in exp(-2i log(10000) / E), so the frequencies are off",
     "part": "the frequencies (log base)"},
    {"exercise": "ch4.add_positional_encoding", "fn": add_positional_encoding__sequence_first_unsqueeze,
     "mistake": "unsqueezes the table at dim 1, (L, 1, E), the sequence-first layout, so it broadcasts wrongly",
     "part": "the broadcast axis of the table"},
    {"exercise": "ch4.add_positional_encoding", "fn": add_positional_encoding__table_detached,
     "mistake": "detaches the table, so a learned table gets no gradient",
     "part": "gradients to the table"},
    {"exercise": "ch4.relative_shift_matrix", "fn": relative_shift_matrix__exponent_doubled,
     "mistake": "loops i over 0, 2, 4, ... and still writes 2 * i in the exponent, so the frequencies use 4i/E",
     "part": "the frequencies (exponent doubled)"},
]
