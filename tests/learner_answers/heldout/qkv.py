"""Wrong learner answers to chapter 1 (qkv), heldout half: see tests/learner_answers/README.md."""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def project_qkv__kv_swapped(x, w_q, w_k, w_v):
    q = x @ w_q
    k = x @ w_k
    v = x @ w_v
    return q, v, k


def project_qkv__scaled_by_sqrt_e(x, w_q, w_k, w_v):
    scale = 1 / math.sqrt(x.shape[-1])
    return (x @ w_q) * scale, (x @ w_k) * scale, (x @ w_v) * scale


def project_qkv__batch_dim_kept(x, w_q, w_k, w_v):
    if x.dim() == 2:
        x = x.unsqueeze(0)  # make it (N, L, E)
    q = torch.bmm(x, w_q.expand(x.shape[0], *w_q.shape))
    k = torch.bmm(x, w_k.expand(x.shape[0], *w_k.shape))
    v = torch.bmm(x, w_v.expand(x.shape[0], *w_v.shape))
    return q, k, v


def attention_scores__divided_by_sqrt_d(q, k):
    return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])


def attention_scores__keys_times_queries(q, k):
    return k @ q.transpose(-2, -1)


def attention_scores__softmax_applied(q, k):
    scores = q @ k.transpose(-2, -1)
    return scores.softmax(dim=-1)


def project_qkv__linear_convention(x, w_q, w_k, w_v):
    return F.linear(x, w_q), F.linear(x, w_k), F.linear(x, w_v)


def attention_scores__float32_cast(q, k):
    return q.float() @ k.float().transpose(-2, -1)


ANSWERS = [
    {"exercise": "ch1.project_qkv", "fn": project_qkv__kv_swapped,
     "mistake": "returns the values in the second slot and the keys in the third, (Q, V, K) instead of (Q, K, V)",
     "part": "the order of the returned tensors"},
    {"exercise": "ch1.project_qkv", "fn": project_qkv__scaled_by_sqrt_e,
     "mistake": "divides Q, K and V by sqrt(E) (the weight init scale from the prose applied to the outputs)",
     "part": "the scale of the projections"},
    {"exercise": "ch1.project_qkv", "fn": project_qkv__batch_dim_kept,
     "mistake": "adds a batch dim to an unbatched (L, E) input and never removes it, returning (1, L, D)",
     "part": "the shape for an unbatched input"},
    {"exercise": "ch1.attention_scores", "fn": attention_scores__divided_by_sqrt_d,
     "mistake": "divides the scores by sqrt(D) although the exercise asks for unscaled scores",
     "part": "the scale"},
    {"exercise": "ch1.attention_scores", "fn": attention_scores__keys_times_queries,
     "mistake": "computes K Qᵀ instead of Q Kᵀ, the scores transposed (rows are keys)",
     "part": "the order of the product (a transpose)"},
    {"exercise": "ch1.attention_scores", "fn": attention_scores__softmax_applied,
     "mistake": "applies a softmax over the keys, returning weights instead of raw scores",
     "part": "a softmax that does not belong"},
    {"exercise": "ch1.project_qkv", "fn": project_qkv__linear_convention,
     "mistake": "uses F.linear as nn.Linear does, which multiplies by the weight transposed (x @ w.T)",
     "part": "the weights transposed"},
    {"exercise": "ch1.attention_scores", "fn": attention_scores__float32_cast,
     "mistake": "casts q and k to float32, so float64 (or float16) inputs come back as float32",
     "part": "the dtype"},
]
