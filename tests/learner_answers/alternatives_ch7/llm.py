"""Correct answers to chapter 7's exercises in other styles than the hints (alternatives_ch7).

Each was checked against PyTorch's F.rms_norm / F.scaled_dot_product_attention(enable_gqa=True) or a
hand-written version on 2-D to 4-D, float32 and float64 inputs.
"""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn as nn  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def rms_norm__sum_over_count(x, weight, eps=1e-6):
    E = x.shape[-1]
    mean_square = (x * x).sum(dim=-1, keepdim=True) / E
    return x / torch.sqrt(mean_square + eps) * weight


def rms_norm__einsum(x, weight, eps=1e-6):
    mean_square = torch.einsum("...e,...e->...", x, x).unsqueeze(-1) / x.shape[-1]
    scale = (mean_square + eps) ** -0.5
    return torch.mul(x * scale, weight)


def rotate_half_rope__halves_by_hand(x, positions, base=10000.0):
    D = x.shape[-1]
    half = D // 2
    exponents = torch.arange(half, dtype=torch.float64) * 2 / D
    angle = positions.to(torch.float64)[:, None] / base ** exponents  # (L, D/2)
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def rotate_half_rope__complex(x, positions, base=10000.0):
    D = x.shape[-1]
    half = D // 2
    inv_freq = 1.0 / base ** (torch.arange(0, D, 2, dtype=torch.float64) / D)
    turn = torch.polar(torch.ones(len(positions), half, dtype=torch.float64),
                       torch.outer(positions.to(torch.float64), inv_freq))  # (L, D/2), e^{i p θ}
    pairs = torch.complex(x[..., :half].to(torch.float64), x[..., half:].to(torch.float64))  # x_i + i x_{i+D/2}
    turned = pairs * turn
    return torch.cat((turned.real, turned.imag), dim=-1).to(x.dtype)


def grouped_query_attention__grouped_einsum(query, key, value, is_causal=False):
    N, H, L, D = query.shape
    H_kv, S = key.shape[1], key.shape[2]
    G = H // H_kv
    q = query.reshape(N, H_kv, G, L, D)  # query head h = j * G + g sits in group j
    scores = torch.einsum("njgld,njsd->njgls", q, key) / math.sqrt(D)
    if is_causal:
        keep = torch.ones(L, S, dtype=torch.bool).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    weights = scores.softmax(dim=-1)
    out = torch.einsum("njgls,njsv->njglv", weights, value)
    return out.reshape(N, H, L, value.shape[-1])


def grouped_query_attention__head_loop(query, key, value, is_causal=False):
    H, H_kv = query.shape[1], key.shape[1]
    G = H // H_kv
    L, S = query.shape[2], key.shape[2]
    outs = []
    for h in range(H):
        k, v = key[:, h // G], value[:, h // G]
        scores = torch.matmul(query[:, h], k.mT) * query.shape[-1] ** -0.5
        if is_causal:
            scores = scores + torch.full((L, S), float("-inf"), dtype=scores.dtype).triu(1)
        scores = scores - scores.amax(dim=-1, keepdim=True)
        weights = scores.exp() / scores.exp().sum(dim=-1, keepdim=True)
        outs.append(weights @ v)
    return torch.stack(outs, dim=1)


def sink_window_mask__loops(L, window, sinks):
    mask = torch.zeros(L, L, dtype=torch.bool)
    for i in range(L):
        for j in range(i + 1):
            if i - j < window or j < sinks:
                mask[i, j] = True
    return mask


def sink_window_mask__tril_triu(L, window, sinks):
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    band = causal.triu(diagonal=1 - window)
    sink_columns = (torch.arange(L) < sinks).expand(L, L)
    return band | (causal & sink_columns)


ANSWERS = [
    {"exercise": "ch7.rms_norm", "fn": rms_norm__sum_over_count, "correct": True},
    {"exercise": "ch7.rms_norm", "fn": rms_norm__einsum, "correct": True},
    {"exercise": "ch7.rotate_half_rope", "fn": rotate_half_rope__halves_by_hand, "correct": True},
    {"exercise": "ch7.rotate_half_rope", "fn": rotate_half_rope__complex, "correct": True},
    {"exercise": "ch7.grouped_query_attention", "fn": grouped_query_attention__grouped_einsum, "correct": True},
    {"exercise": "ch7.grouped_query_attention", "fn": grouped_query_attention__head_loop, "correct": True},
    {"exercise": "ch7.sink_window_mask", "fn": sink_window_mask__loops, "correct": True},
    {"exercise": "ch7.sink_window_mask", "fn": sink_window_mask__tril_triu, "correct": True},
]
