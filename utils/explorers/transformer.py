"""The explorers' state of chapter 5, the full Transformer layer (pure, tested by pytest);
:mod:`utils.widgets.transformer` wires them to controls and :mod:`utils.plotting.transformer` draws them.

* :func:`attention_view`: one head's attention on one held-out sentence of the pronoun task, with the
  pronoun's row singled out.
* :func:`split_sentence`, :func:`sentence_state`: the trained model on a sentence the learner types, with the
  prediction, every layer and head and the referent share.
* :func:`pronoun_cost_line`: one line of the chapter's per-pronoun ablation printout, in the learner's language.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

import torch

from utils.attention import padding_mask
from utils.i18n.messages import tr
from utils.tasks import AGREEMENT, NOUNS, VOCAB, PronounData

__all__ = ["AttentionView", "attention_view", "MAX_WORDS", "split_sentence", "SentenceState", "sentence_state",
           "pronoun_cost_line"]


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


def pronoun_cost_line(pronoun: str, head: str, cost: float, shown: dict[str, float]) -> str:
    """One printed line of chapter 5's per-pronoun ablation, all in the learner's language: the head whose
    switching off costs ``pronoun`` the most accuracy, that cost, then ``shown``: row label (already in the
    learner's language, e.g. from :func:`utils.plotting.transformer.configuration_label`) -> the accuracy on
    that pronoun with that row's heads."""
    if not shown:
        raise ValueError("shown must name at least one row (label -> accuracy), got an empty mapping")
    rows = tr(", ").join(f"{label} {value:.2f}" for label, value in shown.items())
    return tr("'{pronoun}': switching off {head} costs the most, {cost} | {rows}",
              pronoun=pronoun, head=head, cost=f"{cost:.3f}", rows=rows)
