"""Wrong learner answers to chapter 5 (transformer), tune half of the second batch: see
tests/learner_answers/README.md."""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def feed_forward__leaky_relu(x, w1, b1, w2, b2):
    return F.leaky_relu(x @ w1 + b1) @ w2 + b2


def feed_forward__clamp_max(x, w1, b1, w2, b2):
    h = (x @ w1 + b1).clamp(max=0)  # ReLU: cut at 0
    return h @ w2 + b2


def encoder_layer_post_ln__ffn_residual_from_attention(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2,
                                                       ln1_weight, ln1_bias, ln2_weight, ln2_bias,
                                                       num_heads):
    N, L, E = x.shape
    D = E // num_heads
    q = (x @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (x @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (x @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    weights = (q @ k.transpose(-2, -1) / math.sqrt(D)).softmax(-1)
    a = (weights @ v).transpose(1, 2).reshape(N, L, E) @ w_o
    h = F.layer_norm(x + a, (E,), ln1_weight, ln1_bias)
    f = torch.relu(h @ w1 + b1) @ w2 + b2
    return F.layer_norm(a + f, (E,), ln2_weight, ln2_bias)


def encoder_layer_post_ln__ln_bias_mixed(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2,
                                         ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads):
    N, L, E = x.shape
    D = E // num_heads
    q = (x @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (x @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (x @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    weights = (q @ k.transpose(-2, -1) / math.sqrt(D)).softmax(-1)
    attn = (weights @ v).transpose(1, 2).reshape(N, L, E) @ w_o
    h = F.layer_norm(x + attn, (E,), ln1_weight, ln2_bias)
    ff = torch.relu(h @ w1 + b1) @ w2 + b2
    return F.layer_norm(h + ff, (E,), ln2_weight, ln2_bias)


def encoder_layer_post_ln__values_from_w_o(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2,
                                           ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads):
    N, L, E = x.shape
    D = E // num_heads
    q = (x @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (x @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (x @ w_o).view(N, L, num_heads, D).transpose(1, 2)
    weights = (q @ k.transpose(-2, -1) / math.sqrt(D)).softmax(-1)
    attn = (weights @ v).transpose(1, 2).reshape(N, L, E) @ w_o
    h = F.layer_norm(x + attn, (E,), ln1_weight, ln1_bias)
    ff = torch.relu(h @ w1 + b1) @ w2 + b2
    return F.layer_norm(h + ff, (E,), ln2_weight, ln2_bias)


def encoder_layer_pre_ln__eps_after_division(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2,
                                             ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads):
    def layer_norm(h, weight, bias):
        mean = h.mean(-1, keepdim=True)
        var = ((h - mean) ** 2).mean(-1, keepdim=True)
        return ((h - mean) / torch.sqrt(var) + 1e-5) * weight + bias

    N, L, E = x.shape
    D = E // num_heads
    h = layer_norm(x, ln1_weight, ln1_bias)
    q = (h @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (h @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (h @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    weights = (q @ k.transpose(-2, -1) / math.sqrt(D)).softmax(-1)
    x = x + (weights @ v).transpose(1, 2).reshape(N, L, E) @ w_o
    h = layer_norm(x, ln2_weight, ln2_bias)
    return x + torch.relu(h @ w1 + b1) @ w2 + b2


def encoder_layer_pre_ln__heads_and_width_swapped(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2,
                                                  ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads):
    N, L, E = x.shape
    D = E // num_heads
    h = F.layer_norm(x, (E,), ln1_weight, ln1_bias)
    q = (h @ w_q).view(N, L, D, num_heads).transpose(1, 2)  # (N, D, L, H)
    k = (h @ w_k).view(N, L, D, num_heads).transpose(1, 2)
    v = (h @ w_v).view(N, L, D, num_heads).transpose(1, 2)
    weights = (q @ k.transpose(-2, -1) / math.sqrt(D)).softmax(-1)
    x = x + (weights @ v).transpose(1, 2).reshape(N, L, E) @ w_o
    h = F.layer_norm(x, (E,), ln2_weight, ln2_bias)
    return x + torch.relu(h @ w1 + b1) @ w2 + b2


ANSWERS = [
    {"exercise": "ch5.feed_forward", "fn": feed_forward__leaky_relu,
     "mistake": "uses leaky_relu (slope 0.01) instead of ReLU",
     "part": "the activation"},
    {"exercise": "ch5.feed_forward", "fn": feed_forward__clamp_max,
     "mistake": "clamps with max=0 instead of min=0, keeping the negative part (min(h, 0))",
     "part": "the activation"},
    {"exercise": "ch5.encoder_layer_post_ln", "fn": encoder_layer_post_ln__ffn_residual_from_attention,
     "mistake": "the feed-forward residual adds the attention output a instead of the normalised stream h",
     "part": "the feed-forward residual"},
    {"exercise": "ch5.encoder_layer_post_ln", "fn": encoder_layer_post_ln__ln_bias_mixed,
     "mistake": "the first LayerNorm uses ln2_bias instead of ln1_bias (two arguments of the same shape)",
     "part": "the first LayerNorm's bias"},
    {"exercise": "ch5.encoder_layer_post_ln", "fn": encoder_layer_post_ln__values_from_w_o,
     "mistake": "a copy-paste slip: the values are projected with w_o instead of w_v",
     "part": "the value projection"},
    {"exercise": "ch5.encoder_layer_pre_ln", "fn": encoder_layer_pre_ln__eps_after_division,
     "mistake": "hand-written LayerNorm adds eps after the division ((h - mean)/sqrt(var) + eps), not inside the sqrt",
     "part": "the LayerNorm's eps"},
    {"exercise": "ch5.encoder_layer_pre_ln", "fn": encoder_layer_pre_ln__heads_and_width_swapped,
     "mistake": "views as (N, L, D, H), not (N, L, H, D): D heads of width H (the same when H = D)",
     "part": "the split into heads"},
]
