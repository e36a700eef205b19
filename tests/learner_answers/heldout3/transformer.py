"""Wrong answers to chapter 5, batch 3, heldout3 half: written blind, from the notebook only."""

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


def feed_forward__gelu(x, w1, b1, w2, b2):
    return F.gelu(x @ w1 + b1) @ w2 + b2


def feed_forward__relu_after_both(x, w1, b1, w2, b2):
    h = torch.relu(x @ w1 + b1)
    return torch.relu(h @ w2 + b2)


def feed_forward__bias_after_relu(x, w1, b1, w2, b2):
    return (torch.relu(x @ w1) + b1) @ w2 + b2


def encoder_layer_post_ln__norm_over_tokens(
    x, w_q, w_k, w_v, w_o, w1, b1, w2, b2, ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads
):
    def layer_norm(h, weight, bias):
        mean = h.mean(dim=1, keepdim=True)
        var = h.var(dim=1, keepdim=True, unbiased=False)
        return (h - mean) / torch.sqrt(var + 1e-5) * weight + bias

    h = layer_norm(x + _heads_attention(x, w_q, w_k, w_v, w_o, num_heads), ln1_weight, ln1_bias)
    ff = torch.relu(h @ w1 + b1) @ w2 + b2
    return layer_norm(h + ff, ln2_weight, ln2_bias)


def encoder_layer_post_ln__norm_parameters_swapped(
    x, w_q, w_k, w_v, w_o, w1, b1, w2, b2, ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads
):
    e = x.shape[-1]
    h = F.layer_norm(x + _heads_attention(x, w_q, w_k, w_v, w_o, num_heads), (e,), ln2_weight, ln2_bias)
    ff = torch.relu(h @ w1 + b1) @ w2 + b2
    return F.layer_norm(h + ff, (e,), ln1_weight, ln1_bias)


def encoder_layer_post_ln__one_big_head(
    x, w_q, w_k, w_v, w_o, w1, b1, w2, b2, ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads
):
    e = x.shape[-1]
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(e), dim=-1)
    attn = weights @ v @ w_o
    h = F.layer_norm(x + attn, (e,), ln1_weight, ln1_bias)
    ff = torch.relu(h @ w1 + b1) @ w2 + b2
    return F.layer_norm(h + ff, (e,), ln2_weight, ln2_bias)


def encoder_layer_post_ln__causal_mask_added(
    x, w_q, w_k, w_v, w_o, w1, b1, w2, b2, ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads
):
    n, length, e = x.shape
    d = e // num_heads

    def split(t):
        return t.view(n, length, num_heads, d).transpose(1, 2)

    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)
    causal = torch.tril(torch.ones(length, length, dtype=torch.bool))
    weights = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
    attn = (weights @ v).transpose(1, 2).reshape(n, length, e) @ w_o
    h = F.layer_norm(x + attn, (e,), ln1_weight, ln1_bias)
    ff = torch.relu(h @ w1 + b1) @ w2 + b2
    return F.layer_norm(h + ff, (e,), ln2_weight, ln2_bias)


def encoder_layer_pre_ln__final_layer_norm(
    x, w_q, w_k, w_v, w_o, w1, b1, w2, b2, ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads
):
    e = x.shape[-1]
    x = x + _heads_attention(F.layer_norm(x, (e,), ln1_weight, ln1_bias), w_q, w_k, w_v, w_o, num_heads)
    h = F.layer_norm(x, (e,), ln2_weight, ln2_bias)
    x = x + torch.relu(h @ w1 + b1) @ w2 + b2
    return F.layer_norm(x, (e,), ln2_weight, ln2_bias)


def encoder_layer_pre_ln__gelu_in_ffn(
    x, w_q, w_k, w_v, w_o, w1, b1, w2, b2, ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads
):
    e = x.shape[-1]
    x = x + _heads_attention(F.layer_norm(x, (e,), ln1_weight, ln1_bias), w_q, w_k, w_v, w_o, num_heads)
    h = F.layer_norm(x, (e,), ln2_weight, ln2_bias)
    return x + F.gelu(h @ w1 + b1) @ w2 + b2


def encoder_layer_pre_ln__merge_without_transpose(
    x, w_q, w_k, w_v, w_o, w1, b1, w2, b2, ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads
):
    n, length, e = x.shape
    d = e // num_heads
    h = F.layer_norm(x, (e,), ln1_weight, ln1_bias)
    q = (h @ w_q).view(n, length, num_heads, d).transpose(1, 2)
    k = (h @ w_k).view(n, length, num_heads, d).transpose(1, 2)
    v = (h @ w_v).view(n, length, num_heads, d).transpose(1, 2)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d), dim=-1)
    x = x + (weights @ v).reshape(n, length, e) @ w_o
    h = F.layer_norm(x, (e,), ln2_weight, ln2_bias)
    return x + torch.relu(h @ w1 + b1) @ w2 + b2


def encoder_layer_pre_ln__weight_and_bias_swapped(
    x, w_q, w_k, w_v, w_o, w1, b1, w2, b2, ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads
):
    e = x.shape[-1]
    x = x + _heads_attention(F.layer_norm(x, (e,), ln1_bias, ln1_weight), w_q, w_k, w_v, w_o, num_heads)
    h = F.layer_norm(x, (e,), ln2_bias, ln2_weight)
    return x + torch.relu(h @ w1 + b1) @ w2 + b2


ANSWERS = [
    {
        "exercise": "ch5.feed_forward",
        "fn": feed_forward__gelu,
        "mistake": "uses GELU instead of ReLU between the two linear maps",
        "part": "the activation",
    },
    {
        "exercise": "ch5.feed_forward",
        "fn": feed_forward__relu_after_both,
        "mistake": "applies a ReLU after the second linear map as well",
        "part": "an extra activation at the output",
    },
    {
        "exercise": "ch5.feed_forward",
        "fn": feed_forward__bias_after_relu,
        "mistake": "adds b1 after the ReLU instead of before it",
        "part": "where the first bias is added",
    },
    {
        "exercise": "ch5.encoder_layer_post_ln",
        "fn": encoder_layer_post_ln__norm_over_tokens,
        "mistake": "a hand-written LayerNorm that takes mean and variance over the tokens (dim 1) instead of E",
        "part": "the LayerNorm's axis",
    },
    {
        "exercise": "ch5.encoder_layer_post_ln",
        "fn": encoder_layer_post_ln__norm_parameters_swapped,
        "mistake": "uses ln2's weight and bias in the first LayerNorm and ln1's in the second",
        "part": "which LayerNorm parameters go where",
    },
    {
        "exercise": "ch5.encoder_layer_post_ln",
        "fn": encoder_layer_post_ln__one_big_head,
        "mistake": "ignores num_heads and computes one head over all E features, scaled by sqrt(E)",
        "part": "the split into heads in the attention sublayer",
    },
    {
        "exercise": "ch5.encoder_layer_post_ln",
        "fn": encoder_layer_post_ln__causal_mask_added,
        "mistake": "applies a causal mask in the encoder's self-attention, where no mask belongs",
        "part": "a mask in the attention sublayer",
    },
    {
        "exercise": "ch5.encoder_layer_pre_ln",
        "fn": encoder_layer_pre_ln__final_layer_norm,
        "mistake": "adds a LayerNorm (with ln2's parameters) at the end of the layer",
        "part": "an extra LayerNorm on the output",
    },
    {
        "exercise": "ch5.encoder_layer_pre_ln",
        "fn": encoder_layer_pre_ln__gelu_in_ffn,
        "mistake": "uses GELU instead of ReLU in the feed-forward sublayer",
        "part": "the feed-forward sublayer's activation",
    },
    {
        "exercise": "ch5.encoder_layer_pre_ln",
        "fn": encoder_layer_pre_ln__merge_without_transpose,
        "mistake": "merges the heads with reshape but without transposing back, scrambling tokens and heads",
        "part": "the merge of the heads in the attention sublayer",
    },
    {
        "exercise": "ch5.encoder_layer_pre_ln",
        "fn": encoder_layer_pre_ln__weight_and_bias_swapped,
        "mistake": "passes each LayerNorm's bias as its weight and its weight as its bias",
        "part": "the LayerNorm's weight and bias",
    },
]
