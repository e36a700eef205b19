"""Review batch 5 (review5): the wrong answers to chapter 4 that issue 36's learner reviewers tried and whose
diagnoses were tuned (tests/test_diagnoses_round4.py)."""
import math  # noqa: F401

import torch
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def relative_shift_matrix__cosines_only(k, d_model):
    omega = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    return torch.diag(torch.cos(k * omega).repeat_interleave(2)).float()


def sinusoidal_encoding__odd_divides_by_d_minus_1(length, d_model):
    pos = torch.arange(length, dtype=torch.float64)[:, None]
    omega = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / (d_model - d_model % 2))
    table = torch.zeros(length, d_model, dtype=torch.float64)
    table[:, 0::2] = (pos * omega).sin()
    table[:, 1::2] = (pos * omega[: d_model // 2]).cos()
    return table.float()


def add_positional_encoding__cast_to_table_dtype(x, pe):
    return (x + pe[: x.size(1)]).to(pe.dtype)


def add_positional_encoding__rebuilt_table(x, pe):
    N, L, E = x.shape
    position = torch.arange(L, dtype=torch.float64)[:, None]
    omega = 10000.0 ** (-torch.arange(0, E, 2, dtype=torch.float64) / E)
    table = torch.zeros(L, E, dtype=torch.float64)
    table[:, 0::2] = (position * omega).sin()
    table[:, 1::2] = (position * omega).cos()
    return x + table.to(x.dtype)


ANSWERS = [
    {"exercise": "ch4.relative_shift_matrix", "fn": relative_shift_matrix__cosines_only,
     "mistake": "no sine terms: each block is cos(k w) on the diagonal only", "part": "rotation blocks"},
    {"exercise": "ch4.sinusoidal_encoding", "fn": sinusoidal_encoding__odd_divides_by_d_minus_1,
     "mistake": "the exponent divides by d_model - 1 for an odd d_model", "part": "frequencies (odd d_model)"},
    {"exercise": "ch4.add_positional_encoding", "fn": add_positional_encoding__cast_to_table_dtype,
     "mistake": "the sum cast to pe's dtype instead of keeping x's", "part": "dtype"},
    {"exercise": "ch4.add_positional_encoding", "fn": add_positional_encoding__rebuilt_table,
     "mistake": "a sinusoidal table rebuilt instead of using pe (and it raises for an odd E)", "part": "table"},
]
