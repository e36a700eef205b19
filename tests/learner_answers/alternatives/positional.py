"""Correct answers to chapter 4, written in other styles than the reference."""
import math

import torch
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def sinusoidal_encoding__loops(length, d_model):
    pe = torch.zeros(length, d_model, dtype=torch.float32)
    for p in range(length):
        for c in range(d_model):
            angle = p / 10000 ** ((c - c % 2) / d_model)
            pe[p, c] = math.sin(angle) if c % 2 == 0 else math.cos(angle)
    return pe


def sinusoidal_encoding__stack_interleave(length, d_model):
    pos = torch.arange(length, dtype=torch.float64).unsqueeze(1)
    freq = torch.exp(-math.log(10000.0) * torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    angles = pos * freq
    pairs = torch.stack([angles.sin(), angles.cos()], dim=-1).reshape(length, -1)
    return pairs[:, :d_model].float()


def add_positional_encoding__unsqueeze(x, pe):
    return x + pe[: x.shape[1]].unsqueeze(0).to(x.dtype)


def add_positional_encoding__narrow(x, pe):
    return torch.add(x, pe.narrow(0, 0, x.size(1)).to(dtype=x.dtype))


def relative_shift_matrix__block_diag(k, d_model):
    blocks = []
    for i in range(d_model // 2):
        w = 10000 ** (-2 * i / d_model)
        c, s = math.cos(k * w), math.sin(k * w)
        blocks.append(torch.tensor([[c, s], [-s, c]]))
    return torch.block_diag(*blocks).to(torch.float32)


def relative_shift_matrix__strided_fill(k, d_model):
    i = torch.arange(d_model // 2, dtype=torch.float64)
    angle = k * torch.exp(-2 * i * math.log(10000.0) / d_model)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    idx = torch.arange(0, d_model, 2)
    m[idx, idx] = angle.cos()
    m[idx + 1, idx + 1] = angle.cos()
    m[idx, idx + 1] = angle.sin()
    m[idx + 1, idx] = -angle.sin()
    return m.float()


ANSWERS = [
    {"exercise": "ch4.sinusoidal_encoding", "fn": sinusoidal_encoding__loops, "correct": True},
    {"exercise": "ch4.sinusoidal_encoding", "fn": sinusoidal_encoding__stack_interleave, "correct": True},
    {"exercise": "ch4.add_positional_encoding", "fn": add_positional_encoding__unsqueeze, "correct": True},
    {"exercise": "ch4.add_positional_encoding", "fn": add_positional_encoding__narrow, "correct": True},
    {"exercise": "ch4.relative_shift_matrix", "fn": relative_shift_matrix__block_diag, "correct": True},
    {"exercise": "ch4.relative_shift_matrix", "fn": relative_shift_matrix__strided_fill, "correct": True},
]
