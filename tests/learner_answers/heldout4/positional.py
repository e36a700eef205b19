"""Fourth blind batch (heldout4): wrong answers to chapter 4, written from the notebook only."""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def sinusoidal_encoding__exponent_i_over_e(length, d_model):
    pos = torch.arange(length, dtype=torch.float32)[:, None]
    i = torch.arange((d_model + 1) // 2, dtype=torch.float32)
    freq = 1.0 / (10000 ** (i / d_model))
    pe = torch.zeros(length, d_model)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq[: d_model // 2])
    return pe


def sinusoidal_encoding__sin_then_cos_halves(length, d_model):
    pos = torch.arange(length, dtype=torch.float32)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)
    angles = pos / (10000 ** (two_i / d_model))
    pe = torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)
    return pe[:, :d_model]


def relative_shift_matrix__frequency_i_over_e(k, d_model):
    m = torch.zeros(d_model, d_model)
    for i in range(d_model // 2):
        w = 1.0 / 10000 ** (i / d_model)
        c, s = math.cos(k * w), math.sin(k * w)
        m[2 * i, 2 * i], m[2 * i, 2 * i + 1] = c, s
        m[2 * i + 1, 2 * i], m[2 * i + 1, 2 * i + 1] = -s, c
    return m


def relative_shift_matrix__float64(k, d_model):
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i in range(d_model // 2):
        w = 1.0 / 10000 ** (2 * i / d_model)
        c, s = math.cos(k * w), math.sin(k * w)
        m[2 * i, 2 * i], m[2 * i, 2 * i + 1] = c, s
        m[2 * i + 1, 2 * i], m[2 * i + 1, 2 * i + 1] = -s, c
    return m


def add_positional_encoding__slices_by_batch(x, pe):
    return x + pe[: x.shape[0]]


ANSWERS = [
    {"exercise": "ch4.sinusoidal_encoding", "fn": sinusoidal_encoding__exponent_i_over_e,
     "mistake": "frequency 10000^(i/E) with the pair index i instead of 10000^(2i/E)",
     "part": "frequencies"},
    {"exercise": "ch4.sinusoidal_encoding", "fn": sinusoidal_encoding__sin_then_cos_halves,
     "mistake": "all sines in the first half, all cosines in the second, instead of interleaved",
     "part": "layout"},
    {"exercise": "ch4.relative_shift_matrix", "fn": relative_shift_matrix__frequency_i_over_e,
     "mistake": "frequency 10000^(i/E) instead of 10000^(2i/E)",
     "part": "frequencies"},
    {"exercise": "ch4.relative_shift_matrix", "fn": relative_shift_matrix__float64,
     "mistake": "builds the matrix in float64: dtype is not float32",
     "part": "dtype"},
    {"exercise": "ch4.add_positional_encoding", "fn": add_positional_encoding__slices_by_batch,
     "mistake": "slices the table by x.shape[0] (N) instead of x.shape[1] (L)",
     "part": "slice dim"},
]
