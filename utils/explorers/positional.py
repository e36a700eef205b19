"""The explorer's state of chapter 4, "Positional encoding": :func:`positional_explorer_state` computes
what the explorer draws (pure, tested by pytest); :mod:`utils.widgets.positional` wires it to sliders and
a toggle, and :mod:`utils.plotting.positional` draws it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import torch

from utils._text import pad
from utils.i18n.messages import tr
from utils.positional import LearnedPositionalEncoding, apply_rotary, sinusoidal_encoding

__all__ = ["ENCODING_KINDS", "ROPE_KEY_SHIFT", "PositionalExplorerState", "positional_explorer_state", "align_right",
           "offset_reading", "peak_reading"]

ROPE_KEY_SHIFT = 4
"""For RoPE the explorer's key is its query turned by this many positions, ``k = R(4) q``: the score of the
query at m with the key at n then peaks at m - n = +4 (a query that looks for the token 4 positions back),
and the curve shows the sign of the offset."""


def _display_name(kind: str) -> str:
    """``ENCODING_KINDS[kind]`` in the learner's language."""
    names = {"sinusoidal": tr("sinusoidal"), "learned": tr("learned (random init)"), "rope": "RoPE"}
    return names[kind]


class _DisplayNames(Mapping[str, str]):
    """Encoding key -> display name, looked up when read, so it is in the language in force then.

    >>> from utils.i18n.messages import using_language
    >>> with using_language("en"):
    ...     ENCODING_KINDS
    {'sinusoidal': 'sinusoidal', 'learned': 'learned (random init)', 'rope': 'RoPE'}
    """

    def __getitem__(self, kind: str) -> str:
        return _display_name(kind)

    def __iter__(self) -> Iterator[str]:
        return iter(("sinusoidal", "learned", "rope"))

    def __len__(self) -> int:
        return 3

    def __repr__(self) -> str:
        return repr(dict(self))


ENCODING_KINDS: Mapping[str, str] = _DisplayNames()
"""Encoding key -> its display name in the learner's language (English: ``sinusoidal``, ``learned (random
init)``, ``RoPE``)."""


@dataclass(frozen=True)
class PositionalExplorerState:
    """What the positional-encoding explorer draws for one (kind, position, dimension)."""

    kind: str  # a key of ENCODING_KINDS
    label: str  # its display name
    position: int  # p
    dimension: int  # j
    table: torch.Tensor  # (L, E)
    row: torch.Tensor  # (E,) table[p]
    column: torch.Tensor  # (L,) table[:, j]
    offsets: torch.Tensor  # (L,) m - n for every position n, with m = p: p, p - 1, ..., p - L + 1
    similarity: torch.Tensor  # (L,) table[p] . table[n]; RoPE: the query at p . the key at n
    similarity_title: str

    def at(self, offset: int) -> float:
        """The curve at the signed offset m - n = ``offset`` (the position n = p - offset).

        >>> data = positional_explorer_state("sinusoidal", position=3, dimension=0, length=8, d_model=4)
        >>> data.at(2) == data.similarity[1].item(), round(data.at(2), 4), round(data.at(-2), 4)
        (True, 0.5837, 0.5837)
        """
        length = len(self.offsets)
        if not self.position - length < offset <= self.position:
            raise ValueError(f"offset {offset} is outside {self.position - length + 1}..{self.position} "
                             f"(m - n for p = {self.position}, L = {length})")
        return self.similarity[self.position - offset].item()


def positional_explorer_state(kind: str, position: int, dimension: int, *, length: int = 48,
                              d_model: int = 32, seed: int = 0) -> PositionalExplorerState:
    """What the explorer draws for one setting of its controls.

    * ``"sinusoidal"``: the fixed table ``PE`` (L, E).
    * ``"learned"``: a freshly initialised :class:`~utils.positional.LearnedPositionalEncoding` table (L, E),
      i.e. what a model starts from before training.
    * ``"rope"``: RoPE adds nothing to the embedding; it rotates it. The "table" shows ``R(p) q`` for one
      fixed query vector ``q`` (the same token placed at every position p), so row ``p`` is what that
      token's query looks like at position ``p``.

    The curve is the dot product of row ``position`` (at m = p) with every row n, against the signed
    offset m - n. For RoPE it is the attention score of the query at p with a key at every n, the key
    being ``k = R(ROPE_KEY_SHIFT) q`` (:data:`ROPE_KEY_SHIFT`): ``(R_p q)·(R_n k)`` depends on m - n
    alone and, unlike the sinusoidal curve, is not even in it (it peaks at m - n = +4).

    Returns:
        A :class:`PositionalExplorerState`: ``table`` (L, E), ``row`` (E,), ``column`` (L,), ``offsets``
        (L,), ``similarity`` (L,), ``position``, ``dimension``, ``kind``, ``label`` and ``similarity_title``.

    >>> data = positional_explorer_state("sinusoidal", position=3, dimension=0, length=8, d_model=4)
    >>> data.table.shape, data.offsets.tolist()[:4]
    (torch.Size([8, 4]), [3, 2, 1, 0])
    """
    if kind not in ENCODING_KINDS:
        raise ValueError(f"kind must be one of {list(ENCODING_KINDS)}, got {kind!r}")
    if not 0 <= position < length:
        raise ValueError(f"position {position} is outside 0..{length - 1}")
    if not 0 <= dimension < d_model:
        raise ValueError(f"dimension {dimension} is outside 0..{d_model - 1}")
    with torch.random.fork_rng(devices=[]):  # leave the notebook's random stream untouched
        torch.manual_seed(seed)
        if kind == "sinusoidal":
            table = sinusoidal_encoding(length, d_model)  # (L, E)
        elif kind == "learned":
            table = LearnedPositionalEncoding(length, d_model).weight.detach().clone()  # (L, E)
        else:
            query = torch.randn(d_model)  # (E,) one token's query
    if kind == "rope":
        table = apply_rotary(query.expand(length, d_model))  # (L, E): R(p) q for each p
        key = apply_rotary(query[None], torch.tensor([ROPE_KEY_SHIFT]))[0]  # (E,) k = R(4) q
        similarity = apply_rotary(key.expand(length, d_model)) @ table[position]  # (L,) (R_n k)·(R_p q)
    else:
        similarity = table @ table[position]  # (L,)
    note = tr("same shape wherever p is") if kind != "learned" else tr("changes as you move p")
    title = (tr("query at p = {p} against keys at n\n({note})", p=position, note=note) if kind == "rope"
             else tr("similarity to p = {p}\n({note})", p=position, note=note))  # two lines: fits the panel
    return PositionalExplorerState(
        kind=kind,
        label=_display_name(kind),
        position=position,
        dimension=dimension,
        table=table,
        row=table[position],
        column=table[:, dimension],
        offsets=position - torch.arange(length),
        similarity=similarity,
        similarity_title=title,
    )


def align_right(text: str, width: int) -> str:
    """``text`` right-aligned in ``width`` columns of a monospace printout, a wide character (Chinese,
    full-width punctuation) counting as two, so that a column of Chinese labels lines up as an English
    one does (``f"{text:>{width}}"`` counts every character as one). A longer ``text`` is kept whole.

    >>> [align_right(label, 6) for label in ("RoPE", "正弦")]
    ['  RoPE', '  正弦']
    """
    return pad(text, width, ">")


def offset_reading(first: PositionalExplorerState, second: PositionalExplorerState, offset: int, *,
                   width: int = 21) -> str:
    """One printed line, in the learner's language, of the explorer's "Try it": the curve of ``first`` at
    the signed offsets ``+offset`` and ``-offset``, and the curve of ``second`` (the same encoding at another
    position p) at ``+offset``; the label is right-aligned in ``width`` columns."""
    if second.kind != first.kind:
        raise ValueError(f"second must be a state of the same encoding as first ({first.kind!r}), "
                         f"got {second.kind!r}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset <= 0:
        raise ValueError(f"offset must be a positive int (it is read at +offset and -offset), got {offset!r}")
    return tr("{label}: p = {p}: {plus} at +{k}, {minus} at -{k} | p = {q}: {later} at +{k}",
              label=align_right(first.label, width), p=first.position, q=second.position, k=offset,
              plus=f"{first.at(offset):8.4f}", minus=f"{first.at(-offset):8.4f}", later=f"{second.at(offset):8.4f}")


def peak_reading(state: PositionalExplorerState) -> str:
    """Where the curve of ``state`` is largest, as a line in the learner's language."""
    peak = int(state.offsets[state.similarity.argmax()].item())
    return tr("{label}'s curve is largest at m - n = {peak}", label=state.label, peak=f"{peak:+d}")
