"""Wrong learner answers to chapter 4 (positional), heldout half of the second batch: see
tests/learner_answers/README.md."""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def sinusoidal_encoding__sine_twice(length, d_model):
    position = torch.arange(length, dtype=torch.float32)[:, None]
    angle = position * torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(length, d_model)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.sin(angle[:, : d_model // 2])  # copy of the line above
    return pe


def sinusoidal_encoding__linspace_exponent(length, d_model):
    position = torch.arange(length, dtype=torch.float32)[:, None]
    fraction = torch.linspace(0, 1, (d_model + 1) // 2)  # 2i/E from 0 to 1
    angle = position / 10000.0 ** fraction
    pe = torch.zeros(length, d_model)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return pe


def sinusoidal_encoding__floor_division(length, d_model):
    position = torch.arange(length)[:, None]
    exponent = torch.arange(0, d_model, 2) // d_model  # 2i / E
    angle = position / 10000 ** exponent
    pe = torch.zeros(length, d_model)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return pe


def add_positional_encoding__whole_table(x, pe):
    return x + pe


def add_positional_encoding__sliced_by_width(x, pe):
    return x + pe[: x.shape[-1]]


def add_positional_encoding__unsqueeze_in_place(x, pe):
    pe.unsqueeze_(0)  # (1, max_len, E), broadcast over the batch
    return x + pe[:, : x.size(1)]


def relative_shift_matrix__pair_index_slots(k, d_model):
    m = torch.zeros(d_model, d_model)
    for i in range(d_model // 2):
        omega = 10000 ** (-2 * i / d_model)
        c, s = math.cos(k * omega), math.sin(k * omega)
        m[i : i + 2, i : i + 2] = torch.tensor([[c, s], [-s, c]])
    return m


def relative_shift_matrix__identity_for_nonpositive(k, d_model):
    if k <= 0:
        return torch.eye(d_model)
    blocks = []
    for i in range(d_model // 2):
        omega = 10000 ** (-2 * i / d_model)
        c, s = math.cos(k * omega), math.sin(k * omega)
        blocks.append(torch.tensor([[c, s], [-s, c]]))
    return torch.block_diag(*blocks)


ANSWERS = [
    {"exercise": "ch4.sinusoidal_encoding", "fn": sinusoidal_encoding__sine_twice,
     "mistake": "a copy-paste slip: the odd (cosine) columns are filled with sines too",
     "part": "the cosine columns"},
    {"exercise": "ch4.sinusoidal_encoding", "fn": sinusoidal_encoding__linspace_exponent,
     "mistake": "spaces the exponents with linspace(0, 1, ceil(E/2)), so they reach 1 instead of (E-2)/E",
     "part": "the frequencies"},
    {"exercise": "ch4.sinusoidal_encoding", "fn": sinusoidal_encoding__floor_division,
     "mistake": "computes 2i/E with // (integer division): every exponent is 0, every frequency 1",
     "part": "the frequencies"},
    {"exercise": "ch4.add_positional_encoding", "fn": add_positional_encoding__whole_table,
     "mistake": "adds the whole table without slicing it to the first L rows",
     "part": "the rows of the table (no slice)"},
    {"exercise": "ch4.add_positional_encoding", "fn": add_positional_encoding__sliced_by_width,
     "mistake": "slices the table with x.shape[-1] (E) instead of the length x.shape[1]",
     "part": "the rows of the table (sliced with E)"},
    {"exercise": "ch4.add_positional_encoding", "fn": add_positional_encoding__unsqueeze_in_place,
     "mistake": "calls pe.unsqueeze_(0), changing the caller's table in place",
     "part": "the input pe modified in place"},
    {"exercise": "ch4.relative_shift_matrix", "fn": relative_shift_matrix__pair_index_slots,
     "mistake": "writes pair i's block at rows/columns i, i+1 instead of 2i, 2i+1, so the blocks overlap",
     "part": "where the blocks go"},
    {"exercise": "ch4.relative_shift_matrix", "fn": relative_shift_matrix__identity_for_nonpositive,
     "mistake": "returns the identity for every k <= 0, so negative shifts do nothing",
     "part": "negative shifts"},
]
