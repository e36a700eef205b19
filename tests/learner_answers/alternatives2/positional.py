"""A correct answer to each exercise of chapter 4, in another style than the reference (batch 3)."""

import math

import torch
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def sinusoidal_encoding__python_loops(length, d_model):
    rows = []
    for p in range(length):
        row = []
        for j in range(d_model):
            angle = p / 10000 ** ((j - j % 2) / d_model)  # columns 2i and 2i + 1 share the angle
            row.append(math.sin(angle) if j % 2 == 0 else math.cos(angle))
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float32).reshape(length, d_model)


def relative_shift_matrix__strided_diagonals(k, d_model):
    omega = torch.pow(10000.0, -torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    c, s = torch.cos(k * omega), torch.sin(k * omega)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    m[0::2, 0::2] = torch.diag(c)
    m[0::2, 1::2] = torch.diag(s)
    m[1::2, 0::2] = torch.diag(-s)
    m[1::2, 1::2] = torch.diag(c)
    return m.to(torch.float32)


def add_positional_encoding__narrow(x, pe):
    return torch.add(x, pe.narrow(0, 0, x.shape[1]).to(x.dtype))


ANSWERS = [
    {"exercise": "ch4.sinusoidal_encoding", "fn": sinusoidal_encoding__python_loops, "correct": True},
    {"exercise": "ch4.relative_shift_matrix", "fn": relative_shift_matrix__strided_diagonals, "correct": True},
    {"exercise": "ch4.add_positional_encoding", "fn": add_positional_encoding__narrow, "correct": True},
]
