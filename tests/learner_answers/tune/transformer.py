"""Wrong learner answers to chapter 5 (transformer), tune half: see tests/learner_answers/README.md."""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def feed_forward__relu_on_output_too(x, w1, b1, w2, b2):
    h = torch.relu(x @ w1 + b1)
    return torch.relu(h @ w2 + b2)


def feed_forward__bias_after_relu(x, w1, b1, w2, b2):
    h = torch.relu(x @ w1) + b1
    return h @ w2 + b2


def feed_forward__missing_second_bias(x, w1, b1, w2, b2):
    return torch.relu(x @ w1 + b1) @ w2


def encoder_layer_post_ln__no_attention_residual(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2,
                                                 ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads):
    N, L, E = x.shape
    D = E // num_heads
    q = (x @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (x @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (x @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    weights = (q @ k.transpose(-2, -1) / math.sqrt(D)).softmax(-1)
    attn = (weights @ v).transpose(1, 2).reshape(N, L, E) @ w_o
    h = F.layer_norm(attn, (E,), ln1_weight, ln1_bias)
    ff = torch.relu(h @ w1 + b1) @ w2 + b2
    return F.layer_norm(h + ff, (E,), ln2_weight, ln2_bias)


def encoder_layer_post_ln__gelu_in_ffn(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2,
                                       ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads):
    N, L, E = x.shape
    D = E // num_heads
    q = (x @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (x @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (x @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    weights = (q @ k.transpose(-2, -1) / math.sqrt(D)).softmax(-1)
    attn = (weights @ v).transpose(1, 2).reshape(N, L, E) @ w_o
    h = F.layer_norm(x + attn, (E,), ln1_weight, ln1_bias)
    ff = F.gelu(h @ w1 + b1) @ w2 + b2
    return F.layer_norm(h + ff, (E,), ln2_weight, ln2_bias)


def encoder_layer_post_ln__layernorms_swapped(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2,
                                              ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads):
    N, L, E = x.shape
    D = E // num_heads
    q = (x @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (x @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (x @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    weights = (q @ k.transpose(-2, -1) / math.sqrt(D)).softmax(-1)
    attn = (weights @ v).transpose(1, 2).reshape(N, L, E) @ w_o
    h = F.layer_norm(x + attn, (E,), ln2_weight, ln2_bias)
    ff = torch.relu(h @ w1 + b1) @ w2 + b2
    return F.layer_norm(h + ff, (E,), ln1_weight, ln1_bias)


def encoder_layer_pre_ln__eps_outside_sqrt(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2,
                                           ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads):
    def layer_norm(h, weight, bias):
        mean = h.mean(-1, keepdim=True)
        std = h.std(-1, keepdim=True, unbiased=False)
        return (h - mean) / (std + 1e-5) * weight + bias

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


def encoder_layer_pre_ln__no_relu(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2,
                                  ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads):
    N, L, E = x.shape
    D = E // num_heads
    h = F.layer_norm(x, (E,), ln1_weight, ln1_bias)
    q = (h @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (h @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (h @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    weights = (q @ k.transpose(-2, -1) / math.sqrt(D)).softmax(-1)
    x = x + (weights @ v).transpose(1, 2).reshape(N, L, E) @ w_o
    h = F.layer_norm(x, (E,), ln2_weight, ln2_bias)
    return x + (h @ w1 + b1) @ w2 + b2


def encoder_layer_post_ln__pre_ln_written(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2,
                                          ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads):
    N, L, E = x.shape
    D = E // num_heads
    h = F.layer_norm(x, (E,), ln1_weight, ln1_bias)
    q = (h @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (h @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (h @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    weights = (q @ k.transpose(-2, -1) / math.sqrt(D)).softmax(-1)
    x = x + (weights @ v).transpose(1, 2).reshape(N, L, E) @ w_o
    h = F.layer_norm(x, (E,), ln2_weight, ln2_bias)
    return x + torch.relu(h @ w1 + b1) @ w2 + b2


def encoder_layer_pre_ln__dropout_in_ffn(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2,
                                         ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads):
    N, L, E = x.shape
    D = E // num_heads
    h = F.layer_norm(x, (E,), ln1_weight, ln1_bias)
    q = (h @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (h @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (h @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    weights = (q @ k.transpose(-2, -1) / math.sqrt(D)).softmax(-1)
    x = x + (weights @ v).transpose(1, 2).reshape(N, L, E) @ w_o
    h = F.layer_norm(x, (E,), ln2_weight, ln2_bias)
    return x + F.dropout(torch.relu(h @ w1 + b1) @ w2 + b2, p=0.1)


def encoder_layer_pre_ln__ln1_without_affine(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2,
                                             ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads):
    N, L, E = x.shape
    D = E // num_heads
    h = F.layer_norm(x, (E,))
    q = (h @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (h @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (h @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    weights = (q @ k.transpose(-2, -1) / math.sqrt(D)).softmax(-1)
    x = x + (weights @ v).transpose(1, 2).reshape(N, L, E) @ w_o
    h = F.layer_norm(x, (E,), ln2_weight, ln2_bias)
    return x + torch.relu(h @ w1 + b1) @ w2 + b2


ANSWERS = [
    {"exercise": "ch5.feed_forward", "fn": feed_forward__relu_on_output_too,
     "mistake": "applies a second ReLU after the output layer, so the output is never negative",
     "part": "an extra activation on the output"},
    {"exercise": "ch5.feed_forward", "fn": feed_forward__bias_after_relu,
     "mistake": "adds b1 after the ReLU instead of before it",
     "part": "the first bias (after the activation)"},
    {"exercise": "ch5.feed_forward", "fn": feed_forward__missing_second_bias,
     "mistake": "forgets to add b2 at the end",
     "part": "the second bias"},
    {"exercise": "ch5.encoder_layer_post_ln", "fn": encoder_layer_post_ln__no_attention_residual,
     "mistake": "forgets the residual around attention: LayerNorm(attn(x)) instead of LayerNorm(x + attn(x))",
     "part": "the residual of the attention sublayer"},
    {"exercise": "ch5.encoder_layer_post_ln", "fn": encoder_layer_post_ln__gelu_in_ffn,
     "mistake": "uses GELU instead of ReLU in the feed-forward block",
     "part": "the feed-forward sublayer's activation"},
    {"exercise": "ch5.encoder_layer_post_ln", "fn": encoder_layer_post_ln__layernorms_swapped,
     "mistake": "uses ln2's parameters after attention and ln1's after the feed-forward block",
     "part": "the two LayerNorms' parameters swapped"},
    {"exercise": "ch5.encoder_layer_pre_ln", "fn": encoder_layer_pre_ln__eps_outside_sqrt,
     "mistake": "hand-written LayerNorm divides by (std + eps) instead of sqrt(var + eps)",
     "part": "the LayerNorm eps placement (both LayerNorms)"},
    {"exercise": "ch5.encoder_layer_pre_ln", "fn": encoder_layer_pre_ln__no_relu,
     "mistake": "forgets the ReLU in the feed-forward block (two linear maps in a row)",
     "part": "the feed-forward sublayer's activation"},
    {"exercise": "ch5.encoder_layer_post_ln", "fn": encoder_layer_post_ln__pre_ln_written,
     "mistake": "writes a pre-LN layer (normalise before each sublayer) instead of post-LN",
     "part": "where the LayerNorms go (pre-LN instead of post-LN)"},
    {"exercise": "ch5.encoder_layer_pre_ln", "fn": encoder_layer_pre_ln__dropout_in_ffn,
     "mistake": "leaves a dropout (training mode) on the feed-forward output, so the output is random",
     "part": "dropout left active in the feed-forward sublayer"},
    {"exercise": "ch5.encoder_layer_pre_ln", "fn": encoder_layer_pre_ln__ln1_without_affine,
     "mistake": "calls F.layer_norm for the first LayerNorm without ln1_weight and ln1_bias",
     "part": "the first LayerNorm's weight and bias"},
]
