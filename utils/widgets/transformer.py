"""Explorer and quiz for chapter 5, the full Transformer layer.

* :func:`attention_view` (pure) and :func:`attention_explorer` (widget): one head's attention on one
  held-out sentence of the pronoun task, with the pronoun's row singled out.
* :func:`sentence_state` (pure) and :func:`sentence_explorer` (widget): the trained model on a sentence the
  learner types, with the prediction, every layer and head (one of them enlarged) and the referent share.
* :func:`ch5_quiz`.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

import torch

from utils.attention import padding_mask
from utils.i18n.messages import tr
from utils.plotting.transformer import attention_view_figure, sentence_figure
from utils.tasks import AGREEMENT, NOUNS, VOCAB, PronounData
from utils.widgets.common import wire_explorer
from utils.widgets.quiz import Choice, Quiz

__all__ = ["AttentionView", "attention_view", "attention_explorer", "MAX_WORDS", "split_sentence", "SentenceState",
           "sentence_state", "sentence_explorer", "ch5_quiz"]


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
    title = tr("Layer {layer}, Head {head}: '{pronoun}' gives {share:.0%} of its attention to '{referent}' "
               "(model says: {predicted})", layer=layer + 1, head=head + 1, pronoun=tokens[pronoun], share=share,
               referent=tokens[referent], predicted=predicted)
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


MAX_WORDS = 24
"""The longest sentence :func:`sentence_state` runs (the training sentences have at most 11 words)."""

_KNOWN = tuple(word for word in VOCAB if word != "<pad>")
# a word (with inner apostrophes or hyphens: "king's" stays one word), or any other single character that
# is not a space: punctuation is split off and kept, never dropped ("left!" -> "left", "!")
_WORD = re.compile(r"<pad>|\w+(?:['\u2019-]\w+)*|[^\w\s]")
_PUNCTUATION = set(",;:!?\u2026")


def split_sentence(text: str) -> tuple[list[str], dict[str, list[str]]]:
    """Split ``text`` into words of the pronoun task, and name every word outside its vocabulary.

    Lower-case; any run of spaces separates words; punctuation becomes a word of its own
    (``"left."`` -> ``"left", "."``; ``"girl,"`` -> ``"girl", ","``), so that it is named, not dropped.

    Returns:
        ``(words, unknown)``: ``unknown`` maps each word not in :data:`~utils.tasks.VOCAB` (in the order
        they appear) to up to three nearest known words (``difflib``; ``"."`` for other punctuation;
        empty when none is close).

    >>> split_sentence("The king saw the dragon because he left.")
    (['the', 'king', 'saw', 'the', 'dragon', 'because', 'he', 'left', '.'], {'dragon': []})
    >>> split_sentence("the quen left")[1]
    {'quen': ['queen', 'quiet']}
    >>> split_sentence("she left!")
    (['she', 'left', '!'], {'!': ['.']})
    """
    if not isinstance(text, str):
        raise TypeError(f"text: expected a str, got {type(text).__name__}")
    words = _WORD.findall(text.lower())
    unknown: dict[str, list[str]] = {}
    for word in words:
        if word not in _KNOWN and word not in unknown:
            near = ["."] if word in _PUNCTUATION else difflib.get_close_matches(word, _KNOWN, n=3, cutoff=0.6)
            unknown[word] = near
    return words, unknown


@dataclass(frozen=True)
class SentenceState:
    """What the "your own sentence" explorer shows for one text and one enlarged head."""

    words: list[str]
    unknown: dict[str, list[str]]  # out-of-vocabulary word -> nearest known words
    maps: torch.Tensor | None  # (layers, H, L, L), None when the sentence cannot run
    pronoun_pos: int | None  # the last pronoun, where the model answers
    predicted: str | None  # the noun the model picks at the pronoun
    confidence: float | None  # its softmax probability
    referent_pos: int | None  # the one noun of the sentence that agrees with the pronoun
    referent_share: torch.Tensor | None  # (layers, H): the pronoun's attention to that noun
    correct: bool | None  # predicted == the agreeing noun
    layer: int  # the enlarged map (0-based)
    head: int
    message: str  # what the explorer writes above the figure


def _unknown_message(unknown: dict[str, list[str]]) -> str:
    parts = []
    for word, near in unknown.items():
        hint = tr("nearest known: {words}", words=", ".join(near)) if near else tr("no known word is close")
        shown = word if word.isprintable() else ascii(word)  # an invisible character is spelled out
        parts.append(tr("'{word}' ({hint})", word=shown, hint=hint) if shown == word
                     else tr("{word} ({hint})", word=shown, hint=hint))
    return tr("Not in the task's vocabulary: {words}. The model only knows: {known}", words="; ".join(parts),
              known=" ".join(_KNOWN))


@torch.no_grad()
def sentence_state(model, text: str, layer: int = 0, head: int = 0) -> SentenceState:
    """Run the chapter's trained model on ``text``: the prediction at the pronoun, every attention map, and
    how much of the pronoun's attention goes to the noun that agrees with it.

    Nothing is dropped or guessed: a word outside the vocabulary stops the run and is named with its nearest
    known words; a sentence without a pronoun still shows its maps, with no prediction; when no noun or several
    nouns agree with the pronoun, there is no single referent and no share.

    Args:
        model: a :class:`~utils.layers.TinyEncoderClassifier` trained on :func:`~utils.tasks.pronoun_task`.
        text: the sentence, in words of :data:`~utils.tasks.VOCAB`.
        layer, head: the map to enlarge (0-based). Default: ``0, 0``.

    Returns:
        A :class:`SentenceState`.

    >>> from utils.layers import TinyEncoderClassifier
    >>> model = TinyEncoderClassifier(len(VOCAB), 16, 2, 2, 32, len(NOUNS)).eval()
    >>> state = sentence_state(model, "the king met the girl because she left .")
    >>> tuple(state.maps.shape), state.pronoun_pos, state.referent_pos
    ((2, 2, 9, 9), 6, 4)
    >>> sentence_state(model, "the kinq left").message.split(":")[0]
    "Not in the task's vocabulary"
    """
    num_layers, num_heads = len(model.layers), model.layers[0].self_attn.num_heads
    if not (0 <= layer < num_layers and 0 <= head < num_heads):
        raise ValueError(f"layer={layer}, head={head}: the model has {num_layers} layers of {num_heads} heads")
    words, unknown = split_sentence(text)
    empty = dict(maps=None, pronoun_pos=None, predicted=None, confidence=None, referent_pos=None,
                 referent_share=None, correct=None, layer=layer, head=head)
    if unknown:
        return SentenceState(words, unknown, message=_unknown_message(unknown), **empty)
    if not words or len(words) > MAX_WORDS:
        message = tr("Type a sentence of 1 to {most} words (this one has {n}).", most=MAX_WORDS, n=len(words))
        return SentenceState(words, unknown, message=message, **empty)
    model.eval()
    tokens = torch.tensor([[VOCAB.index(word) for word in words]])  # (1, L)
    logits, maps = model(tokens, need_weights=True)  # (1, L, C), layers x (1, H, L, L)
    maps = torch.stack([m[0] for m in maps])  # (layers, H, L, L)
    pronouns = [i for i, word in enumerate(words) if word in AGREEMENT]
    if not pronouns:
        return SentenceState(words, unknown, maps, None, None, None, None, None, None, layer, head,
                             tr("No pronoun (he, she, it, they): the model only answers at one, so there is no "
                                "prediction; the maps are still what it computes."))
    pronoun = pronouns[-1]
    probabilities = logits[0, pronoun].softmax(-1)  # (C,)
    best = int(probabilities.argmax())
    predicted, confidence = NOUNS[best], float(probabilities[best])
    agreeing = [i for i, word in enumerate(words) if word in AGREEMENT[words[pronoun]]]
    said = tr("At '{pronoun}' (word {pos}) the model says '{predicted}' ({confidence:.0%})", pronoun=words[pronoun],
              pos=pronoun + 1, predicted=predicted, confidence=confidence)
    if len(agreeing) != 1:
        nouns = ", ".join(tr("'{noun}' (word {pos})", noun=words[i], pos=i + 1) for i in agreeing) or tr("none")
        message = tr("{said}. Nouns that agree with '{pronoun}': {nouns}, so there is no single referent to score "
                     "it against.", said=said, pronoun=words[pronoun], nouns=nouns)
        return SentenceState(words, unknown, maps, pronoun, predicted, confidence, None, None, None, layer, head,
                             message)
    referent = agreeing[0]
    share = maps[:, :, pronoun, referent]  # (layers, H)
    correct = predicted == words[referent]
    verdict = (tr("right, the noun that agrees is '{noun}'", noun=words[referent]) if correct
               else tr("WRONG, the noun that agrees is '{noun}'", noun=words[referent]))
    shares = ", ".join(f"L{i + 1}H{h + 1} {share[i, h]:.0%}" for i in range(num_layers) for h in range(num_heads))
    message = tr("{said}: {verdict}. Share of the pronoun's attention on it: {shares}", said=said, verdict=verdict,
                 shares=shares)
    return SentenceState(words, unknown, maps, pronoun, predicted, confidence, referent, share, correct, layer, head,
                         message)


def sentence_explorer(model, examples=(), *, text: str = ""):
    """Type a sentence (or pick one of ``examples``) and see what the trained model does with it.

    Args:
        model: the chapter's trained :class:`~utils.layers.TinyEncoderClassifier`.
        examples: sentences the combobox offers. Default: none.
        text: the sentence shown first. Default: the first example.

    Returns:
        An ``ipywidgets.VBox`` (see :func:`~utils.widgets.common.wire_explorer`): a combobox, a dropdown
        choosing the enlarged map, a caption (the prediction, or the unknown words) and an ``Output``.
        ``controls`` names them ``text`` and ``enlarge``; ``state`` is the :class:`SentenceState` drawn last.
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
                tr("The un-normalised stream is what keeps pre-LN's gradients well-behaved; the final LayerNorm "
                   "takes care of the output scale."),
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
