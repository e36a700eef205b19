"""A correct answer to each exercise of chapter 1, in another style than the reference (batch 3)."""

import math  # noqa: F401

import torch
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def project_qkv__fused_weight(x, w_q, w_k, w_v):
    fused = torch.cat([w_q, w_k, w_v], dim=1)  # (E, 2 D_k + D_v): one product for all three
    q, k, v = torch.split(x @ fused, [w_q.shape[1], w_k.shape[1], w_v.shape[1]], dim=-1)
    return q, k, v


def attention_scores__loop_over_keys(q, k):
    columns = [(q * k[..., j : j + 1, :]).sum(dim=-1) for j in range(k.shape[-2])]  # each (..., L)
    return torch.stack(columns, dim=-1)


ANSWERS = [
    {"exercise": "ch1.project_qkv", "fn": project_qkv__fused_weight, "correct": True},
    {"exercise": "ch1.attention_scores", "fn": attention_scores__loop_over_keys, "correct": True},
]
