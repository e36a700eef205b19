"""The explorer's state of chapter 4, "Positional encoding": :func:`positional_explorer_state` computes
what the explorer draws (pure, tested by pytest); :mod:`utils.widgets.positional` wires it to sliders and
a toggle, and :mod:`utils.plotting.positional` draws it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import torch

from utils.i18n.messages import tr
from utils.positional import LearnedPositionalEncoding, apply_rotary, sinusoidal_encoding

__all__ = ["ENCODING_KINDS", "PositionalExplorerState", "positional_explorer_state"]


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
    offsets: torch.Tensor  # (L,) q - p
    similarity: torch.Tensor  # (L,) table[q] . table[p]
    similarity_title: str


def positional_explorer_state(kind: str, position: int, dimension: int, *, length: int = 48,
                              d_model: int = 32, seed: int = 0) -> PositionalExplorerState:
    """What the explorer draws for one setting of its controls.

    * ``"sinusoidal"``: the fixed table ``PE`` (L, E).
    * ``"learned"``: a freshly initialised :class:`~utils.positional.LearnedPositionalEncoding` table (L, E),
      i.e. what a model starts from before training.
    * ``"rope"``: RoPE adds nothing to the embedding; it rotates it. The "table" shows ``R(p) u`` for one
      fixed content vector ``u`` (the same token placed at every position p), so row ``p`` is what that
      token's query or key looks like at position ``p``.

    The similarity is the dot product of row ``position`` with every row ``q``, against the offset ``q - p``.

    Returns:
        A :class:`PositionalExplorerState`: ``table`` (L, E), ``row`` (E,), ``column`` (L,), ``offsets``
        (L,), ``similarity`` (L,), ``position``, ``dimension``, ``kind``, ``label`` and ``similarity_title``.

    >>> data = positional_explorer_state("sinusoidal", position=3, dimension=0, length=8, d_model=4)
    >>> data.table.shape, data.offsets.tolist()[:4]
    (torch.Size([8, 4]), [-3, -2, -1, 0])
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
            content = torch.randn(d_model)  # (E,) one token's query/key
            table = apply_rotary(content.expand(length, d_model))  # (L, E): R(p) u for each p
    similarity = table @ table[position]  # (L,)
    note = tr("same shape wherever p is") if kind != "learned" else tr("changes as you move p")
    return PositionalExplorerState(
        kind=kind,
        label=_display_name(kind),
        position=position,
        dimension=dimension,
        table=table,
        row=table[position],
        column=table[:, dimension],
        offsets=torch.arange(length) - position,
        similarity=similarity,
        similarity_title=tr("similarity to p = {p}\n({note})", p=position, note=note),  # two lines: fits the panel
    )
