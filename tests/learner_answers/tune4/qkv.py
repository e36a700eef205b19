"""Fourth blind batch (tune4): wrong answers to chapter 1, written from the notebook only."""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def project_qkv__value_uses_query_weights(x, w_q, w_k, w_v):
    q = x @ w_q
    k = x @ w_k
    v = x @ w_q
    return q, k, v


def project_qkv__flattens_batch(x, w_q, w_k, w_v):
    flat = x.reshape(-1, x.shape[-1])
    return flat @ w_q, flat @ w_k, flat @ w_v


def attention_scores__dot_T(q, k):
    return q @ k.T


def attention_scores__bmm(q, k):
    return torch.bmm(q, k.transpose(1, 2))


ANSWERS = [
    {"exercise": "ch1.project_qkv", "fn": project_qkv__value_uses_query_weights,
     "mistake": "V is computed with w_q instead of w_v (copy-paste)",
     "part": "value projection"},
    {"exercise": "ch1.project_qkv", "fn": project_qkv__flattens_batch,
     "mistake": "flattens (N, L, E) to (N*L, E) and never reshapes back: batched outputs are (N*L, D)",
     "part": "batch shape"},
    {"exercise": "ch1.attention_scores", "fn": attention_scores__dot_T,
     "mistake": "k.T reverses all dims: right for 2-D, wrong/error for batched keys",
     "part": "key transpose"},
    {"exercise": "ch1.attention_scores", "fn": attention_scores__bmm,
     "mistake": "torch.bmm with transpose(1, 2): works only for 3-D inputs, fails on 2-D or 4-D",
     "part": "batch dims"},
]
