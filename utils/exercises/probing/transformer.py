"""Chapter 5's probes: the feed-forward block's activation and biases read back, and the encoder layers
taken apart sublayer by sublayer.

* ``feed_forward``: with w1 = w2 = I and zero biases the block is its activation alone, so the learner's
  activation is read back on a few numbers; with zero weights it is b2 alone.
* ``encoder_layer_post_ln`` / ``encoder_layer_pre_ln``: the same inputs with the feed-forward switched
  off (w1, b1, w2, b2 = 0), with the attention switched off (w_v = 0), with both off, and with every
  LayerNorm at weight 1 and bias 0; whichever of these the learner matches says which sublayer differs.
  Also: the other LN placement, and two calls on the same inputs (dropout left on).

See :mod:`utils.exercises.probes` for the contract.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from utils.exercises.probes import Probe
from utils.exercises.probing import contrasts
from utils.exercises.probing.kit import max_error, numbers, probe_output, reference_output, same
from utils.i18n.messages import tr

# --------------------------------------------------------------------------------------------------
# feed_forward
# --------------------------------------------------------------------------------------------------

_H = torch.tensor([[-3.0, -1.0, -0.5, 0.5, 2.0, 8.0]])
_ACTIVATIONS = (("GELU", F.gelu), ("SiLU", F.silu), ("sigmoid", torch.sigmoid), ("tanh", torch.tanh),
                ("leaky ReLU", F.leaky_relu), ("ReLU6", F.relu6), ("", lambda h: h))  # "": none


def _activation_inputs(gen: torch.Generator) -> list:
    eye = torch.eye(6)
    return [{"x": _H.clone(), "w1": eye, "b1": torch.zeros(6), "w2": eye, "b2": torch.zeros(6)},
            {"x": torch.randn(2, 6, generator=gen), "w1": torch.zeros(6, 4), "b1": torch.randn(4, generator=gen),
             "w2": torch.zeros(4, 6), "b2": torch.randn(6, generator=gen)}]


def _activation_explain(reference, inputs, outcomes) -> str | None:
    got = probe_output(outcomes, 0)
    if got is not None and got.shape == _H.shape and got.is_floating_point() and not same(got, torch.relu(_H)):
        name = next((name for name, fn in _ACTIVATIONS if same(got, fn(_H))), None)
        if name is not None:
            name = name or tr("no activation at all")
            return tr("with w1 = w2 = I and zero biases your block is its activation alone, and it maps h = {h} to "
                      "{got}: that is {name}; ReLU gives {relu}", h=numbers(_H), got=numbers(got), name=name,
                      relu=numbers(torch.relu(_H)))
        return tr("with w1 = w2 = I and zero biases your block is its activation alone, and it maps h = {h} to "
                  "{got}; ReLU, max(0, h), gives {relu}", h=numbers(_H), got=numbers(got),
                  relu=numbers(torch.relu(_H)))
    got = probe_output(outcomes, 1)
    b2 = inputs[1]["b2"]
    if got is not None and got.shape == (2, 6) and got.is_floating_point() and not same(got, b2.expand(2, 6),
                                                                                         atol=0.05, rtol=0.05):
        if same(got, torch.relu(b2).expand(2, 6)):
            return tr("with w1 = 0 and w2 = 0 every token's output must be b2 = {b2}; yours is relu(b2) = {got}: "
                      "a ReLU acts after b2 is added. The ReLU belongs on the hidden layer only, relu(x @ w1 + b1)",
                      b2=numbers(b2), got=numbers(got[0]))
        return tr("with w1 = 0 and w2 = 0 every token's output must be b2 = {b2} (relu(0 + b1) @ 0 is 0); yours "
                  "is {got} for the first token: look at the biases, b1 inside the ReLU and b2 added last",
                  b2=numbers(b2), got=numbers(got[0]))
    return None


FEED_FORWARD_PROBES = (Probe("activation_and_biases", _activation_inputs, _activation_explain),
                       contrasts.FEED_FORWARD_CONTRAST)


# --------------------------------------------------------------------------------------------------
# encoder layers: ablation
# --------------------------------------------------------------------------------------------------

_N, _L, _E, _HEADS, _F = 2, 3, 6, 2, 8  # D = 3 differs from H = 2


def _layer_inputs(gen: torch.Generator) -> list:
    full = {"x": torch.randn(_N, _L, _E, generator=gen)}
    for name in ("w_q", "w_k", "w_v", "w_o"):
        full[name] = torch.randn(_E, _E, generator=gen) / _E ** 0.5 * 1.5
    full.update(w1=torch.randn(_E, _F, generator=gen) / _E ** 0.5, b1=0.3 * torch.randn(_F, generator=gen),
                w2=torch.randn(_F, _E, generator=gen) / _F ** 0.5, b2=0.3 * torch.randn(_E, generator=gen))
    for i in (1, 2):
        full[f"ln{i}_weight"] = 1.0 + 0.3 * torch.randn(_E, generator=gen)
        full[f"ln{i}_bias"] = 0.3 * torch.randn(_E, generator=gen)
    full["num_heads"] = _HEADS
    no_ffn = {**full, "w1": torch.zeros(_E, _F), "b1": torch.zeros(_F), "w2": torch.zeros(_F, _E),
              "b2": torch.zeros(_E)}
    no_attention = {**full, "w_v": torch.zeros(_E, _E)}
    neither = {**no_ffn, "w_v": torch.zeros(_E, _E)}
    plain_norms = {**full, "ln1_weight": torch.ones(_E), "ln1_bias": torch.zeros(_E), "ln2_weight": torch.ones(_E),
                   "ln2_bias": torch.zeros(_E)}
    nothing = {**neither, "w_q": torch.zeros(_E, _E), "w_k": torch.zeros(_E, _E), "w_o": torch.zeros(_E, _E)}
    one_head = {**full, "num_heads": 1}
    # 5: the first again (determinism); 6: every attention weight 0 too; 7: one head
    return [full, no_ffn, no_attention, neither, plain_norms, full, nothing, one_head]


def _layer_explain(reference, inputs, outcomes, *, other_order) -> str | None:
    got = [probe_output(outcomes, i) for i in range(len(inputs))]
    if any(g is None or g.shape != (_N, _L, _E) or not g.is_floating_point() for g in got):
        return None
    if bool(torch.isfinite(got[0]).all()) and not same(got[0], got[5], atol=1e-6, rtol=1e-6):
        return tr("your layer gives two different outputs for the same inputs: something random is switched on, "
                  "such as dropout (F.dropout's training=True default, or an nn.Dropout in training mode). The "
                  "layer here is in eval mode: apply no dropout")
    expected = [reference_output(reference, case) for case in inputs]
    ok = [same(g, e, atol=1e-4) for g, e in zip(got, expected)]
    if all(ok):
        return None
    if same(got[0], reference_output(other_order, inputs[0]), atol=1e-4):
        return tr("your layer computes the other LayerNorm placement: with these weights its output equals the "
                  "reference's with the LayerNorms placed the other way (pre-LN: x + sublayer(norm(x)); post-LN: "
                  "norm(x + sublayer(x)))")
    swapped = {**inputs[0], **{f"ln{i}_{part}": inputs[0][f"ln{i}_{other}"] for i in (1, 2)
                                for part, other in (("weight", "bias"), ("bias", "weight"))}}
    if same(got[0], reference_output(reference, swapped), atol=1e-4):
        return tr("your output equals the reference's with each LayerNorm's weight and bias swapped: "
                  "F.layer_norm(h, (E,), weight, bias) takes the weight (the scale) third and the bias fourth")
    if not ok[0] and ok[4]:
        return tr("your layer matches when every LayerNorm has weight 1 and bias 0, and differs with the given "
                  "ones: apply each LayerNorm's own weight and bias (ln1 with the attention sublayer, ln2 with the "
                  "feed-forward), F.layer_norm(h, (E,), weight, bias)")
    if not ok[3] and ok[6]:
        return tr("with w_v = 0 your attention sublayer should add nothing, yet your output differs; with w_q, w_k, "
                  "w_v and w_o all 0 it matches: your attention reads a weight where w_v belongs. Check that each "
                  "projection uses its own weight: q = h @ w_q, k = h @ w_k, v = h @ w_v, and w_o after the merge")
    if not ok[3]:
        return tr("with both sublayers switched off (w_v = 0, so the attention adds 0, and a zero feed-forward) "
                  "only the residual connections and the LayerNorms are left, and your output still differs (max "
                  "abs error {error:.3g}): look at how the residuals are added and where each LayerNorm, with its "
                  "own weight and bias, is applied", error=max_error(got[3], expected[3]))
    if not ok[1] and ok[2] and ok[7]:
        return tr("your feed-forward sublayer matches, and so does your attention with num_heads = 1; with "
                  "num_heads = {H} (D = {D}) the attention sublayer differs: look at how x is split into heads, "
                  "(N, L, H, D) then (N, H, L, D), the scale 1/sqrt(D), and the merge back", H=_HEADS, D=_E // _HEADS)
    if not ok[1] and ok[2]:
        return tr("your feed-forward sublayer matches (with the attention switched off, w_v = 0, your output is "
                  "right); the attention sublayer differs: with a zero feed-forward your output is off by up to "
                  "{error:.3g}. Look at the attention: projections, heads, scale 1/sqrt(D), softmax over the keys, "
                  "w_o", error=max_error(got[1], expected[1]))
    if ok[1] and not ok[2]:
        return tr("your attention sublayer matches (with the feed-forward switched off, w1, b1, w2, b2 = 0, your "
                  "output is right); the feed-forward sublayer differs: with the attention switched off (w_v = 0) "
                  "your output is off by up to {error:.3g}. Look at relu(h @ w1 + b1) @ w2 + b2, what it reads and "
                  "where its output is added", error=max_error(got[2], expected[2]))
    if not ok[1] and not ok[2]:
        return tr("with either sublayer switched off your output still differs (w_v = 0: off by up to {a:.3g}; a "
                  "zero feed-forward: off by up to {f:.3g}), while with both off it matches: both sublayers "
                  "differ, or what they share", a=max_error(got[2], expected[2]), f=max_error(got[1], expected[1]))
    return tr("each sublayer matches with the other switched off, but together they differ: the feed-forward "
              "sublayer must read the stream the attention sublayer produced, and its residual add to that same "
              "stream")


def layer_probes(other_order) -> tuple[Probe, ...]:
    """The encoder layer's probes; ``other_order`` is the reference with the other LayerNorm placement."""
    def explain(reference, inputs, outcomes):
        return _layer_explain(reference, inputs, outcomes, other_order=other_order)
    return (Probe("sublayer_ablation", _layer_inputs, explain),)
