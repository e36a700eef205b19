"""Correct answers to chapter 1, written in other styles than the reference."""
import math  # noqa: F401

import torch
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def project_qkv__einsum(x, w_q, w_k, w_v):
    return (torch.einsum("...le,ed->...ld", x, w_q),
            torch.einsum("...le,ed->...ld", x, w_k),
            torch.einsum("...le,ed->...ld", x, w_v))


def project_qkv__tensordot(x, w_q, w_k, w_v):
    return tuple(torch.tensordot(x, w, dims=([x.dim() - 1], [0])) for w in (w_q, w_k, w_v))


def attention_scores__einsum(q, k):
    return torch.einsum("...ld,...sd->...ls", q, k)


def attention_scores__broadcast_sum(q, k):
    return (q.unsqueeze(-2) * k.unsqueeze(-3)).sum(dim=-1)


ANSWERS = [
    {"exercise": "ch1.project_qkv", "fn": project_qkv__einsum, "correct": True},
    {"exercise": "ch1.project_qkv", "fn": project_qkv__tensordot, "correct": True},
    {"exercise": "ch1.attention_scores", "fn": attention_scores__einsum, "correct": True},
    {"exercise": "ch1.attention_scores", "fn": attention_scores__broadcast_sum, "correct": True},
]
