"""The explorers' state of chapter 7, attention in a real language model (pure, tested by pytest):

* :func:`text_attention` runs the model once on a text and keeps every head's map and scores;
  :func:`heads_state` picks what the layers x heads explorer draws from it (one score's grid, one head's
  map with byte tokens merged into characters);
* :func:`held_positions` and :func:`sink_cache_state`: what StreamingLLM's cache (a window plus sinks) holds
  at one step of a text, and the per-token losses measured so far.

:mod:`utils.widgets.llm` wires them to controls and :mod:`utils.plotting.llm` draws them.
Shape letters: H heads, T tokens, P pieces (tokens merged into whole characters), W window.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from utils._text import text_table
from utils.i18n.messages import tr
from utils.llm.analysis import induction_score, merge_byte_tokens, previous_token_score, sink_share

__all__ = ["SCORES", "TextAttention", "text_attention", "piece_label", "merge_map", "HeadsState", "heads_state",
           "held_positions", "SinkCacheState", "sink_cache_state", "run_label", "streaming_table"]

SCORES = ("sink", "previous", "induction")
"""The per-head scores the explorer offers: the share on the first token, on the token before, and on the
token after an earlier occurrence of the current one."""
MAX_TOKENS = 64
"""The explorer reads at most this many tokens of a text (its maps are T x T per head, 270 heads)."""


def piece_label(text: str) -> str:
    """A token's text as a tick label: a leading space shown as ``·``, line breaks and tabs spelled out.

    >>> piece_label(" the"), piece_label("\\n\\n"), piece_label("")
    ('·the', '\\\\n\\\\n', '∅')
    """
    if not text:
        return "∅"
    text = text.replace("\n", "\\n").replace("\t", "\\t")
    return "·" + text[1:] if text.startswith(" ") else text


def merge_map(weights: torch.Tensor, groups: Sequence[Sequence[int]]) -> torch.Tensor:
    """An attention map over tokens ``(T, T)`` as a map over pieces ``(P, P)``: a piece's column adds the
    weights on its tokens, a piece's row averages the rows of its tokens, so each row still sums to 1.

    >>> w = torch.tensor([[1.0, 0, 0], [0.5, 0.5, 0], [0.2, 0.3, 0.5]])
    >>> merge_map(w, [[0], [1, 2]])
    tensor([[1.0000, 0.0000],
            [0.3500, 0.6500]])
    """
    T = weights.shape[-1]
    flat = [i for group in groups for i in group]
    if weights.dim() != 2 or weights.shape[0] != T or flat != list(range(T)):
        raise ValueError(f"groups: expected consecutive groups covering the {T} tokens of a square (T, T) map, "
                         f"got {[list(g) for g in groups]} for a map of shape {tuple(weights.shape)}")
    member = torch.zeros(len(groups), T)  # (P, T): 1 where token t belongs to piece p
    for p, group in enumerate(groups):
        member[p, list(group)] = 1.0
    rows = member / member.sum(-1, keepdim=True)  # (P, T): the mean over a piece's tokens
    return rows @ weights.float() @ member.T  # (P, T) @ (T, T) @ (T, P) -> (P, P)


@dataclass(frozen=True)
class TextAttention:
    """One run of the model on a text: every head's attention and its three scores."""

    text: str
    ids: list[int]  # the tokens read (at most MAX_TOKENS)
    labels: list[str]  # one tick label per piece (tokens merged into whole characters)
    groups: list[list[int]]  # the token indices of each piece
    maps: torch.Tensor | None  # (layers, H, T, T); None when the text is too short to read
    scores: dict[str, torch.Tensor | None]  # SCORES -> (layers, H); induction None when no token repeats
    message: str  # what the explorer writes above the figure ("" when all is well)


@torch.no_grad()
def text_attention(model, tokenizer, text: str, *, max_tokens: int = MAX_TOKENS) -> TextAttention:
    """Run ``model`` on ``text`` once and keep every layer's and head's attention map and scores.

    Args:
        model: a :class:`~utils.llm.model.LlamaDecoder` (SmolLM2).
        tokenizer: its tokenizer (``encode(text).ids``, ``decode(ids)``).
        text: any text; only its first ``max_tokens`` tokens are read.
        max_tokens: Default: :data:`MAX_TOKENS`.

    Returns:
        A :class:`TextAttention`. The induction score is ``None`` when no token occurs twice (it measures
        the attention to what followed an earlier occurrence of the current token).
    """
    ids = list(tokenizer.encode(text).ids)
    message = ""
    if len(ids) > max_tokens:
        message = tr("Only the first {n} of the text's {total} tokens are read.", n=max_tokens, total=len(ids))
        ids = ids[:max_tokens]
    pieces = merge_byte_tokens(tokenizer, ids)
    if message and len(pieces) > 1 and "\ufffd" in pieces[-1][0]:  # the cut fell inside a character: drop its bytes
        ids = ids[:len(ids) - len(pieces[-1][1])]
        pieces = pieces[:-1]
    labels, groups, start = [], [], 0
    for piece, piece_ids in pieces:
        labels.append(piece_label(piece))
        groups.append(list(range(start, start + len(piece_ids))))
        start += len(piece_ids)
    if len(ids) < 2:
        return TextAttention(text, ids, labels, groups, None, dict.fromkeys(SCORES),
                             tr("Type a text of at least two tokens (this one has {n}).", n=len(ids)))
    maps = model.attention_maps(torch.tensor([ids]))  # (layers, 1, H, T, T)
    scores = {"sink": sink_share(maps), "previous": previous_token_score(maps), "induction": None}
    if len(set(ids)) < len(ids):
        scores["induction"] = induction_score(maps, torch.tensor([ids]))
    elif not message:
        message = tr("No token occurs twice, so there is no induction score: repeat a phrase to see one.")
    return TextAttention(text, ids, labels, groups, maps[:, 0], scores, message)


@dataclass(frozen=True)
class HeadsState:
    """What the layers x heads explorer draws: one score for every head, and one head's map."""

    score: str  # one of SCORES
    grid: torch.Tensor | None  # (layers, H) of that score; None when it cannot be computed for this text
    layer: int  # the chosen head (0-based)
    head: int
    kv_head: int  # the key/value head it shares (0-based)
    value: float | None  # its score
    labels: list[str]  # the pieces of the text
    head_map: torch.Tensor | None  # (P, P): the chosen head's attention over pieces
    message: str


def heads_state(attention: TextAttention, layer: int, head: int, score: str = "sink", *,
                groups_of: int = 1) -> HeadsState:
    """The explorer's state for one score and one head, from :func:`text_attention`'s run.

    Args:
        attention: a :class:`TextAttention`.
        layer, head: the head to enlarge, 0-based.
        score: one of :data:`SCORES`. Default: ``"sink"``.
        groups_of: query heads per key/value head (G), to name the shared key/value head. Default: ``1``.

    >>> maps = torch.eye(3).expand(2, 4, 3, 3)  # 2 layers, 4 heads: every query on itself
    >>> run = TextAttention("abc", [1, 2, 3], ["a", "b", "c"], [[0], [1], [2]], maps,
    ...                     {"sink": torch.zeros(2, 4), "previous": torch.zeros(2, 4), "induction": None}, "")
    >>> s = heads_state(run, 1, 3, "previous", groups_of=2)
    >>> s.grid.shape, s.kv_head, s.value, s.head_map.diagonal().tolist()
    (torch.Size([2, 4]), 1, 0.0, [1.0, 1.0, 1.0])
    """
    if score not in SCORES:
        raise ValueError(f"score: expected one of {', '.join(SCORES)}, got {score!r}")
    message = attention.message
    if attention.maps is None:
        return HeadsState(score, None, layer, head, head // groups_of, None, attention.labels, None, message)
    layers, H = attention.maps.shape[:2]
    if not (0 <= layer < layers and 0 <= head < H):
        raise ValueError(f"layer, head: expected 0 <= layer < {layers} and 0 <= head < {H}, got {layer}, {head}")
    grid = attention.scores[score]
    value = None if grid is None else float(grid[layer, head])
    head_map = merge_map(attention.maps[layer, head], attention.groups)  # (P, P)
    return HeadsState(score, grid, layer, head, head // groups_of, value, attention.labels, head_map, message)


def held_positions(step: int, window: int, sinks: int) -> list[int]:
    """The positions a StreamingLLM cache holds after position ``step`` was written, slot by slot.

    Slots ``0..sinks-1`` keep the first positions; position ``p >= sinks`` goes to slot
    ``sinks + (p - sinks) % window``, over the oldest one there (as :class:`~utils.llm.cache.SinkKVCache`).
    ``-1`` marks a slot not written yet.

    >>> held_positions(9, window=4, sinks=2)
    [0, 1, 6, 7, 8, 9]
    """
    if step < 0 or window < 1 or sinks < 0:
        raise ValueError(f"step, window, sinks: expected step >= 0, window >= 1, sinks >= 0, got {step}, {window}, "
                         f"{sinks}")
    slots = [p if p <= step else -1 for p in range(sinks)]
    for slot in range(window):
        newest = sinks + slot + (step - sinks - slot) // window * window  # the latest p <= step in this slot
        slots.append(newest if newest >= sinks and newest <= step else -1)
    return slots


@dataclass(frozen=True)
class SinkCacheState:
    """What the sink-window cache stepper draws at one step of a text."""

    step: int  # the newest position, just written
    window: int
    sinks: int
    slots: list[int]  # held_positions: the position in each slot (-1: empty)
    written: int  # the slot written at this step
    visible: list[int]  # the positions the newest token attends to, in order
    evicted: int  # earlier positions it no longer sees
    losses: dict[str, torch.Tensor]  # label -> per-token loss (T - 1,), the whole text
    label: str  # the curve of this setting (a key of losses)
    cache_bytes: int  # what the cache holds now (keys and values, all layers)
    full_bytes: int  # what a full cache would hold now


def sink_cache_state(step: int, window: int, sinks: int, losses: Mapping[tuple[int | None, int], torch.Tensor],
                     *, bytes_per_token: int = 1) -> SinkCacheState:
    """The stepper's state at position ``step``, for StreamingLLM's cache of ``window`` recent and ``sinks``
    first positions.

    Args:
        step: the newest position, ``0 <= step <= T - 1``.
        window, sinks: the cache.
        losses: ``(window, sinks) -> (T - 1,)`` per-token losses of whole runs (:func:`~utils.llm.streaming_loss`);
            key ``(None, 0)`` is full attention and is required, as is ``(window, sinks)``.
        bytes_per_token: one position's keys and values in all layers
            (:func:`~utils.llm.cache.kv_cache_bytes_per_token`). Default: ``1`` (counts positions).

    >>> losses = {(None, 0): torch.ones(9), (4, 2): torch.ones(9)}
    >>> s = sink_cache_state(9, 4, 2, losses)
    >>> s.slots, s.written, s.visible, s.evicted, s.cache_bytes, s.full_bytes
    ([0, 1, 6, 7, 8, 9], 5, [0, 1, 6, 7, 8, 9], 4, 6, 10)
    """
    if (None, 0) not in losses or (window, sinks) not in losses:
        raise ValueError(f"losses: expected the runs (None, 0) and ({window}, {sinks}), got {sorted(losses, key=str)}")
    T = len(losses[None, 0]) + 1
    if not 0 <= step < T:
        raise ValueError(f"step: expected 0 <= step < {T} (the text's tokens), got {step}")
    slots = held_positions(step, window, sinks)
    written = slots.index(step)
    visible = sorted(p for p in slots if p >= 0)
    curves = {run_label(None, 0): losses[None, 0], run_label(window, 0): losses.get((window, 0)),
              run_label(window, sinks): losses[window, sinks]}
    return SinkCacheState(step, window, sinks, slots, written, visible, step + 1 - len(visible),
                          {label: curve for label, curve in curves.items() if curve is not None},
                          run_label(window, sinks), len(visible) * bytes_per_token, (step + 1) * bytes_per_token)


def run_label(window: int | None, sinks: int = 0) -> str:
    """The name of a run of :func:`~utils.llm.streaming_loss`, in the learner's language.

    >>> run_label(None), run_label(64), run_label(64, 4)
    ('full cache', 'window 64 alone', 'window 64 + 4 sinks')
    """
    if window is None:
        return tr("full cache")
    if sinks == 0:
        return tr("window {window} alone", window=window)
    return tr("window {window} + {sinks} sinks", window=window, sinks=sinks)


def streaming_table(losses: Mapping[tuple[int | None, int], torch.Tensor], after: int) -> str:
    """StreamingLLM's measurement as a printed table, in the learner's language: for each run of
    :func:`~utils.llm.streaming_loss` (keyed ``(window, sinks)``, ``window`` None for the full cache), the
    mean loss over all predictions, over those from position ``after`` on, and the perplexity there; then,
    when the three runs are there, the share of the window's loss that the sinks recover.

    >>> losses = {(None, 0): torch.tensor([3.0, 3.0, 3.0]), (2, 0): torch.tensor([3.0, 5.0, 5.0]),
    ...           (2, 1): torch.tensor([3.0, 3.5, 3.5])}
    >>> print(streaming_table(losses, after=1))
    cache               mean loss  after position 1  perplexity there
    full cache              3.000             3.000              20.1
    window 2 alone          4.333             5.000             148.4
    window 2 + 1 sinks      3.333             3.500              33.1
    the sinks recover 75% of what the window alone lost
    """
    if not losses:
        raise ValueError("losses must hold at least one run, got none")
    lengths = {tuple(loss.shape) for loss in losses.values()}
    if len(lengths) != 1 or len(next(iter(lengths))) != 1:
        raise ValueError(f"losses must be 1-D tensors of one length (T - 1,), got shapes {sorted(lengths)}")
    length = next(iter(lengths))[0]
    if not 0 <= after < length:
        raise ValueError(f"after must be a position in 0..{length - 1} (the losses have {length}), got {after}")
    header = (tr("cache"), tr("mean loss"), tr("after position {position}", position=after),
              tr("perplexity there"))
    body = [(run_label(*key), f"{loss.mean():.3f}", f"{loss[after:].mean():.3f}", f"{loss[after:].mean().exp():.1f}")
            for key, loss in losses.items()]
    lines = [text_table(header, body, align="<>>>")]
    window = next((w for w, s in losses if w is not None and s == 0), None)
    sinks = max((s for w, s in losses if window is not None and w == window), default=0)
    if (None, 0) in losses and sinks > 0:
        full, alone, kept = (losses[key][after:].mean() for key in ((None, 0), (window, 0), (window, sinks)))
        if alone > full:
            lines.append(tr("the sinks recover {share:.0%} of what the window alone lost",
                            share=float((alone - kept) / (alone - full))))
    return "\n".join(lines)
