"""Exercises of chapter 5, the full Transformer layer. See :mod:`utils.exercises.definition`.

* ``ch5.feed_forward``: the position-wise feed-forward block, ``relu(x @ w1 + b1) @ w2 + b2``.
* ``ch5.encoder_layer_post_ln`` and ``ch5.encoder_layer_pre_ln``: one encoder layer from plain tensors,
  checked against :class:`utils.layers.TransformerEncoderLayer` with the same weights in eval mode.

Weights use the ``x @ W`` convention (``W`` is ``(in, out)``), the transpose of ``nn.Linear.weight``.
The attention projections have no bias, to keep the parameter list short.

Shape letters: N batch, L length, E model dimension, F feed-forward width, H heads, D = E // H.
The wrong answers themselves are in :mod:`utils.exercises.mistakes.transformer`.
"""

from __future__ import annotations

import math
import random

import torch
import torch.nn.functional as F

from utils.exercises.definition import TORCH_ATTENTION, Exercise, Mistake
from utils.exercises.edges import transformer as edges
from utils.exercises.mistakes import transformer as wrong
from utils.exercises.probing.transformer import FEED_FORWARD_PROBES, layer_probes
from utils.layers import TransformerEncoderLayer

__all__ = ["ENCODER_POST_LN", "ENCODER_PRE_LN", "EXERCISES", "FEED_FORWARD", "encoder_layer_post_ln_reference",
           "encoder_layer_pre_ln_reference", "feed_forward_reference", "layer_from_tensors"]

# "utils" is caught statically in the learner's source and, through the globals check, in what their function
# reaches (that check skips functions defined in utils, so the wrong answers may call course helpers). The ready-made
# layers are also named, so that they are patched out at run time; not the helpers the reference layer calls
# (utils.layers.FeedForward, utils.attention.scaled_dot_product_attention): that would break it under forbid().
_NO_UTILS = ("utils", "utils.layers.TransformerEncoderLayer", "utils.attention.MultiHeadAttention")
_NO_TORCH_LAYERS = TORCH_ATTENTION  # the encoder layers included


# -------------------- ch5.feed_forward --------------------------------------------------------------------------------


def feed_forward_reference(x, w1, b1, w2, b2):
    return torch.relu(x @ w1 + b1) @ w2 + b2  # (..., E) -> (..., F) -> (..., E)


def _feed_forward_cases(rng: random.Random, gen: torch.Generator) -> list[dict]:
    # (leading shape of x, E, F, scale of x): a single token, a 2-D input, batch 1, a large input whose
    # hidden pre-activations go well above 6 (so that a capped ReLU such as ReLU6 fails), and random shapes
    shapes = [((1, 1), 4, 8, 1.0), ((5,), 6, 3, 1.0), ((1, 3), 8, 32, 1.0), ((2, 3), 6, 24, 10.0)]
    shapes += [((rng.randint(2, 4), rng.randint(2, 7)), E, rng.choice([2, 4]) * E, 1.0)
               for E in (rng.choice([4, 6, 8]), rng.choice([5, 12]))] + [((), 6, 12, 1.0)]  # x (E,)
    cases = []
    for lead, E, hidden, scale in shapes:
        cases.append({
            "x": scale * torch.randn(*lead, E, generator=gen),
            "w1": torch.randn(E, hidden, generator=gen) / math.sqrt(E),
            "b1": torch.randn(hidden, generator=gen) * 0.5,
            "w2": torch.randn(hidden, E, generator=gen) / math.sqrt(hidden),
            "b2": torch.randn(E, generator=gen) * 0.5,
        })
    return cases


_SEE_FFN = "see the FFN formula in '1 · The two sublayers'"

FEED_FORWARD = Exercise(
    id="ch5.feed_forward",
    reference=feed_forward_reference,
    make_cases=_feed_forward_cases,
    make_edge_cases=edges.feed_forward_edges, probes=FEED_FORWARD_PROBES,
    points=1,
    mistakes=(
        Mistake("no_activation", wrong._ff(lambda h: h),
                "your output is exactly linear in x: apply torch.relu to the hidden layer (x @ w1 + b1) "
                "before multiplying by w2; without it the two linears collapse into one."),
        Mistake("activation_after_second", wrong._ff_activation_last,
                "you applied the ReLU after the second linear instead of after the first: the output must "
                "be able to go negative, so the ReLU acts on the hidden layer of width F only."),
        Mistake("activation_twice", wrong._ff_activation_twice,
                "your output is never negative: the ReLU belongs only after the first linear, not after "
                "the second (+ b2) as well."),
        Mistake("no_b2", wrong._ff(bias2=False),
                f"you left out b2: the second linear map has its own bias, added after @ w2 ({_SEE_FFN})."),
        Mistake("no_b1", wrong._ff(bias1=False),
                f"you left out b1: the first linear map adds b1 before the ReLU ({_SEE_FFN})."),
        Mistake("no_biases", wrong._ff(bias1=False, bias2=False),
                f"you left out both biases: b1 is added before the ReLU and b2 after @ w2 ({_SEE_FFN})."),
        Mistake("b1_after_relu", wrong._ff(bias1_after=True),
                f"you add b1 after the ReLU: it belongs inside, relu(x @ w1 + b1) ({_SEE_FFN})."),
        Mistake("gelu", wrong._ff(F.gelu),
                f"you used GELU (as GPT-2 and BERT do); this block is the paper's, with ReLU ({_SEE_FFN})."),
        Mistake("leaky_relu", wrong._ff(F.leaky_relu),
                f"you used leaky ReLU: negative hidden values must become exactly 0, use torch.relu ({_SEE_FFN})."),
        Mistake("relu6", wrong._ff(lambda h: h.clamp(0, 6)),
                "your hidden values are capped at 6 (ReLU6, h.clamp(0, 6)): ReLU has no upper limit, "
                f"max(0, h); use torch.relu. The case with the large input shows it ({_SEE_FFN})."),
        Mistake("sigmoid", wrong._ff(torch.sigmoid),
                f"you used a sigmoid: the activation is ReLU, max(0, h) ({_SEE_FFN})."),
        Mistake("residual", wrong._ff_residual,
                "you added x to the output: the block itself has no residual connection; the encoder layer "
                "adds it around the block (exercise 2)."),
        Mistake("layer_norm", wrong._ff_layer_norm,
                "you normalised the output: the block has no LayerNorm; the encoder layer adds it around the "
                "block (exercise 2)."),
        Mistake("linear_convention", wrong._ff_linear_convention,
                "you multiplied by the transposed weights (x @ w1.T, which is also what F.linear(x, w1) "
                "computes: nn.Linear stores weights as (out, in)); these weights are (in, out), so write "
                "x @ w1 + b1, or F.linear(x, w1.T, b1)."),
        Mistake("float16", wrong._ff_float16,
                "you computed in float16 and cast back: float16 keeps about 3 decimal digits, so the result "
                "is off by about 1e-3; compute in the inputs' dtype."),
        Mistake("bfloat16", wrong._ff_bfloat16,
                "you computed in bfloat16 and cast back: bfloat16 keeps about 2 decimal digits, so the result "
                "is off by about 1e-2; compute in the inputs' dtype."),
        Mistake("relu_on_input", wrong._ff_relu_on_input,
                f"you applied the ReLU to x, before the first linear map: it acts on the hidden layer, "
                f"relu(x @ w1 + b1), of width F ({_SEE_FFN})."),
        Mistake("three_dims_only", wrong._ff_einsum_3d,
                "your function works only for a 3-D x (N, L, E); x may have any number of leading "
                "dimensions, (L, E) or (N, L, E): use x @ w1, which broadcasts, or an einsum with '...'."),
        Mistake("silu", wrong._ff(F.silu),
                f"you used SiLU (as LLaMA's feed-forward does); this block is the paper's, with ReLU ({_SEE_FFN})."),
        Mistake("gelu_tanh", wrong._ff(lambda h: F.gelu(h, approximate="tanh")),
                f"you used GELU (its tanh form, as GPT-2 does); this block is the paper's, with ReLU ({_SEE_FFN})."),
        Mistake("tanh", wrong._ff(torch.tanh),
                f"you used tanh: the activation is ReLU, max(0, h), which is 0 for every negative h ({_SEE_FFN})."),
    ),
    forbidden=("utils", "utils.layers.FeedForward"),
    hint="the ReLU acts on the hidden layer, of width F, between the two linear maps; each map adds its own "
         "bias, and the output is back at width E.",
)


# -------------------- ch5.encoder_layer_post_ln and ch5.encoder_layer_pre_ln ------------------------------------------


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


def _encoder_cases(rng: random.Random, gen: torch.Generator) -> list[dict]:
    # (N, L, E, H, F, scale of x). First a case with H > 1 and L > 1, so that the case named in a diagnosis
    # shows the mistake (a sqrt(H) scale is no scale at all when H = 1); then one token, a single head,
    # D = 1, a random shape, and a small input, where LayerNorm's eps (1e-5, inside the square root) matters.
    # Wherever L > 1 the sizes are chosen so that a wrong scale does not coincide with a listed one:
    # L is not E, H or D**2, N is not H, F is not D**2 and H is not sqrt(D) (else / sqrt(L), / sqrt(N),
    # / sqrt(F) or / (sqrt(D) * H) would be diagnosed as / sqrt(E), / sqrt(H) or / D).
    shapes = [(2, 5, 12, 3, 24, 1.0), (1, 1, 8, 2, 16, 1.0), (3, 5, 6, 1, 12, 1.0), (1, 3, 4, 4, 8, 1.0),
              (rng.randint(2, 3), rng.randint(5, 7), 12, 4, rng.choice([24, 48]), 1.0),
              (2, rng.randint(2, 3), 12, 4, rng.choice([24, 48]), 0.01)]
    cases = []
    for N, L, E, H, hidden, scale in shapes:
        case = {"x": scale * torch.randn(N, L, E, generator=gen)}
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


_CH3 = "see chapter 3's multi_head_attention"
_SECTION2 = "see '2 · Post-LN and pre-LN'"

# (name, bug, diagnosis): ``wrong._wrong_layer(norm_first, **bug)`` is the reference layer written out
# with plain tensors, with the named bug switched on (or a related pair). First the same mistakes in both
# exercises
_COMMON = (
    ("ffn_no_b2", {"no_b2": True},
     "your feed-forward sublayer leaves out b2: it is exercise 1's block, relu(h @ w1 + b1) @ w2 + b2."),
    ("ffn_gelu", {"activation": "gelu"},
     "your feed-forward sublayer uses GELU: it is exercise 1's block, with ReLU."),
    ("ffn_no_relu", {"activation": "none"},
     "your feed-forward sublayer has no ReLU: it is exercise 1's block, relu(h @ w1 + b1) @ w2 + b2."),
    ("no_w_o", {"no_w_o": True},
     f"you left out the output projection: after merging the heads back to (N, L, E), multiply by w_o ({_CH3})."),
    ("w_o_transposed", {"w_o_transposed": True},
     "you multiplied by w_o.T: the weights here are in the x @ W convention, so the merged heads go @ w_o."),
    ("split_without_transpose", {"split": "no_transpose"},
     "your heads are split with view(N, L, H, D) but not transposed, so the softmax runs over the heads "
     f"instead of the tokens: use .view(N, L, H, D).transpose(1, 2) to get (N, H, L, D) ({_CH3})."),
    ("split_by_reshape", {"split": "reshape"},
     "you reshaped (N, L, E) straight to (N, H, L, D), which mixes features of different tokens into one "
     "head: view as (N, L, H, D) first, then transpose(1, 2)."),
    ("split_interleaved", {"split": "DH"},
     "your heads take every H-th feature ((N, L, D, H) split); head h owns the D consecutive features "
     "h·D … (h+1)·D - 1: view as (N, L, H, D), then transpose(1, 2)."),
    ("merge_without_transpose", {"merge_no_transpose": True},
     "you merged the heads with reshape(N, L, E) straight from (N, H, L, D): transpose(1, 2) back to "
     "(N, L, H, D) first, so each token gets its own heads' outputs."),
    ("scale_sqrt_E", {"scale": "sqrt_E"},
     "you divided the scores by sqrt(E); each head's dot products have D = E // num_heads terms, so divide "
     "by sqrt(D)."),
    ("scale_sqrt_H", {"scale": "sqrt_H"},
     "you divided the scores by sqrt(num_heads); the scale is sqrt(D), with D = E // num_heads the head "
     "dimension."),
    ("scale_D", {"scale": "D"},
     "you divided the scores by D: divide by sqrt(D), the square root of the head dimension."),
    ("scale_times", {"scale": "times_sqrt_D"},
     "you multiplied the scores by sqrt(D): divide by it, q @ k.transpose(-2, -1) / sqrt(D)."),
    ("unscaled", {"scale": None},
     "your attention scores are not scaled: divide q @ k.transpose(-2, -1) by sqrt(D), with D = E // "
     "num_heads the head dimension."),
    ("softmax_over_queries", {"softmax_dim": -2},
     "your softmax runs over the queries (dim=-2): each query's weights over the keys must sum to 1, so "
     "use softmax(dim=-1)."),
    ("one_head", {"one_head": True},
     "you computed one attention over all E features: split into num_heads heads of D = E // num_heads "
     f"features, attend in each, then merge ({_CH3})."),
    ("k_not_transposed", {"k_not_transposed": True},
     "q @ k multiplies (L, D) by (L, D): transpose the keys' last two dimensions, q @ k.transpose(-2, -1), "
     "to get the (L, L) scores."),
    ("float_head_dim", {"float_head_dim": True},
     "D = E / num_heads is a float, which view() refuses: use integer division, D = E // num_heads."),
    ("float16_softmax", {"float16": True},
     "you computed the softmax in float16: it keeps about 3 decimal digits; stay in the inputs' dtype."),
    ("norm_without_affine", {"norm": "no_affine"},
     "your LayerNorms leave out their weight and bias: F.layer_norm(h, (E,), ln_weight, ln_bias)."),
    ("norm_full_shape", {"norm": "full_shape"},
     "F.layer_norm's normalized_shape is the last dimension only, (E,): each token is normalised on its "
     "own, F.layer_norm(h, (E,), weight, bias)."),
    ("norm_unbiased", {"norm": "unbiased"},
     "your LayerNorm divides by the unbiased variance (torch.var's default, over E - 1): LayerNorm uses "
     "the biased one, var(unbiased=False), as F.layer_norm does."),
    ("norm_eps_outside_sqrt", {"norm": "std_plus_eps"},
     "your LayerNorm divides by std + eps: eps goes inside the square root, (h - mean) / sqrt(var + 1e-5); "
     "the two differ most where the variance is small (the last case has a small input)."),
    ("norm_no_eps", {"norm": "eps_0"},
     "your LayerNorm leaves out eps (or uses a tiny one such as 1e-12): use eps = 1e-5, F.layer_norm's "
     "default; it matters on the small input of the last case."),
    ("norm_rms", {"norm": "rms"},
     "you wrote RMSNorm: LayerNorm subtracts the mean over E before dividing, (h - mean) / sqrt(var + eps)."),
    ("norms_swapped", {"norms_swapped": True},
     "you swapped the two LayerNorms: ln1 goes with the attention sublayer, ln2 with the feed-forward."),
    ("norm1_twice", {"norm1_twice": True},
     "you used ln1's weight and bias for both LayerNorms: the feed-forward sublayer has its own, ln2."),
    ("projections_transposed", {"projections_transposed": True},
     "you multiplied by the transposed weights (x @ w_q.T, or F.linear(x, w_q), as nn.Linear stores them); "
     "these weights are (in, out): h @ w_q, h @ w_k, h @ w_v and merged @ w_o."),
    ("scores_transposed", {"scores_transposed": True},
     "your scores are k @ q.T, queries and keys swapped: the query of row i meets every key, "
     f"q @ k.transpose(-2, -1) ({_CH3})."),
    ("k_transpose_12", {"k_transpose_12": True},
     "k.transpose(1, 2) swaps the heads and the tokens of the (N, H, L, D) keys (it was right for 3-D "
     "(N, L, D) in chapter 2): transpose the last two dimensions, k.transpose(-2, -1)."),
    ("scale_sqrt_L", {"scale": "sqrt_L"},
     "you divided the scores by sqrt(L), the number of tokens: the scale is sqrt(D), the head dimension, "
     "k.shape[-1], not k.shape[-2]."),
    ("softmax_over_heads", {"softmax_dim": 1},
     "your softmax runs over the heads (dim=1 of (N, H, L, L)): each query's weights over the keys must sum "
     "to 1, so use softmax(dim=-1)."),
    ("ffn_b1_after_relu", {"b1_after_relu": True},
     "your feed-forward sublayer adds b1 after the ReLU: it is exercise 1's block, relu(h @ w1 + b1) @ w2 + b2."),
    ("norm_over_tokens", {"norm": "over_tokens"},
     "your LayerNorm takes the mean and variance over the tokens (dim=1): each token is normalised over its "
     "own E features, dim=-1, as F.layer_norm(h, (E,), weight, bias) does."),
    ("norm_eps_1e6", {"norm": "eps_1e-6"},
     "your LayerNorm uses eps = 1e-6: use 1e-5, F.layer_norm's default; it matters on the small input of the "
     "last case."),
)

_POST_ONLY = (
    ("wrote_pre_ln", {"wiring": "other_order"},
     f"you wrote the pre-LN layer (x + sublayer(norm(x))); this exercise is post-LN, the original paper's "
     f"order: normalise after adding, norm(x + sublayer(x)) ({_SECTION2})."),
    ("norm_the_sublayer", {"wiring": "norm_the_sublayer"},
     f"you add the residual after the LayerNorm (x + norm(sublayer(x))); in post-LN the norm comes after "
     f"the sum, norm(x + sublayer(x)) ({_SECTION2})."),
    ("no_residual", {"wiring": "no_residual"},
     "your layer has no residual connections: add each sublayer's input back before its LayerNorm."),
    ("no_residual_attn", {"wiring": "no_residual_attn"},
     "your attention sublayer has no residual: add its input x back before norm1."),
    ("no_residual_ffn", {"wiring": "no_residual_ffn"},
     "your feed-forward sublayer has no residual: add its input (norm1's output) back before norm2."),
    ("ffn_residual_from_x", {"wiring": "ffn_residual_from_x"},
     "your second residual adds the layer's original input: it adds the feed-forward's own input, the "
     "output of norm1."),
    ("ffn_on_x", {"wiring": "ffn_on_x"},
     "your feed-forward reads the layer's original input: it reads the output of the first sublayer, "
     "after norm1."),
    ("no_norm2", {"wiring": "no_norm2"},
     f"your layer ends without its second LayerNorm: in post-LN every sum is normalised, norm2(x + ffn(x)) "
     f"({_SECTION2})."),
    ("ffn_residual_from_sum", {"wiring": "ffn_residual_from_sum"},
     "your second residual adds the un-normalised sum x + attention(x): it adds the feed-forward's own "
     "input, x1 = norm1(x + attention(x)), so the output is norm2(x1 + ffn(x1))."),
)

_PRE_ONLY = (
    ("wrote_post_ln", {"wiring": "other_order"},
     f"you wrote the post-LN layer (norm(x + sublayer(x))); this exercise is pre-LN: normalise what enters "
     f"each sublayer and add its output to the untouched x ({_SECTION2})."),
    ("norm_the_sublayer", {"wiring": "norm_the_sublayer"},
     f"you normalise the sublayer's output (x + norm(sublayer(x))); pre-LN normalises its input, "
     f"x + sublayer(norm(x)) ({_SECTION2})."),
    ("residual_from_norm", {"wiring": "residual_from_norm"},
     "your residual starts from the normalised input (h = norm(x); x = h + sublayer(h)); in pre-LN the "
     "un-normalised x is carried around the sublayer: x = x + sublayer(norm(x))."),
    ("residual_from_norm_attn", {"wiring": "residual_from_norm_attn"},
     "around the attention sublayer your residual starts from norm1(x), not x (the feed-forward one is "
     "right): carry the un-normalised x, x = x + attention(norm1(x))."),
    ("residual_from_norm_ffn", {"wiring": "residual_from_norm_ffn"},
     "around the feed-forward sublayer your residual starts from norm2(x), not x (the attention one is "
     "right): carry the un-normalised stream, x = x + ffn(norm2(x))."),
    ("final_norm", {"wiring": "final_norm"},
     f"your output is normalised at the end: a pre-LN layer has no LayerNorm after the last residual; "
     f"the model adds one final LayerNorm after all its layers ({_SECTION2})."),
    ("final_norm2", {"wiring": "final_norm2"},
     f"you apply norm2 once more to the output: a pre-LN layer ends with the residual sum, x + ffn(norm2(x)) "
     f"({_SECTION2})."),
    ("ffn_from_x", {"wiring": "ffn_from_x"},
     "your feed-forward reads norm2 of the layer's original input: it reads norm2 of the stream after the "
     "attention residual, x = x + attention(norm1(x)) first."),
    ("no_residual", {"wiring": "no_residual"},
     "your layer has no residual connections: keep x and add each sublayer's output to it."),
    ("no_residual_ffn", {"wiring": "no_residual_ffn"},
     "your feed-forward sublayer has no residual: add its output to the stream, x = x + ffn(norm2(x))."),
    ("skip_ffn", {"wiring": "skip_ffn"},
     "your layer stops after the attention sublayer: add the feed-forward sublayer, x = x + ffn(norm2(x))."),
    ("no_norm1", {"wiring": "no_norm1"},
     f"your attention reads the un-normalised x: in pre-LN each sublayer reads a normalised copy, "
     f"x = x + attention(norm1(x)) ({_SECTION2})."),
    ("no_norm2", {"wiring": "no_norm2"},
     f"your feed-forward reads the un-normalised stream: in pre-LN it reads norm2 of it, "
     f"x = x + ffn(norm2(x)) ({_SECTION2})."),
    ("no_residual_attn", {"wiring": "no_residual_attn"},
     "your attention sublayer has no residual: add its output to the stream, x = x + attention(norm1(x))."),
)


def _mistakes(norm_first: bool, specific) -> tuple[Mistake, ...]:
    return tuple(Mistake(name, wrong._wrong_layer(norm_first, **bug), diagnosis) for name, bug, diagnosis in
                 (*specific, *_COMMON))


ENCODER_POST_LN = Exercise(
    id="ch5.encoder_layer_post_ln",
    reference=encoder_layer_post_ln_reference,
    make_cases=_encoder_cases,
    make_edge_cases=edges.encoder_edges(_encoder_cases),
    points=3,
    mistakes=_mistakes(False, _POST_ONLY), probes=layer_probes(encoder_layer_pre_ln_reference),
    forbidden=_NO_TORCH_LAYERS + _NO_UTILS,
    atol=1e-4,
    hint="in post-LN each sublayer's input is added back to its output, then the sum is normalised "
         "(F.layer_norm over the last dimension, eps = 1e-5); the attention is chapter 3's, with the scale "
         "sqrt(D) of the head dimension D = E // num_heads and an output projection w_o.",
)

ENCODER_PRE_LN = Exercise(
    id="ch5.encoder_layer_pre_ln",
    reference=encoder_layer_pre_ln_reference,
    make_cases=_encoder_cases,
    make_edge_cases=edges.encoder_edges(_encoder_cases),
    points=3,
    mistakes=_mistakes(True, _PRE_ONLY), probes=layer_probes(encoder_layer_post_ln_reference),
    forbidden=_NO_TORCH_LAYERS + _NO_UTILS,
    atol=1e-4,
    hint="in pre-LN each sublayer reads a normalised copy of the stream (F.layer_norm, eps = 1e-5) and its "
         "output is added to the un-normalised stream; nothing normalises the layer's output. The attention "
         "is chapter 3's, with the scale sqrt(D), D = E // num_heads, and an output projection w_o.",
)

EXERCISES: tuple[Exercise, ...] = (FEED_FORWARD, ENCODER_POST_LN, ENCODER_PRE_LN)  # notebook order
