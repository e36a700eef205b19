"""A correct answer to each exercise of chapter 5, in another style than the reference (batch 3)."""

import math

import torch
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F


def feed_forward__functional_linear(x, w1, b1, w2, b2):
    return F.linear(F.linear(x, w1.T, b1).clamp_min(0), w2.T, b2)


def encoder_layer_post_ln__bmm_over_heads(
    x, w_q, w_k, w_v, w_o, w1, b1, w2, b2, ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads
):
    n, length, e = x.shape
    d = e // num_heads

    def to_heads(t):  # (N, L, E) -> (N * H, L, D)
        return t.reshape(n, length, num_heads, d).permute(0, 2, 1, 3).reshape(n * num_heads, length, d)

    q, k, v = to_heads(x @ w_q), to_heads(x @ w_k), to_heads(x @ w_v)
    weights = torch.softmax(torch.bmm(q, k.transpose(1, 2)) / math.sqrt(d), dim=-1)
    heads = torch.bmm(weights, v).reshape(n, num_heads, length, d).permute(0, 2, 1, 3).reshape(n, length, e)
    h = F.layer_norm(x + heads @ w_o, (e,), ln1_weight, ln1_bias, eps=1e-5)
    ff = F.relu(h @ w1 + b1) @ w2 + b2
    return F.layer_norm(h + ff, (e,), ln2_weight, ln2_bias, eps=1e-5)


def encoder_layer_pre_ln__var_mean_norm(
    x, w_q, w_k, w_v, w_o, w1, b1, w2, b2, ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads
):
    n, length, e = x.shape
    d = e // num_heads

    def norm(t, weight, bias):
        var, mean = torch.var_mean(t, dim=-1, keepdim=True, correction=0)
        return (t - mean) * torch.rsqrt(var + 1e-5) * weight + bias

    h = norm(x, ln1_weight, ln1_bias)
    q, k, v = ((h @ w).view(n, length, num_heads, d).permute(0, 2, 1, 3) for w in (w_q, w_k, w_v))
    scores = q @ k.permute(0, 1, 3, 2) / math.sqrt(d)
    scores = scores - scores.amax(dim=-1, keepdim=True)
    weights = scores.exp() / scores.exp().sum(dim=-1, keepdim=True)
    x = x + (weights @ v).permute(0, 2, 1, 3).reshape(n, length, e) @ w_o
    h = norm(x, ln2_weight, ln2_bias)
    return x + torch.relu(h @ w1 + b1) @ w2 + b2


ANSWERS = [
    {"exercise": "ch5.feed_forward", "fn": feed_forward__functional_linear, "correct": True},
    {"exercise": "ch5.encoder_layer_post_ln", "fn": encoder_layer_post_ln__bmm_over_heads, "correct": True},
    {"exercise": "ch5.encoder_layer_pre_ln", "fn": encoder_layer_pre_ln__var_mean_norm, "correct": True},
]
