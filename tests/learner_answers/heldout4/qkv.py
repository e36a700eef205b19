"""Fourth blind batch (heldout4): wrong answers to chapter 1, written from the notebook only."""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def project_qkv__returns_q_v_k(x, w_q, w_k, w_v):
    q = x @ w_q
    k = x @ w_k
    v = x @ w_v
    return q, v, k


def project_qkv__casts_to_float(x, w_q, w_k, w_v):
    x = x.float()
    return x @ w_q.float(), x @ w_k.float(), x @ w_v.float()


def attention_scores__scaled(q, k):
    return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])


def attention_scores__softmaxed(q, k):
    scores = q @ k.transpose(-2, -1)
    return scores.softmax(dim=-1)


ANSWERS = [
    {"exercise": "ch1.project_qkv", "fn": project_qkv__returns_q_v_k,
     "mistake": "returns (Q, V, K): keys and values swapped in the returned tuple",
     "part": "return order"},
    {"exercise": "ch1.project_qkv", "fn": project_qkv__casts_to_float,
     "mistake": "casts x and the weights to float32: float64 inputs give float32 outputs",
     "part": "dtype"},
    {"exercise": "ch1.attention_scores", "fn": attention_scores__scaled,
     "mistake": "divides by sqrt(D): the exercise asks for the unscaled scores",
     "part": "scaling"},
    {"exercise": "ch1.attention_scores", "fn": attention_scores__softmaxed,
     "mistake": "applies softmax over the keys: returns weights instead of raw scores",
     "part": "softmax"},
]
