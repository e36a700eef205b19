"""Wrong answers to chapter 1, batch 3, tune3 half: written blind, from the notebook only."""

import math

import torch
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401

E = 16  # the notebook's global: `L, E = x.shape` of the pronoun sentence


def project_qkv__returns_k_q_v(x, w_q, w_k, w_v):
    q = x @ w_q
    k = x @ w_k
    v = x @ w_v
    return k, q, v


def project_qkv__flattened_batch(x, w_q, w_k, w_v):
    flat = x.reshape(-1, x.shape[-1])  # (N * L, E)
    return flat @ w_q, flat @ w_k, flat @ w_v


def project_qkv__notebook_e(x, w_q, w_k, w_v):
    flat = x.reshape(-1, E)
    shape = (*x.shape[:-1], -1)
    return (flat @ w_q).reshape(shape), (flat @ w_k).reshape(shape), (flat @ w_v).reshape(shape)


def attention_scores__scaled_early(q, k):
    return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])


def attention_scores__feature_gram(q, k):
    return q.transpose(-2, -1) @ k


def attention_scores__bmm_flattened(q, k):
    q3 = q.reshape(-1, q.shape[-2], q.shape[-1])
    k3 = k.reshape(-1, k.shape[-2], k.shape[-1])
    return torch.bmm(q3, k3.transpose(1, 2))


ANSWERS = [
    {
        "exercise": "ch1.project_qkv",
        "fn": project_qkv__returns_k_q_v,
        "mistake": "returns the tuple in the order (K, Q, V) instead of (Q, K, V)",
        "part": "the order of the returned tensors",
    },
    {
        "exercise": "ch1.project_qkv",
        "fn": project_qkv__flattened_batch,
        "mistake": "flattens (N, L, E) to (N*L, E) for the product and never reshapes back",
        "part": "the leading dims of the outputs",
    },
    {
        "exercise": "ch1.project_qkv",
        "fn": project_qkv__notebook_e,
        "mistake": "reshapes x with the notebook's global E = 16 instead of x's own last dim",
        "part": "the size read from a notebook global",
    },
    {
        "exercise": "ch1.attention_scores",
        "fn": attention_scores__scaled_early,
        "mistake": "divides the scores by sqrt(D) although the exercise asks for unscaled scores",
        "part": "a scale on the scores",
    },
    {
        "exercise": "ch1.attention_scores",
        "fn": attention_scores__feature_gram,
        "mistake": "computes Q^T K, a (D, D) product over the tokens instead of (L, S) over the features",
        "part": "which dims are contracted",
    },
    {
        "exercise": "ch1.attention_scores",
        "fn": attention_scores__bmm_flattened,
        "mistake": "flattens the leading dims for torch.bmm and returns (N*H, L, S) without restoring them",
        "part": "the leading dims of the scores",
    },
]
