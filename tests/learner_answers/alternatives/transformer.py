"""Correct answers to chapter 5, written in other styles than the reference."""
import math

import torch
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F


def feed_forward__clamp(x, w1, b1, w2, b2):
    return torch.matmul(torch.clamp(torch.matmul(x, w1) + b1, min=0), w2) + b2


def feed_forward__einsum_addmm(x, w1, b1, w2, b2):
    h = torch.einsum("...e,ef->...f", x, w1).add(b1).relu()
    return torch.einsum("...f,fe->...e", h, w2) + b2


def encoder_layer_post_ln__hand_written(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2,
                                        ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads):
    def layer_norm(h, weight, bias):
        mean = h.mean(dim=-1, keepdim=True)
        var = ((h - mean) ** 2).mean(dim=-1, keepdim=True)
        return (h - mean) / torch.sqrt(var + 1e-5) * weight + bias

    def attention(h):
        N, L, E = h.shape
        D = E // num_heads
        q = torch.einsum("nle,ef->nlf", h, w_q).reshape(N, L, num_heads, D)
        k = torch.einsum("nle,ef->nlf", h, w_k).reshape(N, L, num_heads, D)
        v = torch.einsum("nle,ef->nlf", h, w_v).reshape(N, L, num_heads, D)
        scores = torch.einsum("nlhd,nshd->nhls", q, k) / math.sqrt(D)
        top = scores.amax(-1, keepdim=True)
        e = torch.exp(scores - top)
        weights = e / e.sum(-1, keepdim=True)
        return torch.einsum("nhls,nshd->nlhd", weights, v).reshape(N, L, E) @ w_o

    h = layer_norm(x + attention(x), ln1_weight, ln1_bias)
    ff = torch.clamp(h @ w1 + b1, min=0) @ w2 + b2
    return layer_norm(h + ff, ln2_weight, ln2_bias)


def encoder_layer_pre_ln__sublayer_functions(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2,
                                             ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads):
    E = x.shape[-1]
    D = E // num_heads

    def attention(h):
        heads = []
        q, k, v = h @ w_q, h @ w_k, h @ w_v
        for i in range(num_heads):
            cols = slice(i * D, (i + 1) * D)
            weights = torch.softmax(q[..., cols] @ k[..., cols].transpose(-2, -1) / math.sqrt(D), dim=-1)
            heads.append(weights @ v[..., cols])
        return torch.cat(heads, dim=-1) @ w_o

    def feed_forward(h):
        return F.relu(h @ w1 + b1) @ w2 + b2

    x = x + attention(F.layer_norm(x, (E,), ln1_weight, ln1_bias, eps=1e-5))
    return x + feed_forward(F.layer_norm(x, (E,), ln2_weight, ln2_bias, eps=1e-5))


ANSWERS = [
    {"exercise": "ch5.feed_forward", "fn": feed_forward__clamp, "correct": True},
    {"exercise": "ch5.feed_forward", "fn": feed_forward__einsum_addmm, "correct": True},
    {"exercise": "ch5.encoder_layer_post_ln", "fn": encoder_layer_post_ln__hand_written, "correct": True},
    {"exercise": "ch5.encoder_layer_pre_ln", "fn": encoder_layer_pre_ln__sublayer_functions, "correct": True},
]
