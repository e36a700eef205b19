"""Wrong learner answers to chapter 1 (qkv), tune half of the second batch: see
tests/learner_answers/README.md."""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def project_qkv__column_convention(x, w_q, w_k, w_v):
    # textbook column-vector convention: q = W^T x, so Q^T = W^T X^T
    return (w_q.T @ x.T).T, (w_k.T @ x.T).T, (w_v.T @ x.T).T


def project_qkv__flattened_tokens(x, w_q, w_k, w_v):
    flat = x.reshape(-1, x.shape[-1])  # (N*L, E): one row per token
    return flat @ w_q, flat @ w_k, flat @ w_v


def attention_scores__diagonal_only(q, k):
    return (q * k).sum(dim=-1)  # the dot product of each query with its key


def attention_scores__queries_with_queries(q, k):
    return q @ q.transpose(-2, -1)


ANSWERS = [
    {"exercise": "ch1.project_qkv", "fn": project_qkv__column_convention,
     "mistake": "computes (Wᵀ Xᵀ)ᵀ; x.T reverses all dims, so a batched (N, L, E) input breaks",
     "part": "batched inputs (x.T on 3-D x)"},
    {"exercise": "ch1.project_qkv", "fn": project_qkv__flattened_tokens,
     "mistake": "flattens the batch to (N*L, E) and never restores it, returning (N*L, D) for a batched x",
     "part": "the shape for a batched input"},
    {"exercise": "ch1.attention_scores", "fn": attention_scores__diagonal_only,
     "mistake": "multiplies q and k elementwise and sums over D: only query i with key i, shape (..., L)",
     "part": "the output shape (no L x S matrix)"},
    {"exercise": "ch1.attention_scores", "fn": attention_scores__queries_with_queries,
     "mistake": "multiplies q by its own transpose (q and k mixed up): Q Qᵀ instead of Q Kᵀ",
     "part": "the keys (q used instead of k)"},
]
