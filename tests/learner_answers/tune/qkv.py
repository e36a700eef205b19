"""Wrong learner answers to chapter 1 (qkv), tune half: see tests/learner_answers/README.md."""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def project_qkv__v_from_w_k(x, w_q, w_k, w_v):
    q = x @ w_q
    k = x @ w_k
    v = x @ w_k
    return q, k, v


def project_qkv__float32_cast(x, w_q, w_k, w_v):
    x = x.float()
    return x @ w_q.float(), x @ w_k.float(), x @ w_v.float()


def attention_scores__dot_T(q, k):
    return q @ k.T


def attention_scores__cosine_similarity(q, k):
    q = F.normalize(q, dim=-1)
    k = F.normalize(k, dim=-1)
    return q @ k.transpose(-2, -1)


def project_qkv__no_grad(x, w_q, w_k, w_v):
    with torch.no_grad():  # copied from the nn.Linear cell
        return x @ w_q, x @ w_k, x @ w_v


def attention_scores__bmm(q, k):
    return torch.bmm(q, k.transpose(1, 2))


ANSWERS = [
    {"exercise": "ch1.project_qkv", "fn": project_qkv__v_from_w_k,
     "mistake": "a copy-paste slip: V is computed with w_k instead of w_v",
     "part": "the value projection"},
    {"exercise": "ch1.project_qkv", "fn": project_qkv__float32_cast,
     "mistake": "casts x and the weights to float32, so a float64 input comes back as float32",
     "part": "the dtype of the outputs"},
    {"exercise": "ch1.attention_scores", "fn": attention_scores__dot_T,
     "mistake": "uses k.T, which reverses all dims, so batched or multi-head inputs break",
     "part": "the transpose of k for leading dims"},
    {"exercise": "ch1.attention_scores", "fn": attention_scores__cosine_similarity,
     "mistake": "normalises q and k to unit length, computing cosine similarities instead of dot products",
     "part": "the normalisation of q and k"},
    {"exercise": "ch1.project_qkv", "fn": project_qkv__no_grad,
     "mistake": "computes the projections under torch.no_grad(), so no gradient flows to x or the weights",
     "part": "gradients (no_grad)"},
    {"exercise": "ch1.attention_scores", "fn": attention_scores__bmm,
     "mistake": "uses torch.bmm and transpose(1, 2), which only work for exactly one batch dim",
     "part": "any number of leading dims (only 3-D works)"},
]
