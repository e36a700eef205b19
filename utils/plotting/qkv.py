"""Figures of chapter 1, "Queries, keys and values". See :mod:`utils.plotting`.

* :func:`parameter_free_figure`: the weakness of attention without projections, X Xᵀ.
* :func:`linear_weight_figure`: ``nn.Linear`` stores W transposed and adds a bias.
* :func:`scores_figure`: the projected scores Q Kᵀ as a heatmap.
* :func:`query_scores_figure`: one query's scores against every key, drawn by the chapter's explorer.

Every colour bar says what its colours measure.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from utils.i18n.messages import tr
from utils.plotting.common import CMAP, attention_heatmap, to_numpy

__all__ = ["parameter_free_figure", "linear_weight_figure", "scores_figure", "query_scores_figure"]



def _check_square(name: str, values: torch.Tensor, tokens: Sequence[str]) -> None:
    if values.dim() != 2 or values.shape[0] != values.shape[1] or values.shape[0] != len(tokens):
        raise ValueError(f"{name}: expected shape (L, L) with L = len(tokens) = {len(tokens)}, "
                         f"got {tuple(values.shape)}")


def _label_colorbar(ax, label: str) -> None:
    """Label the colour bar that :func:`attention_heatmap` drew for the image in ``ax``."""
    ax.images[0].colorbar.set_label(label)


def parameter_free_figure(tokens: Sequence[str], scores: torch.Tensor, weights: torch.Tensor) -> Figure:
    """Scores X Xᵀ and weights softmax(X Xᵀ) side by side, for attention without projections.

    Args:
        tokens: the L tokens (rows and columns).
        scores: (L, L) scores X Xᵀ.
        weights: (L, L) weights, softmax of ``scores`` over the keys.

    Returns:
        A figure with two heatmaps (and their colour bars): the scores mirror across the diagonal, and the
        weights put most of each row on the diagonal.

    >>> tokens = ["a", "b", "c"]
    >>> x = torch.eye(3) * 2
    >>> fig = parameter_free_figure(tokens, x @ x.T, (x @ x.T).softmax(-1))
    >>> [ax.get_title() for ax in fig.axes[:2]]
    ['scores X Xᵀ: mirror-symmetric', 'weights softmax(X Xᵀ): the diagonal wins']
    """
    _check_square("scores", scores, tokens)
    _check_square("weights", weights, tokens)
    fig, (left, right) = plt.subplots(1, 2, figsize=(12.5, 5.2))
    attention_heatmap(scores, tokens, title=tr("scores X Xᵀ: mirror-symmetric"), ax=left, annotate=False,
                      xlabel=tr("key token (S)"), ylabel=tr("query token (L)"))
    attention_heatmap(weights, tokens, title=tr("weights softmax(X Xᵀ): the diagonal wins"), ax=right,
                      annotate=False, vmin=0.0, vmax=1.0, xlabel=tr("key token (S)"), ylabel=tr("query token (L)"))
    _label_colorbar(left, tr("score x_i · x_j"))
    _label_colorbar(right, tr("weight (each row sums to 1)"))
    fig.suptitle(tr("Without projections, every pair scores the same both ways and each token mostly attends to "
                    "itself"))
    fig.tight_layout()
    return fig


def linear_weight_figure(weight: torch.Tensor, linear: torch.nn.Linear, *, name: str = "linear") -> Figure:
    """Show a projection matrix W (E, D) next to ``linear.weight`` (D, E) and ``linear.bias`` (D,).

    Args:
        weight: (E, D), the matrix of the maths, used as ``x @ weight``.
        linear: the ``nn.Linear(E, D)`` holding the same map; its weight is ``weight.T``.
        name: the layer's name in the learner's code, shown in the panel titles (``lin.weight``).
            Default: ``"linear"``.

    Returns:
        A figure with three panels: W, ``linear.weight`` (the same numbers, transposed) and the bias.

    >>> lin = torch.nn.Linear(3, 2)
    >>> fig = linear_weight_figure(lin.weight.detach().T, lin)
    >>> [ax.get_title() for ax in fig.axes[:3]]
    ['W: (E, D) = (3, 2)', 'linear.weight: (D, E) = (2, 3)', 'linear.bias: (D,) = (2,)']
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"name: expected the layer's Python name, e.g. 'lin', got {name!r}")
    if weight.dim() != 2 or tuple(weight.shape) != (linear.in_features, linear.out_features):
        raise ValueError(f"weight: expected shape (E, D) = {(linear.in_features, linear.out_features)} "
                         f"to match {linear}, got {tuple(weight.shape)}")
    e, d = weight.shape
    stored = linear.weight.detach()
    bias = linear.bias.detach() if linear.bias is not None else torch.zeros(d)
    low = float(min(weight.min(), stored.min(), bias.min()))
    high = float(max(weight.max(), stored.max(), bias.max()))
    fig, axes = plt.subplots(1, 3, figsize=(11, 4.4), gridspec_kw={"width_ratios": [d, e, 1.2]}, layout="constrained")
    panels = [
        (to_numpy(weight), f"W: (E, D) = ({e}, {d})", tr("output feature (D)"), tr("input feature (E)")),
        (to_numpy(stored), f"{name}.weight: (D, E) = ({d}, {e})", tr("input feature (E)"), tr("output feature (D)")),
        (to_numpy(bias)[:, None], f"{name}.bias: (D,) = ({d},)", "", tr("output feature (D)")),
    ]
    for ax, (array, title, xlabel, ylabel) in zip(axes, panels):
        image = ax.imshow(array, cmap=CMAP, vmin=low, vmax=high, aspect="auto")
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_yticks(range(array.shape[0]))
        ax.set_xticks(range(array.shape[1]) if array.shape[1] > 1 else [])
    colorbar = fig.colorbar(image, ax=list(axes), fraction=0.03)
    colorbar.set_label(tr("entry value, one scale for all three panels"))
    fig.suptitle(tr("nn.Linear keeps W transposed, (D, E), and adds a bias: lin(x) = x @ lin.weight.T + lin.bias"))
    return fig


def scores_figure(tokens: Sequence[str], scores: torch.Tensor, *, title: str | None = None) -> Figure:
    """The (L, S) scores Q Kᵀ as a heatmap with token labels and a labelled colour bar.

    Args:
        tokens: the L = S tokens.
        scores: (L, S) scores.
        title: a title that says what to notice. Default: the two things chapter 1 reads off the
            scores, measured on ``scores`` (whether they are mirror-symmetric, and in how many rows a
            query's own key scores highest), in the learner's language.

    Returns:
        The figure: one heatmap and its colour bar.

    >>> fig = scores_figure(["a", "b"], torch.tensor([[2.0, 1.0], [0.5, 3.0]]))
    >>> fig.axes[0].images[0].colorbar.ax.get_ylabel()
    'score q_i · k_j (unscaled dot product)'
    >>> fig.axes[0].get_title()
    "Q Kᵀ: not mirror-symmetric; a query's own key scores highest in 2 of 2 rows"
    """
    _check_square("scores", scores, tokens)
    if title is None:
        title = _scores_title(scores)
    fig = attention_heatmap(scores, tokens, annotate=False, xlabel=tr("key token (S)"), ylabel=tr("query token (L)"),
                            title=title)
    _label_colorbar(fig.axes[0], tr("score q_i · k_j (unscaled dot product)"))
    fig.tight_layout()  # again, to make room for the colour bar's label
    return fig


def _scores_title(scores: torch.Tensor) -> str:
    """What the scores show, measured: mirror symmetry (scores[i, j] == scores[j, i]) and the rows whose
    highest score is on the diagonal (a query scoring its own key highest)."""
    symmetric = bool(torch.allclose(scores, scores.transpose(-2, -1)))
    own = int((scores.argmax(dim=-1) == torch.arange(scores.shape[-1])).sum())
    mirror = tr("mirror-symmetric") if symmetric else tr("not mirror-symmetric")
    return tr("Q Kᵀ: {mirror}; a query's own key scores highest in {own} of {rows} rows", mirror=mirror, own=own,
              rows=scores.shape[-2])


def query_scores_figure(tokens: Sequence[str], scores: torch.Tensor, query_index: int, *,
                        title: str | None = None) -> Figure:
    """One query's scores against every key: a bar chart, and the full (L, S) heatmap with its row outlined.

    Args:
        tokens: the L = S tokens.
        scores: (L, S) scores.
        query_index: the row to show.
        title: the figure title. Default: names the query and its top-scoring key.

    Returns:
        A figure with two panels (bars, heatmap) and the heatmap's colour bar.

    >>> fig = query_scores_figure(["a", "b"], torch.tensor([[2.0, 1.0], [1.0, 3.0]]), 1)
    >>> fig.axes[0].get_title()
    "scores of query 'b' (row 1)"
    """
    if scores.dim() != 2 or scores.shape[1] != len(tokens):
        raise ValueError(f"scores: expected shape (L, S) with S = len(tokens) = {len(tokens)}, "
                         f"got {tuple(scores.shape)}")
    if not 0 <= query_index < scores.shape[0]:
        raise ValueError(f"query_index: expected 0 <= query_index < L = {scores.shape[0]}, got {query_index}")
    row = to_numpy(scores[query_index])
    top = int(row.argmax())
    query = tokens[query_index]
    fig, (bars_ax, heat_ax) = plt.subplots(1, 2, figsize=(12.5, 4.8), gridspec_kw={"width_ratios": [1.0, 1.1]})
    colours = plt.get_cmap(CMAP)([0.85 if j == top else 0.35 for j in range(len(row))])
    bars_ax.bar(range(len(row)), row, color=colours)
    bars_ax.axhline(0.0, color="black", linewidth=0.8)
    bars_ax.set_xticks(range(len(tokens)), list(tokens), rotation=45, ha="right")
    bars_ax.set_xlabel(tr("key token (S)"))
    bars_ax.set_ylabel(tr("score of '{query}' against each key", query=query))
    bars_ax.set_title(tr("scores of query '{query}' (row {row})", query=query, row=query_index))
    attention_heatmap(scores, tokens, title=tr("all scores (L, S); the chosen row is outlined"), ax=heat_ax,
                      annotate=False, xlabel=tr("key token (S)"), ylabel=tr("query token (L)"))
    _label_colorbar(heat_ax, tr("score q_i · k_j (unscaled; x_i · x_j without projections)"))  # the explorer draws both
    heat_ax.add_patch(Rectangle((-0.5, query_index - 0.5), scores.shape[1], 1.0, fill=False,
                                edgecolor="white", linewidth=2.5))
    fig.suptitle(title or tr("Query '{query}' scores highest against key '{key}' (position {position})",
                             query=query, key=tokens[top], position=top))
    fig.tight_layout()
    return fig
