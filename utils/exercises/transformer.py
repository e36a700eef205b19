"""Exercises of chapter 5, the full Transformer layer. See :mod:`utils.exercises.definition`.

* ``ch5.feed_forward``: the position-wise feed-forward block, ``relu(x @ w1 + b1) @ w2 + b2``.
* ``ch5.encoder_layer_post_ln`` and ``ch5.encoder_layer_pre_ln``: one encoder layer from plain tensors,
  checked against :class:`utils.layers.TransformerEncoderLayer` with the same weights in eval mode.

Weights use the ``x @ W`` convention (``W`` is ``(in, out)``), the transpose of ``nn.Linear.weight``.
The attention projections have no bias, to keep the parameter list short.

Shape letters: N batch, L length, E model dimension, F feed-forward width, H heads, D = E // H.
"""

from __future__ import annotations

import math
import random

import torch
import torch.nn.functional as F

from utils.exercises.definition import Exercise, Mistake
from utils.layers import TransformerEncoderLayer

__all__ = [
    "ENCODER_POST_LN",
    "ENCODER_PRE_LN",
    "EXERCISES",
    "FEED_FORWARD",
    "encoder_layer_post_ln_reference",
    "encoder_layer_pre_ln_reference",
    "feed_forward_reference",
    "layer_from_tensors",
]

# The bare package "utils" is caught statically in the learner's source and, through the globals check,
# in what the learner's function reaches (that check skips functions defined inside utils, so the wrong
# answers below may call this module's helpers). The ready-made layers are also named one by one, so that
# they are patched out at run time. Not the smaller helpers the reference layer itself calls
# (utils.layers.FeedForward, utils.attention.scaled_dot_product_attention): patching them would break the
# reference while forbid() is active.
_NO_UTILS = (
    "utils",
    "utils.layers.TransformerEncoderLayer",
    "utils.attention.MultiHeadAttention",
)
_NO_TORCH_LAYERS = (
    "torch.nn.functional.scaled_dot_product_attention",
    "torch.nn.functional.multi_head_attention_forward",
    "torch.nn.MultiheadAttention",
    "torch.nn.TransformerEncoderLayer",
)


# --------------------------------------------------------------------------------------------------
# ch5.feed_forward
# --------------------------------------------------------------------------------------------------


def feed_forward_reference(x, w1, b1, w2, b2):
    return torch.relu(x @ w1 + b1) @ w2 + b2  # (..., E) -> (..., F) -> (..., E)


def _ff_no_activation(x, w1, b1, w2, b2):
    return (x @ w1 + b1) @ w2 + b2


def _ff_activation_last(x, w1, b1, w2, b2):
    return torch.relu((x @ w1 + b1) @ w2 + b2)


def _ff_activation_twice(x, w1, b1, w2, b2):
    return torch.relu(torch.relu(x @ w1 + b1) @ w2 + b2)


def _feed_forward_cases(rng: random.Random, gen: torch.Generator) -> list[dict]:
    # (leading shape of x, E, F): a single token, a 2-D input, batch 1, and random shapes
    shapes = [((1, 1), 4, 8), ((5,), 6, 3), ((1, 3), 8, 32)]
    shapes += [((rng.randint(2, 4), rng.randint(2, 7)), E, rng.choice([2, 4]) * E)
               for E in (rng.choice([4, 6, 8]), rng.choice([5, 12]))]
    cases = []
    for lead, E, hidden in shapes:
        cases.append({
            "x": torch.randn(*lead, E, generator=gen),
            "w1": torch.randn(E, hidden, generator=gen) / math.sqrt(E),
            "b1": torch.randn(hidden, generator=gen) * 0.5,
            "w2": torch.randn(hidden, E, generator=gen) / math.sqrt(hidden),
            "b2": torch.randn(E, generator=gen) * 0.5,
        })
    return cases


FEED_FORWARD = Exercise(
    id="ch5.feed_forward",
    reference=feed_forward_reference,
    make_cases=_feed_forward_cases,
    points=1,
    mistakes=(
        Mistake("no_activation", _ff_no_activation,
                "your output is exactly linear in x: apply torch.relu to the hidden layer (x @ w1 + b1) "
                "before multiplying by w2; without it the two linears collapse into one."),
        Mistake("activation_after_second", _ff_activation_last,
                "you applied the ReLU after the second linear instead of after the first: the output must "
                "be able to go negative, so use relu(x @ w1 + b1) @ w2 + b2."),
        Mistake("activation_twice", _ff_activation_twice,
                "your output is never negative: the ReLU belongs only after the first linear, not after "
                "the second (+ b2) as well."),
    ),
    forbidden=("utils", "utils.layers.FeedForward"),
    hint="hidden = relu(x @ w1 + b1) has shape (..., F); then hidden @ w2 + b2 brings it back to (..., E).",
)


# --------------------------------------------------------------------------------------------------
# ch5.encoder_layer_post_ln and ch5.encoder_layer_pre_ln
# --------------------------------------------------------------------------------------------------


def layer_from_tensors(*, w_q, w_k, w_v, w_o, w1, b1, w2, b2, ln1_weight, ln1_bias, ln2_weight, ln2_bias,
                       num_heads: int, norm_first: bool) -> TransformerEncoderLayer:
    """The reference :class:`TransformerEncoderLayer` (eval mode, no dropout) holding these plain tensors.

    The exercise tensors use ``x @ W``; ``nn.Linear`` stores ``W.T``. Attention biases are zero.

    >>> E, H, hidden = 4, 2, 8
    >>> t = dict(w_q=torch.eye(E), w_k=torch.eye(E), w_v=torch.eye(E), w_o=torch.eye(E),
    ...          w1=torch.zeros(E, hidden), b1=torch.zeros(hidden), w2=torch.zeros(hidden, E), b2=torch.zeros(E),
    ...          ln1_weight=torch.ones(E), ln1_bias=torch.zeros(E), ln2_weight=torch.ones(E), ln2_bias=torch.zeros(E))
    >>> layer_from_tensors(**t, num_heads=H, norm_first=True).self_attn.num_heads
    2
    """
    E, hidden = w1.shape
    layer = TransformerEncoderLayer(E, num_heads, hidden, dropout=0.0, norm_first=norm_first)
    layer = layer.to(dtype=w1.dtype).eval()
    attn = layer.self_attn
    with torch.no_grad():
        for linear, weight in ((attn.q_proj, w_q), (attn.k_proj, w_k), (attn.v_proj, w_v), (attn.out_proj, w_o)):
            linear.weight.copy_(weight.T)
            linear.bias.zero_()
        layer.feed_forward.linear1.weight.copy_(w1.T)
        layer.feed_forward.linear1.bias.copy_(b1)
        layer.feed_forward.linear2.weight.copy_(w2.T)
        layer.feed_forward.linear2.bias.copy_(b2)
        for norm, weight, bias in ((layer.norm1, ln1_weight, ln1_bias), (layer.norm2, ln2_weight, ln2_bias)):
            norm.weight.copy_(weight)
            norm.bias.copy_(bias)
    return layer


def _encoder_layer(x, num_heads, tensors, *, norm_first: bool) -> torch.Tensor:
    with torch.no_grad():
        # the explicit attention path: the fast one calls F.scaled_dot_product_attention, which the
        # exercise forbids (and patches while the learner's function runs)
        out, _ = layer_from_tensors(**tensors, num_heads=num_heads, norm_first=norm_first)(
            x, need_weights=True)
        return out


def encoder_layer_post_ln_reference(x, num_heads, **tensors):
    """x (N, L, E) -> (N, L, E): the post-LN reference layer holding ``tensors`` (see :func:`layer_from_tensors`)."""
    return _encoder_layer(x, num_heads, tensors, norm_first=False)


def encoder_layer_pre_ln_reference(x, num_heads, **tensors):
    """x (N, L, E) -> (N, L, E): the pre-LN reference layer holding ``tensors`` (see :func:`layer_from_tensors`)."""
    return _encoder_layer(x, num_heads, tensors, norm_first=True)


def _attention(x, w_q, w_k, w_v, w_o, num_heads, *, scaled=True):
    """Multi-head self-attention without biases, written out (used by the wrong answers only)."""
    N, L, E = x.shape
    D = E // num_heads
    q, k, v = ((x @ w).view(N, L, num_heads, D).transpose(1, 2) for w in (w_q, w_k, w_v))  # (N, H, L, D)
    scores = q @ k.transpose(-2, -1) / (math.sqrt(D) if scaled else 1.0)  # (N, H, L, L)
    heads = scores.softmax(dim=-1) @ v  # (N, H, L, D)
    return heads.transpose(1, 2).reshape(N, L, E) @ w_o  # (N, L, E)


def _variant(order: str, *, scaled: bool = True):
    """A layer with the sublayers wired as ``order`` says (see the Mistakes below)."""

    def layer(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2, ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads):
        E = x.shape[-1]

        def attn(h):
            return _attention(h, w_q, w_k, w_v, w_o, num_heads, scaled=scaled)

        def ffn(h):
            return torch.relu(h @ w1 + b1) @ w2 + b2

        def norm1(h):
            return F.layer_norm(h, (E,), ln1_weight, ln1_bias)

        def norm2(h):
            return F.layer_norm(h, (E,), ln2_weight, ln2_bias)

        if order == "post":  # norm(x + sublayer(x))
            x = norm1(x + attn(x))
            return norm2(x + ffn(x))
        if order == "pre":  # x + sublayer(norm(x))
            x = x + attn(norm1(x))
            return x + ffn(norm2(x))
        if order == "post_residual_after_norm":  # norm(sublayer(x)) + x
            x = norm1(attn(x)) + x
            return norm2(ffn(x)) + x
        if order == "pre_residual_after_norm":  # the residual stream is taken *after* the norm
            h = norm1(x)
            x = h + attn(h)
            h = norm2(x)
            return h + ffn(h)
        if order == "post_no_residual":
            return norm2(ffn(norm1(attn(x))))
        if order == "pre_no_residual":
            return ffn(norm2(attn(norm1(x))))
        raise ValueError(order)

    return layer


def _encoder_cases(rng: random.Random, gen: torch.Generator) -> list[dict]:
    # (N, L, E, H): one token, batch 1, a single head, D = 1, and random shapes
    shapes = [(1, 1, 8, 2), (2, 5, 6, 1), (1, 4, 4, 4)]
    shapes += [(rng.randint(2, 3), rng.randint(2, 7), E, H) for E, H in ((rng.choice([8, 12]), 2), (12, 3))]
    cases = []
    for N, L, E, H in shapes:
        hidden = rng.choice([2, 4]) * E
        case = {"x": torch.randn(N, L, E, generator=gen)}
        for name in ("w_q", "w_k", "w_v", "w_o"):
            case[name] = torch.randn(E, E, generator=gen) / math.sqrt(E) * 1.5
        case["w1"] = torch.randn(E, hidden, generator=gen) / math.sqrt(E)
        case["b1"] = torch.randn(hidden, generator=gen) * 0.3
        case["w2"] = torch.randn(hidden, E, generator=gen) / math.sqrt(hidden)
        case["b2"] = torch.randn(E, generator=gen) * 0.3
        for i in (1, 2):
            case[f"ln{i}_weight"] = 1.0 + 0.3 * torch.randn(E, generator=gen)
            case[f"ln{i}_bias"] = 0.3 * torch.randn(E, generator=gen)
        case["num_heads"] = H
        cases.append(case)
    return cases


_UNSCALED = ("your attention scores are not scaled: divide q @ k.transpose(-2, -1) by sqrt(D), with "
             "D = E // num_heads the head dimension (not E).")

ENCODER_POST_LN = Exercise(
    id="ch5.encoder_layer_post_ln",
    reference=encoder_layer_post_ln_reference,
    make_cases=_encoder_cases,
    points=3,
    mistakes=(
        Mistake("residual_after_norm", _variant("post_residual_after_norm"),
                "you add the residual after the LayerNorm (norm(sublayer(x)) + x); in post-LN the residual "
                "goes inside: x = norm1(x + attention(x)), then norm2(x + ffn(x))."),
        Mistake("no_residual", _variant("post_no_residual"),
                "your layer has no residual connections: add the sublayer's input back before each norm, "
                "x = norm1(x + attention(x)) and x = norm2(x + ffn(x))."),
        Mistake("pre_ln", _variant("pre"),
                "you wrote the pre-LN layer (x + sublayer(norm(x))); this exercise is post-LN, the original "
                "paper's order: x = norm1(x + attention(x)), then norm2(x + ffn(x))."),
        Mistake("unscaled", _variant("post", scaled=False), _UNSCALED),
    ),
    forbidden=_NO_TORCH_LAYERS + _NO_UTILS,
    atol=1e-4,
    hint="attention: project with x @ w_q etc., split into (N, H, L, D), softmax(q k^T / sqrt(D)) v, merge, "
         "@ w_o; then x = norm1(x + attention), x = norm2(x + ffn(x)) with F.layer_norm.",
)

ENCODER_PRE_LN = Exercise(
    id="ch5.encoder_layer_pre_ln",
    reference=encoder_layer_pre_ln_reference,
    make_cases=_encoder_cases,
    points=3,
    mistakes=(
        Mistake("residual_after_norm", _variant("pre_residual_after_norm"),
                "your residual starts from the normalised input (h = norm(x); x = h + sublayer(h)); in "
                "pre-LN the un-normalised x is carried around the sublayer: x = x + sublayer(norm(x))."),
        Mistake("no_residual", _variant("pre_no_residual"),
                "your layer has no residual connections: keep x and add each sublayer's output to it, "
                "x = x + attention(norm1(x)), then x = x + ffn(norm2(x))."),
        Mistake("post_ln", _variant("post"),
                "you wrote the post-LN layer (norm(x + sublayer(x))); this exercise is pre-LN: "
                "x = x + attention(norm1(x)), then x = x + ffn(norm2(x)), with no norm at the end."),
        Mistake("unscaled", _variant("pre", scaled=False), _UNSCALED),
    ),
    forbidden=_NO_TORCH_LAYERS + _NO_UTILS,
    atol=1e-4,
    hint="x = x + attention(norm1(x)), then x = x + ffn(norm2(x)); attention as in chapter 3 with "
         "x @ w_q etc., softmax(q k^T / sqrt(D)) v, merge heads, @ w_o.",
)

EXERCISES: tuple[Exercise, ...] = (FEED_FORWARD, ENCODER_POST_LN, ENCODER_PRE_LN)  # notebook order
