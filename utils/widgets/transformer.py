"""Explorer and quiz for chapter 5, the full Transformer layer.

* :func:`attention_view` (pure) and :func:`attention_explorer` (widget): one head's attention on one
  held-out sentence of the pronoun task, with the pronoun's row singled out.
* :func:`ch5_quiz`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from utils.attention import padding_mask
from utils.plotting.transformer import attention_view_figure
from utils.tasks import NOUNS, PronounData
from utils.widgets.common import wire_explorer
from utils.widgets.quiz import Choice, Quiz

__all__ = ["AttentionView", "attention_view", "attention_explorer", "ch5_quiz"]


@dataclass(frozen=True)
class AttentionView:
    """What the explorer draws for one (sentence, layer, head)."""

    weights: torch.Tensor  # (L, L) without padding
    tokens: list[str]
    pronoun_pos: int
    referent_pos: int
    predicted: str
    title: str


@torch.no_grad()
def attention_view(model, data: PronounData, index: int, layer: int, head: int) -> AttentionView:
    """The attention map of ``head`` in ``layer`` (0-based) on sentence ``index`` of ``data``.

    >>> from utils.layers import TinyEncoderClassifier
    >>> from utils.tasks import VOCAB, pronoun_task
    >>> model = TinyEncoderClassifier(len(VOCAB), 16, 2, 2, 32, len(NOUNS)).eval()
    >>> view = attention_view(model, pronoun_task(4), 0, 1, 1)
    >>> view.weights.shape[0] == len(view.tokens), view.title.startswith("Layer 2, Head 2")
    (True, True)
    """
    one = data[index]
    L = int(one.lengths[0])
    model.eval()
    logits, maps = model(one.tokens, mask=padding_mask(one.lengths, one.tokens.shape[1]), need_weights=True)
    if not 0 <= layer < len(maps) or not 0 <= head < maps[0].shape[1]:
        raise ValueError(f"layer={layer}, head={head}: the model has {len(maps)} layers of {maps[0].shape[1]} heads")
    pronoun, referent = int(one.pronoun_pos[0]), int(one.referent_pos[0])
    weights = maps[layer][0, head, :L, :L]  # (L, L)
    tokens = one.words(0)
    predicted = NOUNS[int(logits[0, pronoun].argmax())]
    share = float(weights[pronoun, referent])
    title = (f"Layer {layer + 1}, Head {head + 1}: '{tokens[pronoun]}' gives {share:.0%} of its attention "
             f"to '{tokens[referent]}' (model says: {predicted})")
    return AttentionView(weights, tokens, pronoun, referent, predicted, title)


def attention_explorer(model, data: PronounData, *, num_examples: int = 50):
    """Pick a held-out sentence, a layer and a head; see where every word looks (the pronoun's row in red).

    Returns:
        An ipywidgets ``VBox`` (see :func:`~utils.widgets.common.wire_explorer`): sentence slider, layer
        and head dropdowns, a caption and an ``Output`` with the figure. ``controls`` names them
        ``sentence``, ``layer`` and ``head``; ``state`` is the :class:`AttentionView` drawn last.
    """

    import ipywidgets as w

    num_layers = len(model.layers)
    num_heads = model.layers[0].self_attn.num_heads
    sentence = w.IntSlider(value=0, min=0, max=min(num_examples, len(data)) - 1, description="sentence")
    layer = w.Dropdown(options=[(f"layer {i + 1}", i) for i in range(num_layers)], value=num_layers - 1,
                       description="layer")
    head = w.Dropdown(options=[(f"head {h + 1}", h) for h in range(num_heads)], value=0, description="head")
    caption = w.HTML()

    def compute() -> AttentionView:
        view = attention_view(model, data, sentence.value, layer.value, head.value)
        caption.value = f"<code>{' '.join(view.tokens)}</code>"
        return view

    return wire_explorer([w.HBox([sentence, layer, head]), caption],
                         {"sentence": sentence, "layer": layer, "head": head}, compute, attention_view_figure,
                         grid={"sentence": range(6)}, bbox_inches="tight")  # the static edition: 6 sentences


def ch5_quiz() -> Quiz:
    """Four questions: the pre-LN residual path, the feed-forward share, post-LN vs pre-LN, the causal mask."""
    return Quiz([
        Choice(
            "In a pre-LN layer, which tensor is carried around the attention sublayer by the residual path?",
            ["The LayerNorm of x", "x itself, un-normalised", "The attention output", "Nothing: pre-LN drops it"],
            answer=1,
            feedback=[
                "No: that is the classic pre-LN bug. Only the sublayer's input is normalised; the residual "
                "stream keeps x as it is.",
                "Yes: x = x + attention(norm1(x)). Nothing on the residual path is ever normalised, so the "
                "gradient has a plain path from the loss to every layer.",
                "The attention output is what gets *added* to the residual path, not what the path carries.",
                "Pre-LN keeps both residual connections; it only moves the LayerNorm.",
            ],
            explanation="Pre-LN normalises what enters each sublayer, never the stream itself (hence the final "
                        "LayerNorm before the head).",
        ),
        Choice(
            "With E = 512 and F = 2048, roughly what share of an encoder layer's parameters sit in the "
            "feed-forward block?",
            ["About 1/6", "About 1/3", "About 2/3", "Almost all (99%)"],
            answer=2,
            feedback=[
                "Too low: attention has 4·E² weights, the feed-forward 2·E·F = 8·E².",
                "That is the attention's share: 4·E² out of about 12·E².",
                "Yes: 2·E·F = 8·E² against 4·E² for the four attention projections.",
                "The attention projections are still a third of the layer.",
            ],
            explanation="Calling attention + residual + LayerNorm 'the layer' leaves out two thirds of it.",
        ),
        Choice(
            "You train a 6-layer model at a high learning rate with no warm-up. Which is the likely outcome?",
            ["Post-LN and pre-LN behave the same: LayerNorm placement is cosmetic",
             "Post-LN is more likely to stall or diverge; pre-LN usually trains",
             "Pre-LN diverges because its residual stream is never normalised",
             "Both diverge; only warm-up can fix either"],
            answer=1,
            feedback=[
                "The chapter measured the opposite: same weights, same batches, very different curves.",
                "Yes: in the chapter's measurement post-LN stayed at chance while pre-LN learned, and Xiong et "
                "al. (2020) explain why post-LN needs a warm-up.",
                "The un-normalised stream is what keeps pre-LN's gradients well-behaved; the final LayerNorm "
                "takes care of the output scale.",
                "Pre-LN learned without warm-up in the chapter's measurement, although its loss spiked along "
                "the way; post-LN did not learn at all.",
            ],
            explanation="Post-LN puts a LayerNorm on the residual path after every sublayer, so the gradient "
                        "reaching an early layer passes through every norm above it; pre-LN keeps the residual "
                        "path a plain sum. In the chapter's small model the gradients at initialisation were "
                        "similar in both settings; what differed was training at a high learning rate, the risk "
                        "a warm-up guards against.",
        ),
        Choice(
            "The decoder masks its self-attention with a causal mask. What does that mask change?",
            ["It removes the future tokens from the input",
             "Query i gets zero weight on keys j > i, so output i cannot depend on later tokens",
             "It adds the cross-attention to the encoder",
             "It replaces the softmax by a cumulative sum"],
            answer=1,
            feedback=[
                "The input still has every token; the mask acts on the scores, per query.",
                "Yes: the masked scores become -inf before the softmax, so those weights are exactly 0.",
                "Cross-attention is a separate sublayer with its own queries (decoder) and keys (encoder).",
                "The softmax stays; only the allowed keys change.",
            ],
        ),
    ], title="Chapter 5 quiz")
