"""Figures of chapter 4, "Positional encoding". See utils/plotting/__init__.py.

Shape letters: L positions, E model dimension (``d_model``). A table ``pe`` is ``(L, E)``: one row per
position ``p``, one column per dimension ``j``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from utils.explorers.positional import PositionalExplorerState
from utils.i18n.messages import tr
from utils.plotting.common import CMAP, to_numpy

__all__ = [
    "encoding_heatmap",
    "encoding_curves",
    "wavelength_plot",
    "similarity_figure",
    "positional_explorer_figure",
]


def _check_table(pe) -> torch.Tensor:
    pe = torch.as_tensor(pe).detach().to("cpu", torch.float64)
    if pe.dim() != 2:
        raise ValueError(f"pe must be a 2-D table (L, E), got shape {tuple(pe.shape)}")
    return pe


def encoding_heatmap(pe, *, title: str | None = None,
                     ax=None, highlight_position: int | None = None,
                     highlight_dimension: int | None = None) -> Figure:
    """Draw an encoding table as a positions x dimensions heatmap.

    Args:
        pe: ``(L, E)`` table.
        title: what to notice. Default: "Each row is a position: fast stripes on the left, slow on the right".
        ax: draw into this axes instead of a new figure; the caller then lays the figure out once it is
            complete.
        highlight_position: outline this row. Default: ``None``.
        highlight_dimension: outline this column. Default: ``None``.

    >>> from utils.positional import sinusoidal_encoding
    >>> fig = encoding_heatmap(sinusoidal_encoding(10, 8))
    >>> fig.axes[0].get_xlabel(), fig.axes[0].get_ylabel()
    ('dimension j', 'position p')
    """
    table = to_numpy(_check_table(pe))
    L, E = table.shape
    own_figure = ax is None
    if own_figure:
        fig, ax = plt.subplots(figsize=(7, 4))
    else:
        fig = ax.figure
    limit = float(abs(table).max()) or 1.0  # symmetric colour range, so 0 is always the middle colour
    image = ax.imshow(table, cmap=CMAP, aspect="auto", vmin=-limit, vmax=limit, interpolation="nearest")
    ax.set_xlabel(tr("dimension j"))
    ax.set_ylabel(tr("position p"))
    ax.set_title(tr("Each row is a position: fast stripes on the left, slow on the right") if title is None else title)
    if highlight_position is not None:
        ax.axhline(highlight_position - 0.5, color="white", lw=1)
        ax.axhline(highlight_position + 0.5, color="white", lw=1)
    if highlight_dimension is not None:
        ax.axvline(highlight_dimension - 0.5, color="white", lw=1, ls="--")
        ax.axvline(highlight_dimension + 0.5, color="white", lw=1, ls="--")
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label=tr("value"))
    if own_figure:  # into a given axes, the caller lays the whole figure out once it is complete
        fig.tight_layout()
    return fig


def encoding_curves(pe, dimensions: Sequence[int], *,
                    title: str | None = None) -> Figure:
    """Plot ``pe[:, j]`` against the position for a few dimensions ``j``.

    Args:
        pe: ``(L, E)`` table.
        dimensions: the columns ``j`` to draw.
        title: what to notice. Default: "Low-index dimensions oscillate fast, high-index ones slowly".

    >>> from utils.positional import sinusoidal_encoding
    >>> fig = encoding_curves(sinusoidal_encoding(20, 8), [0, 1, 6])
    >>> len(fig.axes[0].get_lines())
    3
    """
    table = _check_table(pe)
    L, E = table.shape
    bad = [j for j in dimensions if not 0 <= j < E]
    if bad:
        raise ValueError(f"dimensions {bad} are outside 0..{E - 1} for a table of shape {tuple(table.shape)}")
    fig, ax = plt.subplots(figsize=(7, 3.2))
    colours = plt.get_cmap(CMAP)([k / max(1, len(dimensions) - 1) * 0.9 for k in range(len(dimensions))])
    for colour, j in zip(colours, dimensions):
        kind = "sin" if j % 2 == 0 else "cos"
        ax.plot(range(L), to_numpy(table[:, j]), color=colour, label=f"j = {j} ({kind})")
    ax.set_xlabel(tr("position p"))
    ax.set_ylabel("PE[p, j]")
    ax.set_title(tr("Low-index dimensions oscillate fast, high-index ones slowly") if title is None else title)
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    return fig


def wavelength_plot(d_model: int, *, base: float = 10000.0,
                    title: str | None = None) -> Figure:
    """Plot the wavelength ``2 pi base^(2i / E)`` of each pair ``i`` on a log axis (default title:
    "Wavelengths grow geometrically: a straight line on a log scale").

    >>> fig = wavelength_plot(16)
    >>> fig.axes[0].get_yscale()
    'log'
    """
    pairs = torch.arange(0, d_model, 2, dtype=torch.float64)  # 2i, (ceil(E/2),)
    wavelength = 2 * math.pi * base ** (pairs / d_model)
    fig, ax = plt.subplots(figsize=(6, 3.2))
    colour = plt.get_cmap(CMAP)(0.3)
    ax.plot(range(len(pairs)), wavelength.numpy(), "o-", color=colour, ms=3, label=tr("wavelength of pair i"))
    ax.axhline(2 * math.pi, color="gray", ls=":", label="2π")
    ax.axhline(2 * math.pi * base, color="gray", ls="--", label=f"{base:g}·2π")
    ax.set_yscale("log")
    ax.set_xlabel(tr("pair index i (dimensions 2i, 2i+1)"))
    ax.set_ylabel(tr("wavelength (positions)"))
    ax.set_title(tr("Wavelengths grow geometrically: a straight line on a log scale") if title is None else title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def similarity_figure(pe, position: int, *,
                      title: str | None = None) -> Figure:
    """Left: the ``(L, L)`` matrix of dot products ``PE(p)·PE(q)``. Right: the row of ``position``
    against the offset ``p - q`` (positive when q comes before p, as the explorer's ``m - n``). Default
    title: "PE(p)·PE(q) depends only on the offset p - q".

    >>> from utils.positional import sinusoidal_encoding
    >>> fig = similarity_figure(sinusoidal_encoding(16, 8), position=5)
    >>> len(fig.axes)
    3
    """
    table = _check_table(pe)
    L = table.shape[0]
    if not 0 <= position < L:
        raise ValueError(f"position {position} is outside 0..{L - 1}")
    sim = table @ table.T  # (L, L)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    image = left.imshow(to_numpy(sim), cmap=CMAP, aspect="auto", interpolation="nearest")
    left.set_xlabel(tr("position q"))
    left.set_ylabel(tr("position p"))
    left.set_title(tr("PE(p)·PE(q): constant along each diagonal"))
    fig.colorbar(image, ax=left, fraction=0.046, pad=0.04, label="PE(p)·PE(q)")
    offsets = position - torch.arange(L)  # p - q, the explorer's m - n: positive when q comes before p
    right.plot(offsets.flip(0).numpy(), to_numpy(sim[position].flip(0)), "o-", ms=2,
               color=plt.get_cmap(CMAP)(0.3))
    right.axvline(0, color="gray", ls=":")
    right.set_xlabel(tr("offset p - q"))
    right.set_ylabel(tr("PE({p})·PE({p} - offset)", p=position))
    right.set_title(tr("row p = {p}, against the offset", p=position))
    fig.suptitle(tr("PE(p)·PE(q) depends only on the offset p - q") if title is None else title)
    fig.tight_layout()
    return fig


def positional_explorer_figure(data: PositionalExplorerState) -> Figure:
    """The explorer's three panels, from :func:`utils.explorers.positional.positional_explorer_state`: the
    table with the chosen row and column outlined, the chosen row, and the dot product of the chosen
    position m = p with every position n against the signed offset m - n (for RoPE, the score of the query
    at p with the key at n)."""
    fig, (heat, row, curve) = plt.subplots(1, 3, figsize=(13, 3.6), gridspec_kw={"width_ratios": [1.3, 1, 1]})
    p, j = data.position, data.dimension
    encoding_heatmap(data.table, ax=heat,
                     title=tr("{label}: table (row p = {p}, column j = {j})", label=data.label, p=p, j=j),
                     highlight_position=p, highlight_dimension=j)
    colour = plt.get_cmap(CMAP)(0.3)
    values = to_numpy(data.row)
    row.bar(range(len(values)), values, color=colour)
    row.bar([j], [values[j]], color=plt.get_cmap(CMAP)(0.85))
    row.set_xlabel(tr("dimension j"))
    row.set_ylabel(tr("value at p = {p}", p=p))
    row.set_title(tr("encoding of position {p}", p=p))
    curve.plot(to_numpy(data.offsets.flip(0)), to_numpy(data.similarity.flip(0)), "o-", ms=2, color=colour)
    curve.axvline(0, color="gray", ls=":")
    curve.set_xlabel(tr("signed offset m - n (m = p = {p})", p=p))
    curve.set_ylabel(tr("dot product"))
    curve.set_title(data.similarity_title)
    fig.tight_layout()
    return fig
