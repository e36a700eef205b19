"""Explorers and quiz for chapter 7, attention in a real language model.

* :func:`heads_explorer`: SmolLM2 on a text the learner types: one score (sink, previous token, induction)
  for all 270 heads, and the attention of the chosen head, with byte tokens merged into characters.
* :func:`sink_cache_explorer`: step through a text with StreamingLLM's cache (a window plus sinks): what the
  cache holds, and the per-token loss measured with and without sinks.
* :func:`ch7_quiz`.

Each wires a pure state function of :mod:`utils.explorers.llm` (tested by pytest) and a figure of
:mod:`utils.plotting.llm` to controls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from utils.explorers.llm import SCORES, TextAttention, heads_state, sink_cache_state, text_attention
from utils.i18n.messages import tr
from utils.plotting.llm import heads_explorer_figure, sink_cache_figure
from utils.widgets.common import wire_explorer
from utils.widgets.quiz import Choice, Numeric, Quiz

__all__ = ["notable_heads", "heads_explorer", "sink_cache_explorer", "ch7_quiz"]

_KEEP_RUNS = 8  # texts whose run the explorer remembers (a run is every head's T x T map)


def notable_heads(attention: TextAttention, count: int = 3) -> list[tuple[int, int]]:
    """The heads (0-based ``(layer, head)``) with the highest score of each kind on ``attention``'s text, in
    :data:`~utils.explorers.llm.SCORES` order, then the first heads of layer 1 until there are ``count`` layers
    and ``count`` heads among them: the static edition's grid of heads.

    >>> maps = torch.eye(3).expand(4, 3, 3, 3)
    >>> sink = torch.zeros(4, 3); sink[2, 1] = 1
    >>> run = TextAttention("a", [1, 2, 3], list("abc"), [[0], [1], [2]], maps,
    ...                     {"sink": sink, "previous": torch.zeros(4, 3), "induction": None}, "")
    >>> notable_heads(run, 2)
    [(2, 1), (0, 0)]
    """
    found: list[tuple[int, int]] = []
    for score in SCORES:
        grid = attention.scores.get(score)
        if grid is not None:
            best = int(grid.argmax())
            pick = divmod(best, grid.shape[1])
            if pick not in found:
                found.append(pick)
    H = attention.maps.shape[1] if attention.maps is not None else 1
    extra = 0
    while len({layer for layer, _ in found}) < count or len({head for _, head in found}) < count:
        pick = (extra // H, extra % H)
        if pick not in found:
            found.append(pick)
        extra += 1
        if extra > 10 * count * H:
            break
    return found


def heads_explorer(model, tokenizer, examples: Sequence[str], *, text: str = "", groups_of: int = 1):
    """Type a text (or pick one of ``examples``); see every head's score and one head's attention on it.

    Args:
        model: SmolLM2 as a :class:`~utils.llm.model.LlamaDecoder`.
        tokenizer: its tokenizer.
        examples: texts the combobox offers; the static edition renders these (fixed texts).
        text: the text shown first. Default: the first example.
        groups_of: query heads per key/value head, to name the shared one. Default: ``1``.

    Returns:
        An ``ipywidgets.VBox`` (see :func:`~utils.widgets.common.wire_explorer`): a combobox, the score's
        buttons, layer and head sliders (counted from 1), a caption and an ``Output``. ``controls`` names them
        ``text``, ``score``, ``layer`` and ``head``; ``state`` is the :class:`~utils.explorers.llm.HeadsState`
        drawn last.
    """
    import html

    import ipywidgets as w

    examples = list(examples)
    runs: dict[str, TextAttention] = {}

    def run(value: str) -> TextAttention:
        if value not in runs:
            if len(runs) >= _KEEP_RUNS:
                runs.pop(next(iter(runs)))
            runs[value] = text_attention(model, tokenizer, value)
        return runs[value]

    first = run(text or (examples[0] if examples else ""))
    layers, heads = model.config.num_layers, model.config.num_heads
    sentence = w.Combobox(value=first.text, options=examples, ensure_option=False, continuous_update=False,
                          description=tr("text"), layout=w.Layout(width="640px"))
    score = w.ToggleButtons(options=[(tr("sink"), "sink"), (tr("previous token"), "previous"),
                                     (tr("induction"), "induction")], value="sink", description=tr("score"))
    picks = notable_heads(first)
    layer = w.IntSlider(value=picks[0][0] + 1, min=1, max=layers, description=tr("layer"))
    head = w.IntSlider(value=picks[0][1] + 1, min=1, max=heads, description=tr("head"))
    caption = w.HTML()

    def compute():
        state = heads_state(run(sentence.value), layer.value - 1, head.value - 1, score.value, groups_of=groups_of)
        caption.value = f"<span>{html.escape(state.message)}</span>"
        return state

    return wire_explorer(
        [sentence, score, w.HBox([layer, head]), caption],
        {"text": sentence, "score": score, "layer": layer, "head": head}, compute, heads_explorer_figure,
        grid={"text": examples, "layer": sorted({p[0] + 1 for p in picks}), "head": sorted({p[1] + 1 for p in picks})},
        pure_draw=True)  # the static edition: the examples, and the layers and heads of the notable heads


def sink_cache_explorer(losses: Mapping[tuple[int | None, int], torch.Tensor], *, bytes_per_token: int = 1,
                        steps: Sequence[int] | None = None):
    """Play or step through a text with StreamingLLM's cache; a switch picks the number of sinks.

    Args:
        losses: ``(window, sinks) -> (T - 1,)`` per-token losses (:func:`~utils.llm.streaming_loss`) with the
            full run ``(None, 0)`` and, for one window, ``sinks = 0`` and at least one other number of sinks.
        bytes_per_token: one position's keys and values in all layers. Default: ``1``.
        steps: the steps the static edition renders. Default: eight spread over the text.

    Returns:
        An ``ipywidgets.VBox``; ``controls`` names ``step`` and ``sinks``; ``play`` is the ``Play`` widget that
        drives ``step``; ``state`` is the :class:`~utils.explorers.llm.SinkCacheState` drawn last.
    """
    import ipywidgets as w

    windows = sorted({key[0] for key in losses if key[0] is not None})
    if len(windows) != 1 or (None, 0) not in losses:
        raise ValueError(f"losses: expected the full run (None, 0) and runs of one window, got "
                         f"{sorted(losses, key=str)}")
    window = windows[0]
    sink_options = sorted(key[1] for key in losses if key[0] == window)
    T = len(losses[None, 0]) + 1
    first = min(window + max(sink_options) + 16, T - 1)
    play = w.Play(value=first, min=0, max=T - 1, interval=200, step=8, description=tr("play"))
    step = w.IntSlider(value=first, min=0, max=T - 1, description=tr("step"), layout=w.Layout(width="480px"))
    w.link((play, "value"), (step, "value"))
    sinks = w.ToggleButtons(options=[(tr("{n} sinks", n=n), n) for n in sink_options], value=max(sink_options),
                            description=tr("sinks"))
    if steps is None:
        steps = sorted({0, window // 2, window + max(sink_options), first, T // 4, T // 2, 3 * T // 4, T - 1})
    return_box = wire_explorer(
        [w.HBox([play, step]), sinks], {"step": step, "sinks": sinks},
        lambda: sink_cache_state(step.value, window, sinks.value, losses, bytes_per_token=bytes_per_token),
        sink_cache_figure, grid={"step": sorted({s for s in steps if 0 <= s < T})}, pure_draw=True)
    return_box.play = play
    return return_box


def ch7_quiz() -> Quiz:
    """Five questions: the sink, what GQA shares, the RoPE layouts, the KV cache's size, the streaming cache."""
    return Quiz([
        Choice(
            tr("In most layers of SmolLM2, most heads put a large share of their attention on the first token, "
               "whatever that token is. What is that?"),
            [tr("A bug in the course's decoder: transformers' Llama would not do it"),
             tr("A defect of this small model that training should have removed"),
             tr("An attention sink: the softmax must give out a total weight of 1, and a head with nothing to add "
                "parks it on a token every query can see"),
             tr("The first token is the most important word of the text")],
            answer=2,
            feedback=[
                tr("The course's decoder gives the same logits as transformers' LlamaForCausalLM on the same file; "
                   "the sink is in the trained weights."),
                tr("Large trained models have sinks too (StreamingLLM found them in Llama 2, MPT, Falcon and "
                   "Pythia), and the model uses them: evict the first tokens and the loss jumps, as we measured."),
                tr("Right: the model relies on that parking place, which is why evicting the first tokens from a "
                   "cache breaks it (section 7)."),
                tr("The sink share hardly depends on which token comes first: it is the position every query can "
                   "see, not the word."),
            ],
            explanation=tr("The sink is a feature the model learned, not an error: keep it when you cut the cache."),
        ),
        Choice(
            tr("SmolLM2 has 9 query heads and 3 key/value heads per layer. What do the 3 query heads of a group "
               "share?"),
            [tr("Their queries"), tr("Their keys and values; each keeps its own queries"),
             tr("Their attention weights"), tr("Nothing: the 9 heads are averaged down to 3")],
            answer=1,
            feedback=[
                tr("The opposite: each query head has its own rows of q_proj. Sharing queries would make the heads "
                   "identical."),
                tr("Right: repeat_kv hands the same K and V to G = 3 query heads, which still attend differently "
                   "(the chapter's 3 x 3 figure), and the cache holds 3 heads instead of 9."),
                tr("Their weights differ, because their queries differ; the figure of one layer's 9 heads shows it."),
                tr("Nothing is averaged: all 9 query heads produce an output, which out_proj mixes."),
            ],
            explanation=tr("GQA shares K and V (what the cache stores), not Q."),
        ),
        Numeric(
            tr("How many times smaller is SmolLM2's KV cache per token with its 3 key/value heads than the same "
               "model's with one key/value head per query head (multi-head attention)?"),
            answer=3, tolerance=1e-9,
            explanation=tr("9 / 3 = 3: the cache stores H_kv heads, and the query heads do not count."),
            hint=tr("The cache holds K and V of each key/value head; count the heads."),
        ),
        Choice(
            tr("You load SmolLM2's weights into a decoder that applies chapter 4's interleaved RoPE, without "
               "permuting the rows of q_proj and k_proj. What happens?"),
            [tr("An error about shapes"), tr("Nothing: both layouts rotate pairs by the same angles"),
             tr("It runs without any error, and its loss is worse"),
             tr("Only texts longer than the training context suffer")],
            answer=2,
            feedback=[
                tr("The shapes are the same in both layouts; nothing checks which features are paired."),
                tr("Both rotate pairs by the same angles, but not the same pairs of features: (2i, 2i + 1) against "
                   "(i, i + D/2). Weights trained for one layout are wrong for the other unless permuted."),
                tr("Right: the chapter measured it; the permutation of the rows fixes it exactly."),
                tr("Every position except 0 is rotated in the wrong pairs, so short texts suffer too."),
            ],
            explanation=tr("Same maths, a different order of features: convert the weights, never mix layouts."),
        ),
        Choice(
            tr("A model trained with full attention must read a stream longer than the cache you can afford. Which "
               "cache keeps its loss close to full attention's?"),
            [tr("The last W tokens (a plain sliding window)"),
             tr("The last W tokens plus the first few tokens (attention sinks)"),
             tr("The first W tokens"), tr("Any W tokens: the cache size is all that matters")],
            answer=1,
            feedback=[
                tr("That is the one that breaks: once the first token leaves the window the loss jumps, as the "
                   "chapter measured."),
                tr("Right: StreamingLLM keeps 4 sink tokens beside the window, which recovered most of the loss in "
                   "the chapter's measurement."),
                tr("Then every new token would be predicted from the start of the text only."),
                tr("With almost the same size (64 and 68 slots), the window alone and the window with sinks gave "
                   "very different losses."),
            ],
            explanation=tr("Cutting a trained model's cache to a window is only safe if the sinks stay."),
        ),
    ], title=tr("Chapter 7 quiz: attention in a real language model"))
