"""Wrong learner answers to chapter 5 (transformer), heldout half of the second batch: see
tests/learner_answers/README.md."""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def feed_forward__layer_norm_at_end(x, w1, b1, w2, b2):
    out = torch.relu(x @ w1 + b1) @ w2 + b2
    return F.layer_norm(out, out.shape[-1:])  # normalised, as in the layer diagram


def feed_forward__three_dims_only(x, w1, b1, w2, b2):
    n, length, e = x.shape
    flat = x.view(n * length, e)
    out = torch.relu(flat @ w1 + b1) @ w2 + b2
    return out.view(n, length, e)


def encoder_layer_post_ln__norm_over_tokens(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2,
                                            ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads):
    def layer_norm(h, weight, bias):
        mean = h.mean(1, keepdim=True)
        var = h.var(1, keepdim=True, unbiased=False)
        return (h - mean) / torch.sqrt(var + 1e-5) * weight + bias

    N, L, E = x.shape
    D = E // num_heads
    q = (x @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (x @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (x @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    weights = (q @ k.transpose(-2, -1) / math.sqrt(D)).softmax(-1)
    attn = (weights @ v).transpose(1, 2).reshape(N, L, E) @ w_o
    h = layer_norm(x + attn, ln1_weight, ln1_bias)
    ff = torch.relu(h @ w1 + b1) @ w2 + b2
    return layer_norm(h + ff, ln2_weight, ln2_bias)


def encoder_layer_post_ln__merge_without_transpose(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2,
                                                   ln1_weight, ln1_bias, ln2_weight, ln2_bias,
                                                   num_heads):
    N, L, E = x.shape
    D = E // num_heads
    q = (x @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (x @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (x @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    weights = (q @ k.transpose(-2, -1) / math.sqrt(D)).softmax(-1)
    attn = (weights @ v).reshape(N, L, E) @ w_o
    h = F.layer_norm(x + attn, (E,), ln1_weight, ln1_bias)
    ff = torch.relu(h @ w1 + b1) @ w2 + b2
    return F.layer_norm(h + ff, (E,), ln2_weight, ln2_bias)


def encoder_layer_post_ln__unscaled_scores(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2,
                                           ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads):
    N, L, E = x.shape
    D = E // num_heads
    q = (x @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (x @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (x @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    weights = (q @ k.transpose(-2, -1)).softmax(-1)
    attn = (weights @ v).transpose(1, 2).reshape(N, L, E) @ w_o
    h = F.layer_norm(x + attn, (E,), ln1_weight, ln1_bias)
    ff = torch.relu(h @ w1 + b1) @ w2 + b2
    return F.layer_norm(h + ff, (E,), ln2_weight, ln2_bias)


def encoder_layer_pre_ln__dropout_on_attention_branch(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2,
                                                      ln1_weight, ln1_bias, ln2_weight, ln2_bias,
                                                      num_heads):
    N, L, E = x.shape
    D = E // num_heads
    h = F.layer_norm(x, (E,), ln1_weight, ln1_bias)
    q = (h @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (h @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (h @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    weights = (q @ k.transpose(-2, -1) / math.sqrt(D)).softmax(-1)
    attn = (weights @ v).transpose(1, 2).reshape(N, L, E) @ w_o
    x = x + F.dropout(attn, p=0.1)  # dropout on the residual branch, as in the paper
    h = F.layer_norm(x, (E,), ln2_weight, ln2_bias)
    return x + torch.relu(h @ w1 + b1) @ w2 + b2


def encoder_layer_pre_ln__keys_values_from_raw_stream(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2,
                                                      ln1_weight, ln1_bias, ln2_weight, ln2_bias,
                                                      num_heads):
    N, L, E = x.shape
    D = E // num_heads
    h = F.layer_norm(x, (E,), ln1_weight, ln1_bias)
    q = (h @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (x @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (x @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    weights = (q @ k.transpose(-2, -1) / math.sqrt(D)).softmax(-1)
    x = x + (weights @ v).transpose(1, 2).reshape(N, L, E) @ w_o
    h = F.layer_norm(x, (E,), ln2_weight, ln2_bias)
    return x + torch.relu(h @ w1 + b1) @ w2 + b2


def encoder_layer_pre_ln__no_b1(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2,
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
    return x + torch.relu(h @ w1) @ w2 + b2


ANSWERS = [
    {"exercise": "ch5.feed_forward", "fn": feed_forward__layer_norm_at_end,
     "mistake": "applies a LayerNorm (without parameters) to the block's output",
     "part": "a LayerNorm that does not belong"},
    {"exercise": "ch5.feed_forward", "fn": feed_forward__three_dims_only,
     "mistake": "unpacks x as (N, L, E) and views it flat: only 3-D inputs work",
     "part": "inputs with other than two leading dims"},
    {"exercise": "ch5.encoder_layer_post_ln", "fn": encoder_layer_post_ln__norm_over_tokens,
     "mistake": "hand-written LayerNorm takes the mean and variance over dim 1 (the tokens) instead of E",
     "part": "the LayerNorm's dim"},
    {"exercise": "ch5.encoder_layer_post_ln", "fn": encoder_layer_post_ln__merge_without_transpose,
     "mistake": "merges the heads with a plain reshape, without transposing back, inside the attention",
     "part": "the attention sublayer (merging heads)"},
    {"exercise": "ch5.encoder_layer_post_ln", "fn": encoder_layer_post_ln__unscaled_scores,
     "mistake": "forgets to divide the attention scores by sqrt(D)",
     "part": "the attention's scale"},
    {"exercise": "ch5.encoder_layer_pre_ln", "fn": encoder_layer_pre_ln__dropout_on_attention_branch,
     "mistake": "leaves F.dropout (training=True by default) on the attention branch only, so outputs are random",
     "part": "a dropout on the attention sublayer"},
    {"exercise": "ch5.encoder_layer_pre_ln", "fn": encoder_layer_pre_ln__keys_values_from_raw_stream,
     "mistake": "projects K and V from the raw stream x; only Q reads the normalised copy",
     "part": "the attention sublayer's input (keys and values)"},
    {"exercise": "ch5.encoder_layer_pre_ln", "fn": encoder_layer_pre_ln__no_b1,
     "mistake": "forgets b1 in the feed-forward sublayer",
     "part": "the feed-forward sublayer (b1)"},
]
