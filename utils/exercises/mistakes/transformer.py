"""Plausible wrong answers to the exercises of chapter 5, the full Transformer layer.

Each function is the ``fn`` of a :class:`~utils.exercises.definition.Mistake` declared, with its
diagnosis, in :mod:`utils.exercises.transformer`: first those of ``ch5.feed_forward``, then
:func:`_wrong_layer`, the encoder layer written out with plain tensors, whose options switch on the
mistakes of ``ch5.encoder_layer_post_ln`` and ``ch5.encoder_layer_pre_ln``.

Weights use the ``x @ W`` convention (``W`` is ``(in, out)``). Shape letters: N batch, L length,
E model dimension, F feed-forward width, H heads, D = E // H.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

# --------------------------------------------------------------------------------------------------
# ch5.feed_forward
# --------------------------------------------------------------------------------------------------


def _feed_forward(x, w1, b1, w2, b2):  # the right block, as utils.exercises.transformer's reference
    return torch.relu(x @ w1 + b1) @ w2 + b2  # (..., E) -> (..., F) -> (..., E)


def _ff(activation=torch.relu, *, bias1=True, bias2=True, bias1_after=False):
    """A feed-forward block with one thing changed."""

    def feed_forward(x, w1, b1, w2, b2):
        hidden = x @ w1 + (b1 if bias1 and not bias1_after else 0.0)  # (..., F)
        hidden = activation(hidden) + (b1 if bias1_after else 0.0)
        return hidden @ w2 + (b2 if bias2 else 0.0)  # (..., E)

    return feed_forward


def _ff_activation_last(x, w1, b1, w2, b2):
    return torch.relu((x @ w1 + b1) @ w2 + b2)


def _ff_activation_twice(x, w1, b1, w2, b2):
    return torch.relu(torch.relu(x @ w1 + b1) @ w2 + b2)


def _ff_residual(x, w1, b1, w2, b2):
    return x + _feed_forward(x, w1, b1, w2, b2)


def _ff_layer_norm(x, w1, b1, w2, b2):
    out = _feed_forward(x, w1, b1, w2, b2)
    return F.layer_norm(out, out.shape[-1:])


def _ff_linear_convention(x, w1, b1, w2, b2):  # F.linear(x, w) is x @ w.T: the nn.Linear convention
    return F.linear(torch.relu(F.linear(x, w1, b1)), w2, b2)


def _ff_float16(x, w1, b1, w2, b2):
    return _feed_forward(x.half(), w1.half(), b1.half(), w2.half(), b2.half()).float()


def _ff_bfloat16(x, w1, b1, w2, b2):
    return _feed_forward(*(t.bfloat16() for t in (x, w1, b1, w2, b2))).float()


def _ff_relu_on_input(x, w1, b1, w2, b2):
    return (torch.relu(x) @ w1 + b1) @ w2 + b2


def _ff_einsum_3d(x, w1, b1, w2, b2):  # written for (N, L, E) only: raises for the (L, E) and (E,) inputs
    hidden = torch.relu(torch.einsum("nle,ef->nlf", x, w1) + b1)  # (N, L, F)
    return torch.einsum("nlf,fe->nle", hidden, w2) + b2  # (N, L, E)


# --------------------------------------------------------------------------------------------------
# ch5.encoder_layer_post_ln and ch5.encoder_layer_pre_ln
# --------------------------------------------------------------------------------------------------


# ``_wrong_layer(norm_first, **bug)`` is the reference layer written out with plain tensors, with the
# named bugs switched on; each Mistake of utils.exercises.transformer switches on one (or a related pair).


def _split(t, N, L, H, D, how):
    if how == "no_transpose":  # (N, L, H, D): attention then runs over the heads, not over the tokens
        return t.view(N, L, H, D)
    if how == "reshape":  # straight to (N, H, L, D): mixes the tokens' features across heads
        return t.reshape(N, H, L, D)
    if how == "DH":  # (N, L, D, H): heads interleaved instead of contiguous blocks of D features
        return t.view(N, L, D, H).permute(0, 3, 1, 2)
    return t.view(N, L, H, D).transpose(1, 2)  # (N, H, L, D)


def _attention(x, w_q, w_k, w_v, w_o, num_heads, bug):
    """Multi-head self-attention without biases, written out, with the attention bugs of ``bug``."""
    N, L, E = x.shape
    H = 1 if bug.get("one_head") else num_heads
    D = E / H if bug.get("float_head_dim") else E // H
    split = bug.get("split", "transpose")
    if bug.get("projections_transposed"):  # x @ W.T everywhere: the nn.Linear / F.linear convention
        w_q, w_k, w_v, w_o = w_q.T, w_k.T, w_v.T, w_o.T
    q, k, v = (_split(x @ w, N, L, H, D, split) for w in (w_q, w_k, w_v))  # (N, H, L, D)
    if bug.get("scores_transposed"):  # k @ q.T: the (L, L) scores with queries and keys swapped
        q, k = k, q
    if bug.get("k_transpose_12"):  # transpose(1, 2), right for (N, L, D) keys, swaps H and L here
        k_t = k.transpose(1, 2)
    else:
        k_t = k if bug.get("k_not_transposed") else k.transpose(-2, -1)
    scores = q @ k_t  # (N, H, L, L)
    scale = bug.get("scale", "sqrt_D")
    scores = {"sqrt_D": scores / math.sqrt(D), "sqrt_E": scores / math.sqrt(E), "D": scores / D,
              "sqrt_H": scores / math.sqrt(num_heads), "times_sqrt_D": scores * math.sqrt(D),
              "sqrt_L": scores / math.sqrt(L), None: scores}[scale]
    if bug.get("float16"):
        weights = scores.half().softmax(dim=-1).float()
    else:
        weights = scores.softmax(dim=bug.get("softmax_dim", -1))  # (N, H, L, L)
    heads = weights @ v  # (N, H, L, D)
    if split == "no_transpose" or bug.get("merge_no_transpose"):
        merged = heads.reshape(N, L, E)
    else:
        merged = heads.transpose(1, 2).reshape(N, L, E)  # (N, L, E)
    if bug.get("no_w_o"):
        return merged
    return merged @ (w_o.T if bug.get("w_o_transposed") else w_o)  # (N, L, E)


def _layer_norm(h, weight, bias, bug):
    E = h.shape[-1]
    kind = bug.get("norm")
    if kind == "no_affine":
        return F.layer_norm(h, (E,))
    if kind == "full_shape":  # normalised over (N, L, E) instead of (E,): raises for the (E,) weight
        return F.layer_norm(h, h.shape, weight, bias)
    if kind == "eps_0":  # no eps, or a negligible one such as BERT's 1e-12
        return F.layer_norm(h, (E,), weight, bias, eps=0.0)
    if kind == "eps_1e-6":  # another library's default
        return F.layer_norm(h, (E,), weight, bias, eps=1e-6)
    if kind == "over_tokens":  # the statistics over L (dim=-2) instead of E
        mean, var = h.mean(dim=-2, keepdim=True), h.var(dim=-2, keepdim=True, unbiased=False)
        return (h - mean) / torch.sqrt(var + 1e-5) * weight + bias
    mean = h.mean(dim=-1, keepdim=True)
    if kind == "unbiased":
        return (h - mean) / torch.sqrt(h.var(dim=-1, keepdim=True) + 1e-5) * weight + bias
    if kind == "std_plus_eps":
        return (h - mean) / (h.std(dim=-1, keepdim=True, unbiased=False) + 1e-5) * weight + bias
    if kind == "rms":
        return h / torch.sqrt(h.pow(2).mean(dim=-1, keepdim=True) + 1e-5) * weight + bias
    return F.layer_norm(h, (E,), weight, bias)


def _wrong_layer(norm_first: bool, **bug):
    """The post-LN or pre-LN layer, written out, with ``bug`` switched on (see the Mistakes)."""

    def layer(x, w_q, w_k, w_v, w_o, w1, b1, w2, b2, ln1_weight, ln1_bias, ln2_weight, ln2_bias, num_heads):
        params1, params2 = (ln1_weight, ln1_bias), (ln2_weight, ln2_bias)
        if bug.get("norms_swapped"):
            params1, params2 = params2, params1
        if bug.get("norm1_twice"):
            params2 = params1

        def attn(h):
            return _attention(h, w_q, w_k, w_v, w_o, num_heads, bug)

        def ffn(h):
            activation = {"relu": torch.relu, "gelu": F.gelu, "none": lambda t: t}[bug.get("activation", "relu")]
            if bug.get("b1_after_relu"):
                return (activation(h @ w1) + b1) @ w2 + b2
            out = activation(h @ w1 + b1) @ w2
            return out if bug.get("no_b2") else out + b2

        def norm1(h):
            return _layer_norm(h, *params1, bug)

        def norm2(h):
            return _layer_norm(h, *params2, bug)

        wiring = bug.get("wiring")
        if wiring == "other_order":
            norm_first_here = not norm_first
        else:
            norm_first_here = norm_first
        if wiring == "norm_the_sublayer":  # x + norm(sublayer(x)), in either exercise
            x = x + norm1(attn(x))
            return x + norm2(ffn(x))
        if not norm_first_here:  # post-LN: norm(x + sublayer(x))
            x1 = norm1((0.0 if wiring in ("no_residual_attn", "no_residual") else x) + attn(x))
            if wiring == "ffn_residual_from_sum":  # the second residual adds x + attn(x), before norm1
                return norm2(x + attn(x) + ffn(x1))
            if wiring == "ffn_residual_from_x":
                return norm2(x + ffn(x1))
            if wiring == "ffn_on_x":
                return norm2(x1 + ffn(x))
            if wiring == "no_norm2":
                return x1 + ffn(x1)
            return norm2((0.0 if wiring in ("no_residual_ffn", "no_residual") else x1) + ffn(x1))
        # pre-LN: x + sublayer(norm(x))
        h = x if wiring == "no_norm1" else norm1(x)
        if wiring == "no_residual":
            return ffn(norm2(attn(h)))
        x1 = (h if wiring in ("residual_from_norm", "residual_from_norm_attn") else x) + attn(h)
        if wiring == "no_residual_attn":
            x1 = attn(h)
        h2 = x1 if wiring == "no_norm2" else norm2(x if wiring == "ffn_from_x" else x1)
        if wiring == "no_residual_ffn":
            return ffn(h2)
        if wiring == "skip_ffn":
            return x1
        out = (h2 if wiring in ("residual_from_norm", "residual_from_norm_ffn") else x1) + ffn(h2)
        if wiring == "final_norm":  # an extra LayerNorm at the end, without parameters
            return F.layer_norm(out, out.shape[-1:])
        if wiring == "final_norm2":  # norm2 applied once more to the output
            return norm2(out)
        return out

    return layer
