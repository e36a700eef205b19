"""Explorers and quiz for chapter 5, the full Transformer layer.

Each explorer wires a pure state function of :mod:`utils.explorers.transformer` (tested by pytest) and a
figure of :mod:`utils.plotting.transformer` to controls.

* :func:`attention_explorer`: one head's attention on one held-out sentence of the pronoun task, with the
  pronoun's row singled out.
* :func:`sentence_explorer`: the trained model on a sentence the learner types, with the prediction, every
  layer and head (one of them enlarged) and the referent share.
* :func:`ch5_quiz`.
"""

from __future__ import annotations

from utils.explorers.transformer import AttentionView, SentenceState, attention_view, sentence_state
from utils.i18n.messages import tr
from utils.plotting.transformer import attention_view_figure, sentence_figure
from utils.tasks import PronounData
from utils.widgets.common import wire_explorer
from utils.widgets.quiz import Choice, Quiz

__all__ = ["attention_explorer", "sentence_explorer", "ch5_quiz"]


def attention_explorer(model, data: PronounData, *, num_examples: int = 50):
    """Pick a held-out sentence, a layer and a head; see where every word looks (the pronoun's row in red).

    Returns:
        An ipywidgets ``VBox`` (see :func:`~utils.widgets.common.wire_explorer`): sentence slider, layer
        and head dropdowns, a caption and an ``Output`` with the figure. ``controls`` names them
        ``sentence``, ``layer`` and ``head``; ``state`` is the
        :class:`~utils.explorers.transformer.AttentionView` drawn last.
    """

    import ipywidgets as w

    num_layers = len(model.layers)
    num_heads = model.layers[0].self_attn.num_heads
    sentence = w.IntSlider(value=0, min=0, max=min(num_examples, len(data)) - 1, description=tr("sentence"))
    layer = w.Dropdown(options=[(tr("layer {n}", n=i + 1), i) for i in range(num_layers)], value=num_layers - 1,
                       description=tr("layer"))
    head = w.Dropdown(options=[(tr("head {n}", n=h + 1), h) for h in range(num_heads)], value=0,
                      description=tr("head"))
    caption = w.HTML()

    def compute() -> AttentionView:
        view = attention_view(model, data, sentence.value, layer.value, head.value)
        caption.value = f"<code>{' '.join(view.tokens)}</code>"
        return view

    return wire_explorer([w.HBox([sentence, layer, head]), caption],
                         {"sentence": sentence, "layer": layer, "head": head}, compute, attention_view_figure,
                         grid={"sentence": range(6)}, pure_draw=True, bbox_inches="tight")  # static: 6 sentences


def sentence_explorer(model, examples=(), *, text: str = ""):
    """Type a sentence (or pick one of ``examples``) and see what the trained model does with it.

    Args:
        model: the chapter's trained :class:`~utils.layers.TinyEncoderClassifier`.
        examples: sentences the combobox offers. Default: none.
        text: the sentence shown first. Default: the first example.

    Returns:
        An ``ipywidgets.VBox`` (see :func:`~utils.widgets.common.wire_explorer`): a combobox, a dropdown
        choosing the enlarged map, a caption (the prediction, or the unknown words) and an ``Output``.
        ``controls`` names them ``text`` and ``enlarge``; ``state`` is the
        :class:`~utils.explorers.transformer.SentenceState` drawn last.
    """
    import html

    import ipywidgets as w

    examples = list(examples)
    num_layers, num_heads = len(model.layers), model.layers[0].self_attn.num_heads
    sentence = w.Combobox(value=text or (examples[0] if examples else ""), options=examples,
                          placeholder="the big king met the girl because she left .", ensure_option=False,
                          continuous_update=False, description=tr("sentence"), layout=w.Layout(width="520px"))
    enlarge = w.Dropdown(options=[(tr("Layer {layer}, Head {head}", layer=i + 1, head=h + 1), (i, h))
                                  for i in range(num_layers) for h in range(num_heads)], value=(0, 0),
                         description=tr("enlarge"))
    caption = w.HTML()

    def compute() -> SentenceState:
        state = sentence_state(model, sentence.value, *enlarge.value)
        caption.value = f"<span class='sentence-caption'>{html.escape(state.message)}</span>"
        return state

    return wire_explorer([w.HBox([sentence, enlarge]), caption], {"text": sentence, "enlarge": enlarge}, compute,
                         sentence_figure, pure_draw=True, bbox_inches="tight")


def ch5_quiz() -> Quiz:
    """Four questions: the pre-LN residual path, the feed-forward share, post-LN vs pre-LN, the causal mask."""
    return Quiz([
        Choice(
            tr("In a pre-LN layer, which tensor is carried around the attention sublayer by the residual path?"),
            [tr("The LayerNorm of x"), tr("x itself, un-normalised"), tr("The attention output"),
             tr("Nothing: pre-LN drops it")],
            answer=1,
            feedback=[
                tr("No: that is the classic pre-LN bug. Only the sublayer's input is normalised; the residual "
                   "stream keeps x as it is."),
                tr("Yes: x = x + attention(norm1(x)). Nothing on the residual path is ever normalised, so the "
                   "gradient has a plain path from the loss to every layer."),
                tr("The attention output is what gets *added* to the residual path, not what the path carries."),
                tr("Pre-LN keeps both residual connections; it only moves the LayerNorm."),
            ],
            explanation=tr("Pre-LN normalises what enters each sublayer, never the stream itself (hence the final "
                           "LayerNorm before the head)."),
        ),
        Choice(
            tr("With E = 512 and F = 2048, roughly what share of an encoder layer's parameters sit in the "
               "feed-forward block?"),
            [tr("About 1/6"), tr("About 1/3"), tr("About 2/3"), tr("Almost all (99%)")],
            answer=2,
            feedback=[
                tr("Too low: attention has 4·E² weights, the feed-forward 2·E·F = 8·E²."),
                tr("That is the attention's share: 4·E² out of about 12·E²."),
                tr("Yes: 2·E·F = 8·E² against 4·E² for the four attention projections."),
                tr("The attention projections are still a third of the layer."),
            ],
            explanation=tr("Calling attention + residual + LayerNorm 'the layer' leaves out two thirds of it."),
        ),
        Choice(
            tr("You train a 6-layer model at a high learning rate with no warm-up. Which is the likely outcome?"),
            [tr("Post-LN and pre-LN behave the same: LayerNorm placement is cosmetic"),
             tr("Post-LN is more likely to stall or diverge; pre-LN usually trains"),
             tr("Pre-LN diverges because its residual stream is never normalised"),
             tr("Both diverge; only warm-up can fix either")],
            answer=1,
            feedback=[
                tr("The chapter measured the opposite: same weights, same batches, very different curves."),
                tr("Yes: in the chapter's measurement post-LN stayed at chance while pre-LN learned, and Xiong et "
                   "al. (2020) explain why post-LN needs a warm-up."),
                tr("No: in the chapter's run pre-LN learned without warm-up (with spikes) while post-LN stayed at "
                   "chance. Its stream is never normalised, but every sublayer reads a normalised copy of it and the "
                   "final LayerNorm rescales it before the head. Nor did the plain stream make the gradients at "
                   "initialisation more even: section 5 measured pre-LN's largest / smallest ratio as the larger "
                   "of the two."),
                tr("Pre-LN learned without warm-up in the chapter's measurement, although its loss spiked along "
                   "the way; post-LN did not learn at all."),
            ],
            explanation=tr("Post-LN puts a LayerNorm on the residual path after every sublayer, so the gradient "
                           "reaching an early layer passes through every norm above it; pre-LN keeps the residual "
                           "path a plain sum. In the chapter's small model the gradients at initialisation were "
                           "similar in both settings; what differed was training at a high learning rate, the risk "
                           "a warm-up guards against."),
        ),
        Choice(
            tr("The decoder masks its self-attention with a causal mask. What does that mask change?"),
            [tr("It removes the future tokens from the input"),
             tr("Query i gets zero weight on keys j > i, so output i cannot depend on later tokens"),
             tr("It adds the cross-attention to the encoder"),
             tr("It replaces the softmax by a cumulative sum")],
            answer=1,
            feedback=[
                tr("The input still has every token; the mask acts on the scores, per query."),
                tr("Yes: the masked scores become -inf before the softmax, so those weights are exactly 0."),
                tr("Cross-attention is a separate sublayer with its own queries (decoder) and keys (encoder)."),
                tr("The softmax stays; only the allowed keys change."),
            ],
        ),
    ], title=tr("Chapter 5 quiz"))
