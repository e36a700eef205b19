"""Wrong learner answers to chapter 5 (transformer), heldout half: see tests/learner_answers/README.md."""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def feed_forward__gelu(x, w1, b1, w2, b2):
    return F.gelu(x @ w1 + b1) @ w2 + b2


def feed_forward__dropout_left_on(x, w1, b1, w2, b2):
    h = torch.relu(x @ w1 + b1)
    h = F.dropout(h, p=0.1)
    return h @ w2 + b2


def encoder_layer_post_ln__unbiased_variance(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2,
                                             ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads):
    def layer_norm(h, weight, bias):
        mean = h.mean(-1, keepdim=True)
        var = h.var(-1, keepdim=True)
        return (h - mean) / torch.sqrt(var + 1e-5) * weight + bias

    N, L, E = x.shape
    D = E // num_heads
    q = (x @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (x @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (x @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    weights = (q @ k.transpose(-2, -1) / math.sqrt(D)).softmax(-1)
    attn = (weights @ v).transpose(1, 2).reshape(N, L, E) @ w_o
    x = layer_norm(x + attn, ln1_weight, ln1_bias)
    ff = torch.relu(x @ w1 + b1) @ w2 + b2
    return layer_norm(x + ff, ln2_weight, ln2_bias)


def encoder_layer_post_ln__dropout_on_weights(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2,
                                              ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads):
    N, L, E = x.shape
    D = E // num_heads
    q = (x @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (x @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (x @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    weights = (q @ k.transpose(-2, -1) / math.sqrt(D)).softmax(-1)
    weights = F.dropout(weights, p=0.1)
    attn = (weights @ v).transpose(1, 2).reshape(N, L, E) @ w_o
    h = F.layer_norm(x + attn, (E,), ln1_weight, ln1_bias)
    ff = torch.relu(h @ w1 + b1) @ w2 + b2
    return F.layer_norm(h + ff, (E,), ln2_weight, ln2_bias)


def encoder_layer_post_ln__ffn_residual_from_input(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2,
                                                   ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads):
    N, L, E = x.shape
    D = E // num_heads
    q = (x @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (x @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (x @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    weights = (q @ k.transpose(-2, -1) / math.sqrt(D)).softmax(-1)
    attn = (weights @ v).transpose(1, 2).reshape(N, L, E) @ w_o
    h = F.layer_norm(x + attn, (E,), ln1_weight, ln1_bias)
    ff = torch.relu(h @ w1 + b1) @ w2 + b2
    return F.layer_norm(x + ff, (E,), ln2_weight, ln2_bias)


def encoder_layer_pre_ln__final_layernorm(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2,
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
    x = x + torch.relu(h @ w1 + b1) @ w2 + b2
    return F.layer_norm(x, (E,), ln2_weight, ln2_bias)


def encoder_layer_pre_ln__causal_mask_added(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2,
                                            ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads):
    N, L, E = x.shape
    D = E // num_heads
    h = F.layer_norm(x, (E,), ln1_weight, ln1_bias)
    q = (h @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (h @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (h @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)
    causal = torch.tril(torch.ones(L, L, dtype=torch.bool))
    scores = scores.masked_fill(~causal, float("-inf"))
    weights = scores.softmax(-1)
    x = x + (weights @ v).transpose(1, 2).reshape(N, L, E) @ w_o
    h = F.layer_norm(x, (E,), ln2_weight, ln2_bias)
    return x + torch.relu(h @ w1 + b1) @ w2 + b2


def encoder_layer_pre_ln__scale_sqrt_e(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2,
                                       ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads):
    N, L, E = x.shape
    D = E // num_heads
    h = F.layer_norm(x, (E,), ln1_weight, ln1_bias)
    q = (h @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (h @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (h @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    weights = (q @ k.transpose(-2, -1) / math.sqrt(E)).softmax(-1)
    x = x + (weights @ v).transpose(1, 2).reshape(N, L, E) @ w_o
    h = F.layer_norm(x, (E,), ln2_weight, ln2_bias)
    return x + torch.relu(h @ w1 + b1) @ w2 + b2


def encoder_layer_pre_ln__ffn_input_not_normalised(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2,
                                                   ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads):
    N, L, E = x.shape
    D = E // num_heads
    h = F.layer_norm(x, (E,), ln1_weight, ln1_bias)
    q = (h @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (h @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (h @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    weights = (q @ k.transpose(-2, -1) / math.sqrt(D)).softmax(-1)
    x = x + (weights @ v).transpose(1, 2).reshape(N, L, E) @ w_o
    return x + torch.relu(x @ w1 + b1) @ w2 + b2


def feed_forward__linear_convention(x, w1, b1, w2, b2):
    return F.linear(F.relu(F.linear(x, w1, b1)), w2, b2)


def feed_forward__residual_added(x, w1, b1, w2, b2):
    return x + torch.relu(x @ w1 + b1) @ w2 + b2


def encoder_layer_post_ln__eps_1e6(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2,
                                   ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads):
    N, L, E = x.shape
    D = E // num_heads
    q = (x @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (x @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (x @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    weights = (q @ k.transpose(-2, -1) / math.sqrt(D)).softmax(-1)
    attn = (weights @ v).transpose(1, 2).reshape(N, L, E) @ w_o
    h = F.layer_norm(x + attn, (E,), ln1_weight, ln1_bias, eps=1e-6)
    ff = torch.relu(h @ w1 + b1) @ w2 + b2
    return F.layer_norm(h + ff, (E,), ln2_weight, ln2_bias, eps=1e-6)


def encoder_layer_post_ln__no_output_projection(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2,
                                                ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads):
    N, L, E = x.shape
    D = E // num_heads
    q = (x @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (x @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (x @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    weights = (q @ k.transpose(-2, -1) / math.sqrt(D)).softmax(-1)
    attn = (weights @ v).transpose(1, 2).reshape(N, L, E)
    h = F.layer_norm(x + attn, (E,), ln1_weight, ln1_bias)
    ff = torch.relu(h @ w1 + b1) @ w2 + b2
    return F.layer_norm(h + ff, (E,), ln2_weight, ln2_bias)


ANSWERS = [
    {"exercise": "ch5.feed_forward", "fn": feed_forward__gelu,
     "mistake": "uses GELU instead of ReLU between the two linear maps",
     "part": "the activation (GELU instead of ReLU)"},
    {"exercise": "ch5.feed_forward", "fn": feed_forward__dropout_left_on,
     "mistake": "leaves a dropout (p = 0.1, training mode) on the hidden layer, so outputs are random",
     "part": "dropout left active in the hidden layer"},
    {"exercise": "ch5.encoder_layer_post_ln", "fn": encoder_layer_post_ln__unbiased_variance,
     "mistake": "hand-written LayerNorm with h.var(), the unbiased variance, instead of the biased one",
     "part": "the LayerNorm variance (both LayerNorms)"},
    {"exercise": "ch5.encoder_layer_post_ln", "fn": encoder_layer_post_ln__dropout_on_weights,
     "mistake": "applies dropout (training mode) to the attention weights, so the output is random",
     "part": "dropout left active in the attention sublayer"},
    {"exercise": "ch5.encoder_layer_post_ln", "fn": encoder_layer_post_ln__ffn_residual_from_input,
     "mistake": "the feed-forward residual adds the layer's original input x instead of the post-attention h",
     "part": "the residual of the feed-forward sublayer"},
    {"exercise": "ch5.encoder_layer_pre_ln", "fn": encoder_layer_pre_ln__final_layernorm,
     "mistake": "applies a LayerNorm (with ln2's parameters) again at the end of the pre-LN layer",
     "part": "an extra final LayerNorm"},
    {"exercise": "ch5.encoder_layer_pre_ln", "fn": encoder_layer_pre_ln__causal_mask_added,
     "mistake": "adds a causal mask to the encoder's self-attention, which has none",
     "part": "a mask in the attention sublayer that does not belong"},
    {"exercise": "ch5.encoder_layer_pre_ln", "fn": encoder_layer_pre_ln__scale_sqrt_e,
     "mistake": "scales the attention scores by 1/sqrt(E) instead of 1/sqrt(D)",
     "part": "the attention sublayer's scale"},
    {"exercise": "ch5.encoder_layer_pre_ln", "fn": encoder_layer_pre_ln__ffn_input_not_normalised,
     "mistake": "feeds the raw stream to the feed-forward block, skipping the second LayerNorm",
     "part": "the feed-forward sublayer's input LayerNorm"},
    {"exercise": "ch5.feed_forward", "fn": feed_forward__linear_convention,
     "mistake": "uses F.linear with the given weights, which computes x @ w.T (nn.Linear's storage convention)",
     "part": "the weights transposed"},
    {"exercise": "ch5.feed_forward", "fn": feed_forward__residual_added,
     "mistake": "adds the input x back (a residual), which belongs to the layer, not to this block",
     "part": "a residual that does not belong"},
    {"exercise": "ch5.encoder_layer_post_ln", "fn": encoder_layer_post_ln__eps_1e6,
     "mistake": "passes eps=1e-6 to F.layer_norm (a common default elsewhere) instead of 1e-5",
     "part": "the LayerNorm eps"},
    {"exercise": "ch5.encoder_layer_post_ln", "fn": encoder_layer_post_ln__no_output_projection,
     "mistake": "forgets the attention's output projection w_o",
     "part": "the attention sublayer's output projection"},
]
