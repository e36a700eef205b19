"""Wrong answers to chapter 1, batch 3, heldout3 half: written blind, from the notebook only."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F  # noqa: F401


def project_qkv__weights_transposed(x, w_q, w_k, w_v):
    # "nn.Linear stores its weight transposed", so transpose ours too
    return x @ w_q.T, x @ w_k.T, x @ w_v.T


def project_qkv__linear_keeps_bias(x, w_q, w_k, w_v):
    outs = []
    for w in (w_q, w_k, w_v):
        lin = nn.Linear(w.shape[0], w.shape[1]).to(x.dtype)
        with torch.no_grad():
            lin.weight.copy_(w.T)
        outs.append(lin(x).detach())
    return tuple(outs)


def project_qkv__divides_by_sqrt_e(x, w_q, w_k, w_v):
    scale = math.sqrt(x.shape[-1])
    return x @ w_q / scale, x @ w_k / scale, x @ w_v / scale


def project_qkv__rows_into_new_tensor(x, w_q, w_k, w_v):
    outs = []
    for w in (w_q, w_k, w_v):
        out = torch.empty(*x.shape[:-1], w.shape[1])
        for i in range(x.shape[-2]):
            out[..., i, :] = x[..., i, :] @ w
        outs.append(out)
    return tuple(outs)


def attention_scores__transpose_first_two(q, k):
    return q @ k.transpose(0, 1)


def attention_scores__keys_by_queries(q, k):
    return k @ q.transpose(-2, -1)


def attention_scores__elementwise_sum(q, k):
    return (q * k).sum(dim=-1)


ANSWERS = [
    {
        "exercise": "ch1.project_qkv",
        "fn": project_qkv__weights_transposed,
        "mistake": "transposes the weights as if they were nn.Linear weights, computing x @ w.T",
        "part": "the orientation of the weights",
    },
    {
        "exercise": "ch1.project_qkv",
        "fn": project_qkv__linear_keeps_bias,
        "mistake": "copies the weights into fresh nn.Linear layers but keeps their random bias (no bias=False)",
        "part": "a bias added to Q, K and V",
    },
    {
        "exercise": "ch1.project_qkv",
        "fn": project_qkv__divides_by_sqrt_e,
        "mistake": "divides the projections by sqrt(E), copying the 1/sqrt(E) of the notebook's weight init",
        "part": "a scale on Q, K and V",
    },
    {
        "exercise": "ch1.project_qkv",
        "fn": project_qkv__rows_into_new_tensor,
        "mistake": "fills a torch.empty made without dtype=, so float64 inputs give float32 outputs",
        "part": "the dtype of the outputs",
    },
    {
        "exercise": "ch1.attention_scores",
        "fn": attention_scores__transpose_first_two,
        "mistake": "transposes dims 0 and 1 of k, right only for an unbatched (L, D) input",
        "part": "which dims of k are transposed",
    },
    {
        "exercise": "ch1.attention_scores",
        "fn": attention_scores__keys_by_queries,
        "mistake": "computes K Q^T, so the result is (S, L): rows are keys and columns queries",
        "part": "the order of q and k in the product",
    },
    {
        "exercise": "ch1.attention_scores",
        "fn": attention_scores__elementwise_sum,
        "mistake": "multiplies q and k elementwise and sums the features, giving only the diagonal q_i . k_i",
        "part": "the pairing of queries with keys",
    },
]
