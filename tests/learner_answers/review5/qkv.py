"""Review batch 5 (review5): the wrong answers to chapter 1 that issue 36's learner reviewers tried and whose
diagnoses were tuned (tests/test_diagnoses_round4.py)."""
import math  # noqa: F401
import warnings

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def project_qkv__linear_inside(x, w_q, w_k, w_v):
    out = []
    for w in (w_q, w_k, w_v):
        lin = torch.nn.Linear(w.shape[0], w.shape[1]).to(x.dtype)
        with torch.no_grad():
            lin.weight.copy_(w.T)
        out.append(lin(x).detach())
    return tuple(out)


def project_qkv__linear_seeded_bias(x, w_q, w_k, w_v):
    out = []
    for w in (w_q, w_k, w_v):
        lin = torch.nn.Linear(w.shape[0], w.shape[1]).to(x.dtype)
        torch.manual_seed(0)
        lin.reset_parameters()
        with torch.no_grad():
            lin.weight.copy_(w.T)
        out.append(lin(x))
    return tuple(out)


def project_qkv__w_q_for_all(x, w_q, w_k, w_v):
    return x @ w_q, x @ w_q, x @ w_q


def attention_scores__permute_for_3d(q, k):
    with warnings.catch_warnings():  # torch warns about .T on a 4-D tensor before it raises
        warnings.simplefilter("ignore", UserWarning)
        return q @ k.permute(0, 2, 1) if k.dim() == 3 else q @ k.T


def attention_scores__product_summed(q, k):
    return (q * k).sum(-1)


ANSWERS = [
    {"exercise": "ch1.project_qkv", "fn": project_qkv__linear_inside,
     "mistake": "a fresh nn.Linear built inside the function: a new random bias on every call",
     "part": "projection (bias, randomness)"},
    {"exercise": "ch1.project_qkv", "fn": project_qkv__linear_seeded_bias,
     "mistake": "nn.Linear with the weights copied but its (seeded) bias kept", "part": "projection (bias)"},
    {"exercise": "ch1.project_qkv", "fn": project_qkv__w_q_for_all,
     "mistake": "w_q used for Q, K and V", "part": "key and value projections"},
    {"exercise": "ch1.attention_scores", "fn": attention_scores__permute_for_3d,
     "mistake": "k.permute(0, 2, 1) assumes exactly 3 dims (and k.T otherwise): fails for (N, H, S, D)",
     "part": "key transpose"},
    {"exercise": "ch1.attention_scores", "fn": attention_scores__product_summed,
     "mistake": "(q * k).sum(-1): one score per position instead of every (query, key) pair", "part": "scores"},
]
