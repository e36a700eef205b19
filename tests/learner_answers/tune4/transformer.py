"""Fourth blind batch (tune4): wrong answers to chapter 5, written from the notebook only."""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def feed_forward__relu_on_output(x, w1, b1, w2, b2):
    hidden = torch.relu(x @ w1 + b1)
    return torch.relu(hidden @ w2 + b2)


def encoder_layer_post_ln__norm_over_sequence_too(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2,
                                                  ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads):
    def norm(h, weight, bias):
        mean = h.mean(dim=(-2, -1), keepdim=True)
        var = h.var(dim=(-2, -1), keepdim=True, unbiased=False)
        return (h - mean) / torch.sqrt(var + 1e-5) * weight + bias

    def attention(h):
        N, L, E = h.shape
        D = E // num_heads
        q = (h @ w_q).view(N, L, num_heads, D).transpose(1, 2)
        k = (h @ w_k).view(N, L, num_heads, D).transpose(1, 2)
        v = (h @ w_v).view(N, L, num_heads, D).transpose(1, 2)
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(D), dim=-1)
        return (weights @ v).transpose(1, 2).reshape(N, L, E) @ w_o

    x = norm(x + attention(x), ln1_weight, ln1_bias)
    x = norm(x + torch.relu(x @ w1 + b1) @ w2 + b2, ln2_weight, ln2_bias)
    return x


def encoder_layer_pre_ln__final_norm(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2,
                                     ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads):
    N, L, E = x.shape
    D = E // num_heads
    h = F.layer_norm(x, (E,), ln1_weight, ln1_bias)
    q = (h @ w_q).view(N, L, num_heads, D).transpose(1, 2)
    k = (h @ w_k).view(N, L, num_heads, D).transpose(1, 2)
    v = (h @ w_v).view(N, L, num_heads, D).transpose(1, 2)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(D), dim=-1)
    x = x + (weights @ v).transpose(1, 2).reshape(N, L, E) @ w_o
    h = F.layer_norm(x, (E,), ln2_weight, ln2_bias)
    x = x + torch.relu(h @ w1 + b1) @ w2 + b2
    return F.layer_norm(x, (E,))


ANSWERS = [
    {"exercise": "ch5.feed_forward", "fn": feed_forward__relu_on_output,
     "mistake": "applies relu after the second linear too",
     "part": "activation"},
    {"exercise": "ch5.encoder_layer_post_ln", "fn": encoder_layer_post_ln__norm_over_sequence_too,
     "mistake": "hand-written LayerNorm averages over (L, E) instead of the last dim E only",
     "part": "LayerNorm"},
    {"exercise": "ch5.encoder_layer_pre_ln", "fn": encoder_layer_pre_ln__final_norm,
     "mistake": "adds a final (unweighted) LayerNorm at the end of the pre-LN layer",
     "part": "final LayerNorm"},
]
