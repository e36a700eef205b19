"""Fourth blind batch (tune4): wrong answers to chapter 4, written from the notebook only."""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def sinusoidal_encoding__even_only(length, d_model):
    pos = torch.arange(length, dtype=torch.float32)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)
    angles = pos / (10000 ** (two_i / d_model))
    pe = torch.zeros(length, d_model)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe


def relative_shift_matrix__rotation_other_way(k, d_model):
    m = torch.zeros(d_model, d_model)
    for i in range(d_model // 2):
        w = 1.0 / 10000 ** (2 * i / d_model)
        c, s = math.cos(k * w), math.sin(k * w)
        m[2 * i, 2 * i], m[2 * i, 2 * i + 1] = c, -s
        m[2 * i + 1, 2 * i], m[2 * i + 1, 2 * i + 1] = s, c
    return m


def add_positional_encoding__whole_table(x, pe):
    return x + pe


ANSWERS = [
    {"exercise": "ch4.sinusoidal_encoding", "fn": sinusoidal_encoding__even_only,
     "mistake": "correct only for even E: odd d_model fails (cos columns one fewer than angles)",
     "part": "odd E"},
    {"exercise": "ch4.relative_shift_matrix", "fn": relative_shift_matrix__rotation_other_way,
     "mistake": "sin signs swapped in each block: the matrix shifts by -k",
     "part": "block signs"},
    {"exercise": "ch4.add_positional_encoding", "fn": add_positional_encoding__whole_table,
     "mistake": "adds the whole table without slicing to L: only works when max_len == L",
     "part": "slice"},
]
