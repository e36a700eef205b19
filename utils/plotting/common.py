"""Helpers shared by every chapter's figures: attention heatmaps, layers x heads grids, and a figure as PNG
bytes (:func:`figure_png`, what an explorer shows and the static edition's grid stores)."""

from __future__ import annotations

import io
from collections.abc import Sequence

# No backend is chosen here: notebooks use the inline backend, tests and scripts set MPLBACKEND=Agg.
import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from matplotlib.layout_engine import PlaceHolderLayoutEngine

from utils.i18n.messages import tr

__all__ = ["attention_heatmap", "attention_grid", "cell_text", "to_numpy", "figure_png", "CMAP"]

CMAP = "viridis"  # colour-blind safe; every figure in the course uses it (or cividis)


def to_numpy(values):
    """A 2-D or 1-D float array for plotting, from a tensor or array-like (detached, on the CPU)."""
    if isinstance(values, torch.Tensor):
        return values.detach().to("cpu", torch.float32).numpy()
    return torch.as_tensor(values, dtype=torch.float32).numpy()


def figure_png(fig: Figure, *, dpi: int = 80, **savefig_kwargs) -> bytes:
    """``fig`` as PNG bytes (the explorers' resolution), and close it.

    >>> fig, ax = plt.subplots()
    >>> figure_png(fig)[:4], plt.fignum_exists(fig.number)
    (b'\\x89PNG', False)
    """
    if isinstance(fig.get_layout_engine(), PlaceHolderLayoutEngine):
        # what fig.tight_layout() leaves: it lays out nothing, yet savefig draws the figure once more for it
        # (about a third of the time); the pixels are the same without it (tests/test_explorer_grid.py)
        fig.set_layout_engine(None)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, **savefig_kwargs)
    plt.close(fig)
    return buffer.getvalue()


def cell_text(ax, x: float, y: float, text: str, **kwargs):
    """Write ``text`` centred in the heatmap cell at column ``x``, row ``y`` of ``ax``; return the ``Text``.

    The text lies inside the axes, so it is left out of the layout pass (``in_layout=False``): tight
    and constrained layout then need not measure every cell's number. The figure's pixels are the same
    (``tests/test_explorer_grid.py``).

    >>> fig, ax = plt.subplots()
    >>> cell_text(ax, 0, 0, "0.50").get_in_layout()
    False
    """
    return ax.text(x, y, text, ha="center", va="center", in_layout=False, **kwargs)


def _check_2d(name: str, values, rows: Sequence[str] | None, cols: Sequence[str] | None):
    array = to_numpy(values)
    if array.ndim != 2:
        raise ValueError(f"{name} must be 2-D (L, S), got shape {tuple(array.shape)}")
    if rows is not None and len(rows) != array.shape[0]:
        raise ValueError(f"row labels: got {len(rows)} labels for {array.shape[0]} rows (shape {tuple(array.shape)})")
    if cols is not None and len(cols) != array.shape[1]:
        raise ValueError(
            f"column labels: got {len(cols)} labels for {array.shape[1]} columns (shape {tuple(array.shape)})"
        )
    return array


def attention_heatmap(
    weights,
    queries: Sequence[str] | None = None,
    keys: Sequence[str] | None = None,
    *,
    title: str | None = None,
    ax=None,
    annotate: bool | None = None,
    vmin: float | None = None,
    vmax: float | None = None,
    colorbar: bool = True,
    xlabel: str | None = None,
    ylabel: str | None = None,
) -> Figure:
    """Draw an (L, S) matrix of attention weights or scores with token tick labels.

    Args:
        weights: (L, S) tensor or array.
        queries: L row labels (the tokens that attend). Default: indices.
        keys: S column labels. Default: ``queries`` when the matrix is square, else indices.
        title: a title that says what to notice. Default: "Attention weights" (in the learner's language).
        ax: draw into this axes instead of a new figure; the caller then lays the figure out
            (``fig.tight_layout()``) once every axes is drawn.
        annotate: write each value in its cell. Default: when the matrix is at most 10 x 10.
        vmin, vmax: colour range. Default: the data range.
        xlabel, ylabel: the axis labels. Default: "key (attended to)" and "query (attending)".

    Returns:
        The figure.

    >>> fig = attention_heatmap(torch.eye(3), ["a", "b", "c"])
    >>> fig.axes[0].get_title()
    'Attention weights'
    """
    if keys is None and queries is not None and len(queries) == to_numpy(weights).shape[-1]:
        keys = queries
    array = _check_2d("weights", weights, queries, keys)
    own_figure = ax is None
    if own_figure:
        fig, ax = plt.subplots(figsize=(1.0 + 0.55 * array.shape[1], 0.8 + 0.5 * array.shape[0]))
    else:
        fig = ax.figure
    image = ax.imshow(array, cmap=CMAP, vmin=vmin, vmax=vmax, aspect="auto")
    ax.set_xticks(
        range(array.shape[1]), list(keys) if keys is not None else range(array.shape[1]), rotation=45, ha="right"
    )
    ax.set_yticks(range(array.shape[0]), list(queries) if queries is not None else range(array.shape[0]))
    ax.set_xlabel(tr("key (attended to)") if xlabel is None else xlabel)
    ax.set_ylabel(tr("query (attending)") if ylabel is None else ylabel)
    ax.set_title(tr("Attention weights") if title is None else title)
    if annotate is None:
        annotate = array.shape[0] <= 10 and array.shape[1] <= 10
    if annotate:
        low, high = image.get_clim()
        middle = (low + high) / 2
        for i in range(array.shape[0]):
            for j in range(array.shape[1]):
                cell_text(ax, j, i, f"{array[i, j]:.2f}", fontsize=7,
                          color="black" if array[i, j] > middle else "white")
    if colorbar:
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    if own_figure:  # into a given axes, the caller lays the whole figure out once it is complete
        fig.tight_layout()
    return fig


def attention_grid(
    maps,
    tokens: Sequence[str] | None = None,
    *,
    title: str | None = None,
    row_label: str | None = None,
    col_label: str | None = None,
) -> Figure:
    """Draw a grid of attention maps, e.g. layers x heads, titled "Layer 1, Head 2".

    Args:
        maps: (R, C, L, S) tensor, or a list of R tensors of shape (C, L, S).
        tokens: labels for L (and S when square).
        title: the figure title. Default: "Attention maps".
        row_label, col_label: what a row and a column are. Default: "Layer" and "Head".

    Returns:
        The figure.

    >>> fig = attention_grid(torch.rand(2, 3, 4, 4).softmax(-1), list("abcd"))
    >>> len(fig.axes), fig.axes[1].get_title()
    (6, 'Layer 1, Head 2')
    """
    if isinstance(maps, (list, tuple)):
        maps = torch.stack([torch.as_tensor(m) for m in maps])
    maps = torch.as_tensor(maps)
    if maps.dim() != 4:
        raise ValueError(f"maps must be (R, C, L, S), got shape {tuple(maps.shape)}")
    rows, cols, length, _ = maps.shape
    size = 0.9 + 0.28 * length
    fig, axes = plt.subplots(rows, cols, figsize=(size * cols, size * rows), squeeze=False)
    for r in range(rows):
        for c in range(cols):
            ax = axes[r][c]
            ax.imshow(to_numpy(maps[r, c]), cmap=CMAP, vmin=0.0, vmax=1.0, aspect="auto")
            if row_label is None and col_label is None:
                name = tr("Layer {layer}, Head {head}", layer=r + 1, head=c + 1)
            else:
                name = tr("{row_label} {row}, {col_label} {col}", row_label=row_label or tr("Layer"), row=r + 1,
                          col_label=col_label or tr("Head"), col=c + 1)
            ax.set_title(name, fontsize=9)
            if tokens is not None:
                ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=7)
                ax.set_yticks(range(len(tokens)), tokens, fontsize=7)
            else:
                ax.set_xticks([])
                ax.set_yticks([])
    fig.suptitle(tr("Attention maps") if title is None else title)
    fig.tight_layout()
    return fig
