"""Figures for chapter 2, scaled dot-product attention and masks.

The numbers come from :mod:`utils.scaling` (the scale experiment) and
:func:`utils.explorers.sdpa.scale_explorer_state` (the explorer); these functions only draw them.
Shape letters: N batch, L queries, S keys, D the size of each query and key (the paper's d_k).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from utils.explorers.sdpa import MaskPolarityState, ScaleExplorerState
from utils.i18n.messages import tr
from utils.plotting.common import CMAP, attention_heatmap, cell_text, to_numpy

__all__ = [
    "sdpa_steps_figure",
    "variance_figure",
    "saturation_figure",
    "training_figure",
    "masks_figure",
    "scale_explorer_figure",
    "mask_polarity_figure",
]

_COLORS = plt.get_cmap(CMAP)(0.15), plt.get_cmap(CMAP)(0.7)  # scaled, unscaled


# --------------------------------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------------------------------


def sdpa_steps_figure(scores: torch.Tensor, scaled: torch.Tensor, weights: torch.Tensor,
                      tokens: Sequence[str]) -> Figure:
    """The three matrices of one attention call side by side: ``Q K^T``, scaled, softmax. Each is (L, S)."""
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    panels = ((tr("1. scores Q Kᵀ"), scores), (tr("2. scaled by 1/√D"), scaled),
              (tr("3. softmax: rows sum to 1"), weights))
    for ax, (title, matrix) in zip(axes, panels):
        attention_heatmap(matrix, tokens, tokens, title=title, ax=ax, colorbar=False)
    fig.suptitle(tr("Scaling shrinks the scores; the softmax turns each row into weights"))
    fig.tight_layout()
    return fig


def variance_figure(data: dict[str, list[float]]) -> Figure:
    """Log-log plot of var(q . k) against D, with the line var = D, and the scaled variance."""
    fig, ax = plt.subplots(figsize=(6, 4))
    dims = data["dims"]
    ax.loglog(dims, data["raw"], "o-", color=_COLORS[1], label=tr("var(q·k), measured"))
    ax.loglog(dims, dims, "--", color="gray", label="var = D")
    ax.loglog(dims, data["scaled"], "s-", color=_COLORS[0], label=tr("var(q·k / √D), measured"))
    ax.set_xlabel(tr("D (size of each query and key)"))
    ax.set_ylabel(tr("variance over random q, k"))
    ax.set_title(tr("Raw dot products grow like D; dividing by √D keeps them at 1"))
    ax.legend()
    fig.tight_layout()
    return fig


def saturation_figure(data: dict[str, list[float]]) -> Figure:
    """Two panels over D: the largest softmax weight, and the gradient norm, scaled vs unscaled."""
    fig, (ax_max, ax_grad) = plt.subplots(1, 2, figsize=(11, 4))
    dims = data["dims"]
    for key, color, label in (("scaled", _COLORS[0], tr("scaled by 1/√D")), ("raw", _COLORS[1], tr("unscaled"))):
        ax_max.semilogx(dims, data[f"max_weight_{key}"], "o-", color=color, label=label)
        ax_grad.loglog(dims, data[f"grad_norm_{key}"], "o-", color=color, label=label)
    ax_max.set_xlabel(tr("D (size of each query and key)"))
    ax_max.set_ylabel(tr("mean largest weight in a row"))
    ax_max.set_title(tr("Unscaled, the softmax becomes one-hot"))
    ax_max.set_ylim(0, 1.05)
    ax_grad.set_xlabel(tr("D (size of each query and key)"))
    ax_grad.set_ylabel(tr("mean ‖∂loss/∂scores‖"))
    ax_grad.set_title(tr("…and its gradient vanishes"))
    for ax in (ax_max, ax_grad):
        ax.legend()
    fig.tight_layout()
    return fig


def training_figure(curves: dict[str, list[list[float]]], *, dim: int | None = None,
                    seeds: Sequence[int] | None = None) -> Figure:
    """Loss per step of each seed's scaled and unscaled run of :func:`utils.scaling.train_with_and_without_scale`.

    Args:
        curves: ``{"scaled": [losses per seed], "unscaled": [...]}``.
        dim: D, for the title. Default: ``None`` (not shown).
        seeds: the seed of each curve, for the legend. Default: ``0, 1, ...``.
    """
    fig, ax = plt.subplots(figsize=(8, 4.2))
    styles = ("-", "--", ":", "-.")
    seeds = list(range(len(curves["scaled"]))) if seeds is None else list(seeds)
    for name, color in (("scaled", _COLORS[0]), ("unscaled", _COLORS[1])):
        for i, (seed, losses) in enumerate(zip(seeds, curves[name])):
            label = tr("{run}, seed {seed}", run=tr("scaled by 1/√D") if name == "scaled" else tr("unscaled"),
                       seed=seed)
            ax.plot(losses, color=color, ls=styles[i % len(styles)], lw=1.2, label=label)
    ax.axhline(math.log(8), color="gray", ls=":", lw=2, label=tr("chance (log 8)"))
    ax.set_xlabel(tr("training step"))
    ax.set_ylabel(tr("cross-entropy loss"))
    where = f" (D = {dim})" if dim else ""
    ax.set_title(tr("Same model, same batches{where}: unscaled starts higher and stays behind", where=where))
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    return fig


def masks_figure(padding: torch.Tensor, causal: torch.Tensor, sentences: Sequence[Sequence[str]],
                 tokens: Sequence[str]) -> Figure:
    """Left: a padding mask (N, S), one row per sentence, each cell labelled with its key's token or "pad".
    Right: a causal mask (L, L) over ``tokens``. True = may attend; one colour key for both."""
    padding, causal = to_numpy(padding).astype(float), to_numpy(causal).astype(float)
    fig, (ax_pad, ax_causal) = plt.subplots(1, 2, figsize=(12, 4.2), gridspec_kw={"width_ratios": [1.2, 1]})
    max_len = padding.shape[1]
    attention_heatmap(padding, [" ".join(s) for s in sentences], [str(j) for j in range(max_len)],
                      title=tr("Padding mask (N, S): only real tokens may be attended to"), ax=ax_pad,
                      colorbar=False, annotate=False, vmin=0, vmax=1, xlabel=tr("key position j (S)"),
                      ylabel=tr("sentence (N)"))
    for n, sentence in enumerate(sentences):
        for j in range(max_len):
            word = sentence[j] if j < len(sentence) else "pad"
            cell_text(ax_pad, j, n, word, fontsize=9, color="black" if padding[n, j] > 0.5 else "white")
    image = attention_heatmap(causal, tokens, tokens, title=tr("Causal mask (L, L): no looking ahead"), ax=ax_causal,
                              colorbar=False, annotate=False, vmin=0, vmax=1).axes[1].images[0]
    fig.suptitle(tr("A bool mask: True = may attend (the convention of F.scaled_dot_product_attention)"))
    fig.tight_layout(rect=(0, 0, 0.85, 0.95))
    colorbar = fig.colorbar(image, cax=fig.add_axes((0.865, 0.25, 0.015, 0.55)), ticks=[0, 1])
    colorbar.ax.set_yticklabels([tr("False:\nblocked"), tr("True:\nmay attend")])
    colorbar.set_label(tr("mask value"))
    return fig


def scale_explorer_figure(state: ScaleExplorerState) -> Figure:
    """Draw one state of the D / temperature explorer (see :func:`utils.explorers.sdpa.scale_explorer_state`)."""
    fig, (ax_hist, ax_row) = plt.subplots(1, 2, figsize=(11, 3.8))
    ax_hist.hist(to_numpy(state.scores).ravel(), bins=40, color=_COLORS[0])
    ax_hist.set_xlabel(tr("score fed to the softmax"))
    ax_hist.set_ylabel(tr("count"))
    ax_hist.set_title(tr("Scores: std {std:.2f}", std=state.score_std))
    weights = to_numpy(state.row)
    ax_row.bar(range(len(weights)), weights, color=_COLORS[1])
    ax_row.set_xticks(range(len(weights)), state.keys, rotation=45, ha="right")
    ax_row.set_ylim(0, 1.05)
    ax_row.set_xlabel(tr("key (S)"))
    ax_row.set_ylabel(tr("weight"))
    ax_row.set_title(tr("Row 0: max weight {top:.2f}, entropy {entropy:.2f} of {most:.2f} nats",
                        top=state.max_weight, entropy=state.entropy, most=state.max_entropy))
    fig.suptitle(tr("D = {d}, temperature {temperature:.2f}, scaling {state}", d=state.dim,
                    temperature=state.temperature, state=tr("on") if state.scaled else tr("off")))
    fig.tight_layout()
    return fig


def _mark_rows(ax, state: MaskPolarityState, width: int) -> None:
    """Outline the padded query rows (dashed) and the rows that see no key (solid), and colour their labels."""
    labels = ax.get_yticklabels()
    for i in range(len(state.tokens)):
        if state.fully_masked_rows[i]:
            ax.add_patch(Rectangle((-0.5, i - 0.5), width, 1, fill=False, edgecolor="red", lw=2.2))
            labels[i].set_color("red")
        elif state.padded_rows[i]:
            ax.add_patch(Rectangle((-0.5, i - 0.5), width, 1, fill=False, edgecolor="orange", lw=2, ls="--"))
            labels[i].set_color("darkorange")


def mask_polarity_figure(state: MaskPolarityState) -> Figure:
    """Left: the keys the API let each query see. Right: the weights it computed, each written out,
    NaN as hatched "NaN" cells (never a colour). Padded query rows are outlined in dashed orange, rows
    that see no key in red. From :func:`utils.explorers.sdpa.mask_polarity_state`."""
    tokens, L = state.tokens, len(state.tokens)
    fig, (ax_mask, ax_weights) = plt.subplots(1, 2, figsize=(11.5, 4.6), gridspec_kw={"width_ratios": [1, 1.25]})
    allowed = to_numpy(state.read_as_allowed).astype(float)
    attention_heatmap(allowed, tokens, tokens, title=tr("Keys the API let each query see (yellow)"), ax=ax_mask,
                      colorbar=False, annotate=False, vmin=0, vmax=1)
    weights = to_numpy(state.weights)
    nan = weights != weights
    attention_heatmap(torch.as_tensor(weights).nan_to_num(0.0), tokens, tokens,
                      title=tr("Weights it computed: {n} of {length} rows as you meant",
                               n=int(state.rows_as_meant.sum()), length=L),
                      ax=ax_weights, colorbar=False, annotate=False, vmin=0, vmax=1)
    for i in range(L):
        for j in range(L):
            if nan[i, j]:
                ax_weights.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor="white", edgecolor="grey",
                                               hatch="///", lw=0.5))
                cell_text(ax_weights, j, i, "NaN", fontsize=8, fontweight="bold", color="black")
            else:
                cell_text(ax_weights, j, i, f"{weights[i, j]:.2f}", fontsize=8,
                          color="black" if weights[i, j] > 0.5 else "white")
    for ax in (ax_mask, ax_weights):
        _mark_rows(ax, state, L)
    fig.suptitle(tr("{call}\norange dashed: padded query rows; red: rows that see no key; {nan} NaN rows",
                    call=state.call, nan=int(state.nan_rows.sum())), fontsize=10)
    fig.tight_layout()
    return fig
