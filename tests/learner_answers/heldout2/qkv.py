"""Wrong learner answers to chapter 1 (qkv), heldout half of the second batch: see
tests/learner_answers/README.md."""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def project_qkv__q_k_weights_swapped(x, w_q, w_k, w_v):
    q = x @ w_k
    k = x @ w_q
    v = x @ w_v
    return q, k, v


def project_qkv__fused_chunk(x, w_q, w_k, w_v):
    w = torch.cat([w_q, w_k, w_v], dim=1)  # one big matmul, as in nn.MultiheadAttention
    q, k, v = (x @ w).chunk(3, dim=-1)
    return q, k, v


def attention_scores__transpose_in_place(q, k):
    k.transpose_(-2, -1)
    return q @ k


def attention_scores__detached(q, k):
    return (q @ k.transpose(-2, -1)).detach()


ANSWERS = [
    {"exercise": "ch1.project_qkv", "fn": project_qkv__q_k_weights_swapped,
     "mistake": "mixes up w_q and w_k (same shape): Q is computed with w_k and K with w_q",
     "part": "the query and key projections (weights swapped)"},
    {"exercise": "ch1.project_qkv", "fn": project_qkv__fused_chunk,
     "mistake": "concatenates the three weights and chunks the result into 3 equal parts, wrong when D_v != D_k",
     "part": "the split of a fused projection (V's width)"},
    {"exercise": "ch1.attention_scores", "fn": attention_scores__transpose_in_place,
     "mistake": "transposes k in place with transpose_, changing the caller's tensor",
     "part": "the input k modified in place"},
    {"exercise": "ch1.attention_scores", "fn": attention_scores__detached,
     "mistake": "detaches the scores (left over from printing them), so no gradient flows back",
     "part": "gradients (detach)"},
]
