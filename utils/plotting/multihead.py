"""Figures for chapter 3, "Multi-head attention".

:func:`head_split_figure`, :func:`head_maps_figure`, :func:`head_token_figure`,
:func:`head_similarity_figure` and :func:`speed_ratio_figure` draw numbers computed elsewhere: the
hand-built heads and the head-similarity measure are in :mod:`utils.heads`. :func:`head_explorer_figure`
draws the head explorer's state (:mod:`utils.explorers.multihead`).

Shapes: N batch, H heads, L target length, S source length, E model dimension, D = E // H.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from utils.explorers.multihead import HeadExplorerState
from utils.i18n.messages import tr
from utils.plotting.common import CMAP, cell_text, to_numpy

__all__ = [
    "head_split_figure",
    "head_maps_figure",
    "head_token_figure",
    "head_explorer_figure",
    "head_similarity_figure",
    "speed_ratio_figure",
]


# --------------------------------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------------------------------


def head_split_figure(vector: torch.Tensor, num_heads: int, *, token: str = "token") -> Figure:
    """One token's E features as a strip, cut into H heads of D features each.

    Args:
        vector: ``(E,)`` the token's projected features.
        num_heads: H, a divisor of E.
        token: the token's text, for the title.

    >>> fig = head_split_figure(torch.arange(8.0), 4)
    >>> fig.axes[0].get_xlabel()
    'feature index e (0 .. E-1)'
    """
    values = to_numpy(vector).reshape(-1)
    E = values.shape[0]
    if num_heads < 1 or E % num_heads:
        raise ValueError(f"num_heads = {num_heads} must divide E = {E}")
    D = E // num_heads
    fig, ax = plt.subplots(figsize=(min(14.0, 1.5 + 0.45 * E), 2.2))
    image = ax.imshow(values[None, :], cmap=CMAP, aspect="auto")
    for h in range(1, num_heads):
        ax.axvline(h * D - 0.5, color="white", linewidth=3)
    for h in range(num_heads):
        ax.text(h * D + (D - 1) / 2, -0.62, tr("head {head}", head=h + 1), ha="center", va="bottom", fontsize=9)
    ax.set_xticks(range(E))
    ax.set_yticks([0], [token])
    ax.set_xlabel(tr("feature index e (0 .. E-1)"))
    ax.set_ylabel(tr("token"))
    ax.set_ylim(0.5, -1.0)
    ax.set_title(tr("'{token}': E = {E} features cut into H = {H} contiguous blocks of D = {D}", token=token, E=E,
                    H=num_heads, D=D), pad=4)
    fig.colorbar(image, ax=ax, fraction=0.03, pad=0.02).set_label(tr("feature value"))
    fig.tight_layout()
    return fig


def head_maps_figure(weights: torch.Tensor, tokens: Sequence[str], *, title: str | None = None,
                     links: Sequence[str] | None = None) -> Figure:
    """A row of per-head attention maps for one sentence, titled "Head 1", "Head 2", ...

    Args:
        weights: ``(H, L, S)`` for one sentence (take ``weights[0]`` of an ``(N, H, L, S)`` tensor).
        tokens: L labels (and S when square).
        title: the figure title. Default: names what each head links when ``links`` is given (``"H = 3:
            head 1 links eats-apple, head 2 red-apple, ..."``), else says to compare the heads.
        links: one ``"token-token"`` pair per head, the relation that head finds. Default: ``None``.

    >>> fig = head_maps_figure(torch.rand(2, 3, 3).softmax(-1), list("abc"))
    >>> [ax.get_title() for ax in fig.axes[:2]]
    ['Head 1', 'Head 2']
    >>> head_maps_figure(torch.rand(2, 3, 3).softmax(-1), list("abc"), links=["a-b", "c-a"])._suptitle.get_text()
    'H = 2: head 1 links a-b, head 2 c-a'
    """
    maps = torch.as_tensor(weights).detach()
    if maps.dim() != 3:
        raise ValueError(f"weights must be (H, L, S) for one sentence, got {tuple(maps.shape)}")
    H, L, S = maps.shape
    if len(tokens) != L:
        raise ValueError(f"tokens: got {len(tokens)} labels for L = {L} (weights {tuple(maps.shape)})")
    if links is not None and len(links) != H:
        raise ValueError(f"links: got {len(links)} pairs for H = {H} heads (weights {tuple(maps.shape)})")
    if title is None and links is not None:
        heads = tr("head {n} links {pair}", n=1, pair=links[0])
        heads += "".join(tr(", head {n} {pair}", n=h + 1, pair=pair) for h, pair in enumerate(links[1:], start=1))
        title = tr("H = {H}: {heads}", H=H, heads=heads)
    cols = min(H, 6)
    rows = -(-H // cols)
    size = 1.6 + 0.45 * L
    fig, axes = plt.subplots(rows, cols, figsize=(size * cols + 1.2, size * rows + 0.8), squeeze=False)
    image = None
    for h in range(rows * cols):
        ax = axes[h // cols][h % cols]
        if h >= H:
            ax.set_visible(False)
            continue
        image = ax.imshow(to_numpy(maps[h]), cmap=CMAP, vmin=0.0, vmax=1.0, aspect="auto")
        ax.set_title(tr("Head {head}", head=h + 1), fontsize=12)
        key_labels = list(tokens) if S == L else list(range(S))
        ax.set_xticks(range(S), key_labels, rotation=90, fontsize=11)
        ax.set_yticks(range(L), list(tokens), fontsize=11)
        ax.set_xlabel(tr("key (S)"), fontsize=11)
        if h % cols == 0:
            ax.set_ylabel(tr("query (L)"), fontsize=11)
    fig.suptitle(title or tr("{H} heads, one sentence: each head attends in its own pattern", H=H))
    fig.tight_layout()
    fig.colorbar(image, ax=[ax for ax in axes.flat if ax.get_visible()], fraction=0.02, pad=0.02).set_label(
        tr("attention weight"), fontsize=11)
    return fig


def head_token_figure(weights: torch.Tensor, tokens: Sequence[str], head: int, token: int) -> Figure:
    """One head as a heatmap, and one query token's row of it as bars (the explorer's view).

    Args:
        weights: ``(H, L, L)`` for one sentence.
        tokens: L labels.
        head: which head, 0-based.
        token: which query token, 0-based.

    >>> fig = head_token_figure(torch.rand(2, 3, 3).softmax(-1), list("abc"), head=1, token=0)
    >>> fig.axes[1].get_ylabel()
    'weight'
    """
    maps = torch.as_tensor(weights).detach()
    if maps.dim() != 3:
        raise ValueError(f"weights must be (H, L, S), got {tuple(maps.shape)}")
    H, L, _ = maps.shape
    if not 0 <= head < H or not 0 <= token < L:
        raise ValueError(f"head must be in [0, {H}) and token in [0, {L}); got head={head}, token={token}")
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.5, 3.8), gridspec_kw={"width_ratios": [1.1, 1]})
    image = left.imshow(to_numpy(maps[head]), cmap=CMAP, vmin=0.0, vmax=1.0, aspect="auto")
    left.set_xticks(range(L), list(tokens), rotation=45, ha="right")
    left.set_yticks(range(L), list(tokens))
    left.add_patch(plt.Rectangle((-0.5, token - 0.5), L, 1, fill=False, edgecolor="red", linewidth=2))
    left.set_xlabel(tr("key (attended to)"))
    left.set_ylabel(tr("query (attending)"))
    left.set_title(tr("Head {head} of {H}: all queries", head=head + 1, H=H))
    fig.colorbar(image, ax=left, fraction=0.046, pad=0.04).set_label(tr("attention weight"))
    row = to_numpy(maps[head, token])
    colours = plt.get_cmap(CMAP)(row)
    right.bar(range(L), row, color=colours, edgecolor="black", linewidth=0.5)
    right.set_xticks(range(L), list(tokens), rotation=45, ha="right")
    right.set_ylim(0, 1)
    right.set_xlabel(tr("key (attended to)"))
    right.set_ylabel(tr("weight"))
    top = int(row.argmax())
    tied = [tokens[i] for i in range(L) if row[top] - row[i] < 1e-6]
    if len(tied) == L:
        right.set_title(tr("'{token}': uniform, no preference ({weight:.2f} each)", token=tokens[token],
                           weight=row[top]))
    elif len(tied) > 1:
        right.set_title(tr("'{token}' looks equally at {keys} ({weight:.2f} each)", token=tokens[token],
                           keys=tr(" and ").join(f"'{t}'" for t in tied), weight=row[top]))
    else:
        right.set_title(tr("'{token}' looks mostly at '{key}' ({weight:.2f})", token=tokens[token], key=tokens[top],
                           weight=row[top]))
    fig.tight_layout()
    return fig


def head_explorer_figure(state: HeadExplorerState) -> Figure:
    """The head explorer's figure for one state: :func:`head_token_figure` of its chosen head and query token.

    >>> from utils.explorers.multihead import head_explorer_state
    >>> head_explorer_figure(head_explorer_state(3, head=1, token=5)).axes[0].get_title()
    'Head 2 of 3: all queries'
    """
    return head_token_figure(state.weights, state.tokens, state.head, state.token)


def head_similarity_figure(similarity: torch.Tensor, *, metric: str | None = None) -> Figure:
    """The ``(H, H)`` head-similarity matrix from :func:`utils.heads.head_similarity`, annotated; ``metric``
    names the measure in the title (default: "1 - JS divergence").

    >>> fig = head_similarity_figure(torch.eye(3))
    >>> fig.axes[0].get_xlabel()
    'head'
    """
    sim = torch.as_tensor(similarity).detach()
    if sim.dim() != 2 or sim.shape[0] != sim.shape[1]:
        raise ValueError(f"similarity must be (H, H), got {tuple(sim.shape)}")
    H = sim.shape[0]
    metric = tr("1 - JS divergence") if metric is None else metric
    off = sim[~torch.eye(H, dtype=torch.bool)]
    mean_off = float(off.mean()) if off.numel() else float("nan")
    fig, ax = plt.subplots(figsize=(3.2 + 0.9 * H, 2.4 + 0.8 * H))
    image = ax.imshow(to_numpy(sim), cmap=CMAP, vmin=0.0, vmax=1.0)
    labels = [str(h + 1) for h in range(H)]
    ax.set_xticks(range(H), labels)
    ax.set_yticks(range(H), labels)
    ax.set_xlabel(tr("head"))
    ax.set_ylabel(tr("head"))
    if H <= 10:
        for i in range(H):
            for j in range(H):
                value = float(sim[i, j])
                cell_text(ax, j, i, f"{value:.2f}", fontsize=11, color="black" if value > 0.5 else "white")
    ax.set_title(tr("Head similarity ({metric}); mean off-diagonal {mean:.2f}\n(near 1 = redundant heads)",
                    metric=metric, mean=mean_off))
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04).set_label(tr("similarity ({metric})", metric=metric))
    fig.tight_layout()
    return fig


def speed_ratio_figure(rows: Sequence[dict]) -> Figure:
    """Bar chart of time ratios against the PyTorch built-in (1.0 = as fast), with min-max spread.

    Args:
        rows: dicts with ``"name"``, ``"mode"``, ``"ratio"``, ``"ratio_min"``, ``"ratio_max"``, as
            produced by :func:`utils.benchmark.attention_benchmark`.

    >>> fig = speed_ratio_figure([{"name": "a", "mode": "forward", "ratio": 1.1, "ratio_min": 1.0, "ratio_max": 1.2}])
    >>> fig.axes[0].get_ylabel()
    'time / built-in time'
    """
    if not rows:
        raise ValueError("rows: nothing to plot")
    labels = [f"{r['name']}\n{r['mode']}" for r in rows]
    ratios = [r["ratio"] for r in rows]
    low = [r["ratio"] - r["ratio_min"] for r in rows]
    high = [r["ratio_max"] - r["ratio"] for r in rows]
    colours = plt.get_cmap(CMAP)([0.25 if r["ratio"] <= 1.0 else 0.75 for r in rows])
    fig, ax = plt.subplots(figsize=(1.5 + 1.3 * len(rows), 3.8))
    ax.bar(range(len(rows)), ratios, yerr=[low, high], capsize=4, color=colours, edgecolor="black")
    ax.axhline(1.0, color="black", linestyle="--", linewidth=1)
    ax.set_xticks(range(len(rows)), labels, fontsize=8)
    ax.set_ylabel(tr("time / built-in time"))
    ax.set_xlabel(tr("implementation and mode"))
    ax.set_title(tr("Below the dashed line = faster than the PyTorch built-in (median, min-max bars)"))
    fig.tight_layout()
    return fig
