"""Wrong learner answers to chapter 4 (positional), heldout half: see tests/learner_answers/README.md."""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def sinusoidal_encoding__pair_index_exponent(length, d_model):
    pos = torch.arange(length, dtype=torch.float32)[:, None]
    i = torch.arange((d_model + 1) // 2, dtype=torch.float32)[None, :]
    angles = pos / 10000 ** (i / d_model)
    pe = torch.zeros(length, d_model)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    return pe


def sinusoidal_encoding__float64_table(length, d_model):
    pos = torch.arange(length, dtype=torch.float64)[:, None]
    div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))
    angles = pos * div
    pe = torch.zeros(length, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    return pe


def sinusoidal_encoding__frequency_inverted(length, d_model):
    pos = torch.arange(length, dtype=torch.float32)[:, None]
    div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (math.log(10000.0) / d_model))
    angles = pos * div
    pe = torch.zeros(length, d_model)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    return pe


def add_positional_encoding__sequence_first_slice(x, pe):
    return x + pe[: x.size(0)]


def add_positional_encoding__cast_to_table_dtype(x, pe):
    L = x.shape[1]
    return x.to(pe.dtype) + pe[:L]


def add_positional_encoding__recomputes_sinusoidal(x, pe):
    N, L, E = x.shape
    pos = torch.arange(L, dtype=x.dtype)[:, None]
    two_i = torch.arange(0, E, 2, dtype=x.dtype)[None, :]
    angles = pos / 10000 ** (two_i / E)
    table = torch.zeros(L, E, dtype=x.dtype)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles[:, : E // 2])
    return x + table


def add_positional_encoding__scaled_embeddings(x, pe):
    L, E = x.shape[1], x.shape[2]
    return x * math.sqrt(E) + pe[:L]


def relative_shift_matrix__block_transposed(k, d_model):
    blocks = []
    for i in range(d_model // 2):
        w = 1.0 / 10000 ** (2 * i / d_model)
        c, s = math.cos(k * w), math.sin(k * w)
        blocks.append(torch.tensor([[c, -s], [s, c]], dtype=torch.float32))
    return torch.block_diag(*blocks)


def relative_shift_matrix__pair_index_frequency(k, d_model):
    blocks = []
    for i in range(d_model // 2):
        w = 1.0 / 10000 ** (i / d_model)
        c, s = math.cos(k * w), math.sin(k * w)
        blocks.append(torch.tensor([[c, s], [-s, c]], dtype=torch.float32))
    return torch.block_diag(*blocks)


def relative_shift_matrix__abs_shift(k, d_model):
    k = abs(k)
    blocks = []
    for i in range(d_model // 2):
        w = 1.0 / 10000 ** (2 * i / d_model)
        c, s = math.cos(k * w), math.sin(k * w)
        blocks.append(torch.tensor([[c, s], [-s, c]], dtype=torch.float32))
    return torch.block_diag(*blocks)


def sinusoidal_encoding__odd_width_breaks(length, d_model):
    pos = torch.arange(length, dtype=torch.float32)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)[None, :]
    angles = pos / 10000 ** (two_i / d_model)
    pe = torch.zeros(length, d_model)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe


def relative_shift_matrix__row_convention(k, d_model):
    blocks = []
    for i in range(d_model // 2):
        w = 1.0 / 10000 ** (2 * i / d_model)
        c, s = math.cos(k * w), math.sin(k * w)
        blocks.append(torch.tensor([[c, s], [-s, c]], dtype=torch.float32))
    return torch.block_diag(*blocks).T  # so that pe[p] @ M == pe[p + k]


ANSWERS = [
    {"exercise": "ch4.sinusoidal_encoding", "fn": sinusoidal_encoding__pair_index_exponent,
     "mistake": "uses the pair index i in the exponent, 10000^(i/E), instead of 10000^(2i/E)",
     "part": "the frequencies (exponent)"},
    {"exercise": "ch4.sinusoidal_encoding", "fn": sinusoidal_encoding__float64_table,
     "mistake": "builds the table in float64 and returns it without casting to float32",
     "part": "the dtype"},
    {"exercise": "ch4.sinusoidal_encoding", "fn": sinusoidal_encoding__frequency_inverted,
     "mistake": "drops the minus sign in the log-space formula, multiplying positions by 10000^(2i/E)",
     "part": "the frequencies (inverted)"},
    {"exercise": "ch4.add_positional_encoding", "fn": add_positional_encoding__sequence_first_slice,
     "mistake": "slices the table with x.size(0), the batch size, as in sequence-first tutorials",
     "part": "the slice length (batch size instead of L)"},
    {"exercise": "ch4.add_positional_encoding", "fn": add_positional_encoding__cast_to_table_dtype,
     "mistake": "casts x to the table's dtype, so a float64 batch with a float32 table comes back float32",
     "part": "the dtype"},
    {"exercise": "ch4.add_positional_encoding", "fn": add_positional_encoding__recomputes_sinusoidal,
     "mistake": "ignores pe and recomputes a sinusoidal table, which is wrong for a learned table",
     "part": "the table argument ignored"},
    {"exercise": "ch4.add_positional_encoding", "fn": add_positional_encoding__scaled_embeddings,
     "mistake": "multiplies x by sqrt(E) before adding, as in the original paper's embedding layer",
     "part": "a scale on x"},
    {"exercise": "ch4.relative_shift_matrix", "fn": relative_shift_matrix__block_transposed,
     "mistake": "uses the (cos, sin) rotation block [[c, -s], [s, c]], which shifts by -k for (sin, cos) pairs",
     "part": "the sign of the sines in each block (rotation direction)"},
    {"exercise": "ch4.relative_shift_matrix", "fn": relative_shift_matrix__pair_index_frequency,
     "mistake": "uses the pair index i in the frequency, 10000^(i/E), instead of 10000^(2i/E)",
     "part": "the frequencies"},
    {"exercise": "ch4.relative_shift_matrix", "fn": relative_shift_matrix__abs_shift,
     "mistake": "takes abs(k), so negative shifts move forward instead of back",
     "part": "negative k"},
    {"exercise": "ch4.sinusoidal_encoding", "fn": sinusoidal_encoding__odd_width_breaks,
     "mistake": "fills the cosine columns with all the angles, which fails for an odd d_model",
     "part": "odd d_model (the last cosine column)"},
    {"exercise": "ch4.relative_shift_matrix", "fn": relative_shift_matrix__row_convention,
     "mistake": "returns the transpose, for the row convention pe[p] @ M, while the exercise asks for M @ pe[p]",
     "part": "the matrix transposed (row vs column convention)"},
]
