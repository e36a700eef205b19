"""Wrong answers to chapter 4, batch 3, tune3 half: written blind, from the notebook only."""

import math

import torch
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def sinusoidal_encoding__sines_then_cosines(length, d_model):
    position = torch.arange(length, dtype=torch.float64)[:, None]
    angle = position * 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe = torch.cat([torch.sin(angle), torch.cos(angle[:, : d_model // 2])], dim=-1)
    return pe.float()


def sinusoidal_encoding__float64_table(length, d_model):
    position = torch.arange(length, dtype=torch.float64)[:, None]
    angle = position / 10000.0 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(length, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return pe


def sinusoidal_encoding__integer_division_exponent(length, d_model):
    position = torch.arange(length, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d_model, 2)
    angle = position / 10000.0 ** (two_i // d_model)
    pe = torch.zeros(length, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return pe.float()


def relative_shift_matrix__standard_rotation(k, d_model):
    blocks = []
    for i in range(d_model // 2):
        omega = 10000.0 ** (-2 * i / d_model)
        c, s = math.cos(k * omega), math.sin(k * omega)
        blocks.append(torch.tensor([[c, -s], [s, c]]))
    return torch.block_diag(*blocks)


def relative_shift_matrix__loop_index_slip(k, d_model):
    m = torch.zeros(d_model, d_model)
    for i in range(d_model // 2):
        omega = 10000.0 ** (-2 * i / d_model)
        c, s = math.cos(k * omega), math.sin(k * omega)
        m[i, i] = c
        m[i, i + 1] = s
        m[i + 1, i] = -s
        m[i + 1, i + 1] = c
    return m


def add_positional_encoding__fills_new_tensor(x, pe):
    n, length, e = x.shape
    out = torch.empty(n, length, e)
    for b in range(n):
        out[b] = x[b] + pe[:length]
    return out


def add_positional_encoding__scales_embeddings(x, pe):
    return x * math.sqrt(x.size(-1)) + pe[: x.size(1)]


def add_positional_encoding__recomputes_sinusoid(x, pe):
    n, length, e = x.shape
    position = torch.arange(length, dtype=torch.float64)[:, None]
    angle = position / 10000.0 ** (torch.arange(0, e, 2, dtype=torch.float64) / e)
    table = torch.zeros(length, e, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle[:, : e // 2])
    return x + table.to(x.dtype)


ANSWERS = [
    {
        "exercise": "ch4.sinusoidal_encoding",
        "fn": sinusoidal_encoding__sines_then_cosines,
        "mistake": "puts all the sines first and then all the cosines instead of interleaving them in pairs",
        "part": "the column layout",
    },
    {
        "exercise": "ch4.sinusoidal_encoding",
        "fn": sinusoidal_encoding__float64_table,
        "mistake": "computes the table in float64 and returns it without casting to float32",
        "part": "the dtype of the table",
    },
    {
        "exercise": "ch4.sinusoidal_encoding",
        "fn": sinusoidal_encoding__integer_division_exponent,
        "mistake": "writes the exponent as 2i // d_model, an integer division that is 0: every pair turns at speed 1",
        "part": "the frequency formula",
    },
    {
        "exercise": "ch4.relative_shift_matrix",
        "fn": relative_shift_matrix__standard_rotation,
        "mistake": "uses the textbook rotation [[cos, -sin], [sin, cos]], which shifts by -k for (sin, cos) pairs",
        "part": "the signs of the sine terms",
    },
    {
        "exercise": "ch4.relative_shift_matrix",
        "fn": relative_shift_matrix__loop_index_slip,
        "mistake": "indexes the block of pair i at row/column i instead of 2i, so the blocks overlap",
        "part": "the position of each block",
    },
    {
        "exercise": "ch4.add_positional_encoding",
        "fn": add_positional_encoding__fills_new_tensor,
        "mistake": "fills a torch.empty made without dtype=, so a float64 batch comes back as float32",
        "part": "the dtype of the output",
    },
    {
        "exercise": "ch4.add_positional_encoding",
        "fn": add_positional_encoding__scales_embeddings,
        "mistake": "multiplies the embeddings by sqrt(E) before adding, which the exercise does not ask for",
        "part": "a scale on x",
    },
    {
        "exercise": "ch4.add_positional_encoding",
        "fn": add_positional_encoding__recomputes_sinusoid,
        "mistake": "ignores pe and recomputes a sinusoidal table, wrong for a learned table",
        "part": "the table that is added",
    },
]
