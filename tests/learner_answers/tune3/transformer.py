"""Wrong answers to chapter 5, batch 3, tune3 half: written blind, from the notebook only."""

import math

import torch
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F


def _heads_attention(h, w_q, w_k, w_v, w_o, num_heads):
    n, length, e = h.shape
    d = e // num_heads

    def split(t):
        return t.view(n, length, num_heads, d).transpose(1, 2)

    q, k, v = split(h @ w_q), split(h @ w_k), split(h @ w_v)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d), dim=-1)
    return (weights @ v).transpose(1, 2).reshape(n, length, e) @ w_o


def feed_forward__dropout_left_on(x, w1, b1, w2, b2):
    h = F.dropout(F.relu(x @ w1 + b1), p=0.1)
    return h @ w2 + b2


def feed_forward__mm_for_matrices(x, w1, b1, w2, b2):
    h = torch.relu(torch.mm(x, w1) + b1)
    return torch.mm(h, w2) + b2


def encoder_layer_post_ln__no_residual_around_ffn(
    x, w_q, w_k, w_v, w_o, w1, b1, w2, b2, ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads
):
    e = x.shape[-1]
    h = F.layer_norm(x + _heads_attention(x, w_q, w_k, w_v, w_o, num_heads), (e,), ln1_weight, ln1_bias)
    ff = torch.relu(h @ w1 + b1) @ w2 + b2
    return F.layer_norm(ff, (e,), ln2_weight, ln2_bias)


def encoder_layer_post_ln__eps_outside_sqrt(
    x, w_q, w_k, w_v, w_o, w1, b1, w2, b2, ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads
):
    def layer_norm(h, weight, bias):
        mean = h.mean(dim=-1, keepdim=True)
        std = ((h - mean) ** 2).mean(dim=-1, keepdim=True).sqrt()
        return (h - mean) / (std + 1e-5) * weight + bias

    h = layer_norm(x + _heads_attention(x, w_q, w_k, w_v, w_o, num_heads), ln1_weight, ln1_bias)
    ff = torch.relu(h @ w1 + b1) @ w2 + b2
    return layer_norm(h + ff, ln2_weight, ln2_bias)


def encoder_layer_post_ln__unbiased_variance(
    x, w_q, w_k, w_v, w_o, w1, b1, w2, b2, ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads
):
    def layer_norm(h, weight, bias):
        mean = h.mean(dim=-1, keepdim=True)
        var = h.var(dim=-1, keepdim=True)
        return (h - mean) / torch.sqrt(var + 1e-5) * weight + bias

    h = layer_norm(x + _heads_attention(x, w_q, w_k, w_v, w_o, num_heads), ln1_weight, ln1_bias)
    ff = torch.relu(h @ w1 + b1) @ w2 + b2
    return layer_norm(h + ff, ln2_weight, ln2_bias)


def encoder_layer_pre_ln__ffn_reads_raw_stream(
    x, w_q, w_k, w_v, w_o, w1, b1, w2, b2, ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads
):
    e = x.shape[-1]
    x = x + _heads_attention(F.layer_norm(x, (e,), ln1_weight, ln1_bias), w_q, w_k, w_v, w_o, num_heads)
    return x + torch.relu(x @ w1 + b1) @ w2 + b2


def encoder_layer_pre_ln__no_output_projection(
    x, w_q, w_k, w_v, w_o, w1, b1, w2, b2, ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads
):
    n, length, e = x.shape
    d = e // num_heads
    h = F.layer_norm(x, (e,), ln1_weight, ln1_bias)
    q = (h @ w_q).view(n, length, num_heads, d).transpose(1, 2)
    k = (h @ w_k).view(n, length, num_heads, d).transpose(1, 2)
    v = (h @ w_v).view(n, length, num_heads, d).transpose(1, 2)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d), dim=-1)
    x = x + (weights @ v).transpose(1, 2).reshape(n, length, e)
    h = F.layer_norm(x, (e,), ln2_weight, ln2_bias)
    return x + torch.relu(h @ w1 + b1) @ w2 + b2


def encoder_layer_pre_ln__scale_by_d(
    x, w_q, w_k, w_v, w_o, w1, b1, w2, b2, ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads
):
    n, length, e = x.shape
    d = e // num_heads
    h = F.layer_norm(x, (e,), ln1_weight, ln1_bias)
    q = (h @ w_q).view(n, length, num_heads, d).transpose(1, 2)
    k = (h @ w_k).view(n, length, num_heads, d).transpose(1, 2)
    v = (h @ w_v).view(n, length, num_heads, d).transpose(1, 2)
    weights = torch.softmax(q @ k.transpose(-2, -1) / d, dim=-1)
    x = x + (weights @ v).transpose(1, 2).reshape(n, length, e) @ w_o
    h = F.layer_norm(x, (e,), ln2_weight, ln2_bias)
    return x + torch.relu(h @ w1 + b1) @ w2 + b2


ANSWERS = [
    {
        "exercise": "ch5.feed_forward",
        "fn": feed_forward__dropout_left_on,
        "mistake": "applies F.dropout(p=0.1) to the hidden layer, which is on by default (training=True)",
        "part": "dropout in the hidden layer",
    },
    {
        "exercise": "ch5.feed_forward",
        "fn": feed_forward__mm_for_matrices,
        "mistake": "uses torch.mm, which only takes 2-D x, so (N, L, E) and (E,) inputs raise",
        "part": "the leading dims of x",
    },
    {
        "exercise": "ch5.encoder_layer_post_ln",
        "fn": encoder_layer_post_ln__no_residual_around_ffn,
        "mistake": "forgets the residual around the feed-forward sublayer: LayerNorm(FFN(h)) instead of "
        "LayerNorm(h + FFN(h))",
        "part": "the feed-forward sublayer's residual",
    },
    {
        "exercise": "ch5.encoder_layer_post_ln",
        "fn": encoder_layer_post_ln__eps_outside_sqrt,
        "mistake": "a hand-written LayerNorm that adds eps to the standard deviation instead of inside the sqrt",
        "part": "the LayerNorm's eps",
    },
    {
        "exercise": "ch5.encoder_layer_post_ln",
        "fn": encoder_layer_post_ln__unbiased_variance,
        "mistake": "a hand-written LayerNorm with torch.var's default unbiased variance",
        "part": "the LayerNorm's variance",
    },
    {
        "exercise": "ch5.encoder_layer_pre_ln",
        "fn": encoder_layer_pre_ln__ffn_reads_raw_stream,
        "mistake": "the feed-forward sublayer reads the stream without normalising it (ln2 never used)",
        "part": "the feed-forward sublayer's input",
    },
    {
        "exercise": "ch5.encoder_layer_pre_ln",
        "fn": encoder_layer_pre_ln__no_output_projection,
        "mistake": "forgets the output projection w_o after merging the heads",
        "part": "the attention sublayer's output projection",
    },
    {
        "exercise": "ch5.encoder_layer_pre_ln",
        "fn": encoder_layer_pre_ln__scale_by_d,
        "mistake": "divides the scores by D instead of sqrt(D)",
        "part": "the scale of the attention scores",
    },
]
