"""Fourth blind batch (heldout4): wrong answers to chapter 5, written from the notebook only."""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def feed_forward__gelu(x, w1, b1, w2, b2):
    return F.gelu(x @ w1 + b1) @ w2 + b2


def encoder_layer_post_ln__second_sublayer_pre_ln(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2,
                                                  ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads):
    N, L, E = x.shape
    D = E // num_heads
    q = (x @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (x @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (x @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(D), dim=-1)
    attn = (weights @ v).transpose(1, 2).reshape(N, L, E) @ w_o
    x = F.layer_norm(x + attn, (E,), ln1_weight, ln1_bias)
    h = F.layer_norm(x, (E,), ln2_weight, ln2_bias)
    x = x + torch.relu(h @ w1 + b1) @ w2 + b2
    return x


def encoder_layer_post_ln__ln1_twice(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2,
                                     ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads):
    N, L, E = x.shape
    D = E // num_heads
    q = (x @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (x @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (x @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(D), dim=-1)
    attn = (weights @ v).transpose(1, 2).reshape(N, L, E) @ w_o
    x = F.layer_norm(x + attn, (E,), ln1_weight, ln1_bias)
    ff = torch.relu(x @ w1 + b1) @ w2 + b2
    x = F.layer_norm(x + ff, (E,), ln1_weight, ln1_bias)
    return x


def encoder_layer_pre_ln__ffn_reads_raw_stream(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2,
                                               ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads):
    N, L, E = x.shape
    D = E // num_heads
    h = F.layer_norm(x, (E,), ln1_weight, ln1_bias)
    q = (h @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (h @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (h @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(D), dim=-1)
    x = x + (weights @ v).transpose(1, 2).reshape(N, L, E) @ w_o
    x = x + torch.relu(x @ w1 + b1) @ w2 + b2
    return x


def encoder_layer_pre_ln__softmax_over_queries(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2,
                                               ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads):
    N, L, E = x.shape
    D = E // num_heads
    h = F.layer_norm(x, (E,), ln1_weight, ln1_bias)
    q = (h @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (h @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (h @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(D), dim=-2)
    x = x + (weights @ v).transpose(1, 2).reshape(N, L, E) @ w_o
    h = F.layer_norm(x, (E,), ln2_weight, ln2_bias)
    x = x + torch.relu(h @ w1 + b1) @ w2 + b2
    return x


ANSWERS = [
    {"exercise": "ch5.feed_forward", "fn": feed_forward__gelu,
     "mistake": "uses gelu instead of relu",
     "part": "activation"},
    {"exercise": "ch5.encoder_layer_post_ln", "fn": encoder_layer_post_ln__second_sublayer_pre_ln,
     "mistake": "feed-forward sublayer written pre-LN (x + ff(norm2(x))) in a post-LN layer",
     "part": "feed-forward sublayer"},
    {"exercise": "ch5.encoder_layer_post_ln", "fn": encoder_layer_post_ln__ln1_twice,
     "mistake": "second LayerNorm uses ln1_weight/ln1_bias instead of ln2's (copy-paste)",
     "part": "second LayerNorm"},
    {"exercise": "ch5.encoder_layer_pre_ln", "fn": encoder_layer_pre_ln__ffn_reads_raw_stream,
     "mistake": "feed-forward reads the un-normalised stream: norm2 is never applied",
     "part": "second LayerNorm"},
    {"exercise": "ch5.encoder_layer_pre_ln", "fn": encoder_layer_pre_ln__softmax_over_queries,
     "mistake": "attention softmax over the query axis (dim=-2) instead of the keys",
     "part": "attention softmax"},
]
