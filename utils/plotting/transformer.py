"""Figures for chapter 5, the full Transformer layer. See utils/plotting/__init__.py.

* :func:`layer_diagrams`: post-LN and pre-LN layers side by side, boxes and arrows with shapes.
* :func:`loss_curves`, :func:`grad_norms_figure`: the measured post-LN vs pre-LN comparison.
* :func:`training_curves`: loss and held-out accuracy of the tiny model.
* :func:`sentence_attention_grid`: every head's map on one sentence, the pronoun's row outlined.
* :func:`head_ablation_figure`, :func:`pronoun_heads_figure`, :func:`layer_head_similarity_figure`: accuracy
  with heads switched off, per pronoun, and how alike the heads are in each layer.
* :func:`attention_view_figure`: one head's map on one sentence, the pronoun's row in red (the explorer's view).
* :func:`sentence_figure`: the learner's own sentence, every head small and one enlarged.
* :func:`configuration_label`: an ablation's label in the learner's language (figures and printouts alike).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch, Rectangle

from utils.explorers.transformer import AttentionView, SentenceState
from utils.i18n.messages import tr
from utils.plotting.common import CMAP, attention_heatmap, cell_text, to_numpy

__all__ = ["configuration_label", "layer_diagram_steps", "layer_diagrams", "loss_curves", "grad_norms_figure",
           "training_curves", "sentence_attention_grid", "head_ablation_figure", "pronoun_heads_figure",
           "layer_head_similarity_figure", "attention_view_figure", "sentence_figure"]

_ACTIVATION_SHAPE = "(N, L, E)"
_COLOURS = {"io": "#ffffff", "attn": "#f6d8a8", "ffn": "#bfe3f2", "norm": "#d9f0c8", "drop": "#eeeeee",
            "add": "#ffffff"}


_HEAD_NAME = re.compile(r"L\d+H\d+")


def configuration_label(label: str) -> str:
    """A label of :func:`utils.training.ablation_configurations` in the learner's language (the labels
    themselves stay English: they are the keys the chapter's code looks up); any other label as it is.
    The ablation figures show their rows with it, and chapter 5 prints its table with it, so that the
    printout and the figure use the same words.

    >>> [configuration_label(x) for x in ("all on", "L1H2 off", "layer 2 off", "only L2H1 on", "all off", "x")]
    ['all on', 'L1H2 off', 'layer 2 off', 'only L2H1 on', 'all off', 'x']
    """
    words = label.split(" ")
    if label in ("all on", "all off"):
        return tr("all on") if label == "all on" else tr("all off")
    if len(words) == 2 and _HEAD_NAME.fullmatch(words[0]) and words[1] == "off":
        return tr("{head} off", head=words[0])
    if len(words) == 3 and words[0] == "layer" and words[1].isdigit() and words[2] == "off":
        return tr("layer {n} off", n=words[1])
    if len(words) == 3 and words[0] == "only" and _HEAD_NAME.fullmatch(words[1]) and words[2] == "on":
        return tr("only {head} on", head=words[1])
    return label


def layer_diagram_steps(norm_first: bool) -> tuple[list[tuple[str, str]], list[tuple[int, int]]]:
    """The boxes of one encoder layer from input to output, and its residual connections.

    Returns:
        ``(steps, residuals)``: ``steps`` is a list of ``(kind, label)`` from bottom (input) to top (output);
        ``residuals`` lists ``(from_step, to_add_step)``: the skip path leaves the arrow *above* ``from_step``.

    >>> steps, residuals = layer_diagram_steps(norm_first=False)
    >>> [label for _, label in steps][:4], residuals
    (['x (input)', 'multi-head\\nself-attention', 'dropout', '+'], [(0, 3), (4, 7)])
    """
    attention = [("attn", tr("multi-head\nself-attention")), ("drop", "dropout"), ("add", "+")]
    ffn = [("ffn", tr("feed-forward: Linear E→F,\nReLU (N, L, F), Linear F→E")), ("drop", "dropout"), ("add", "+")]
    x_in, out = ("io", tr("x (input)")), ("io", tr("output"))
    if norm_first:
        steps = [x_in, ("norm", "LayerNorm 1"), *attention, ("norm", "LayerNorm 2"), *ffn, out]
        return steps, [(0, 4), (4, 8)]
    steps = [x_in, *attention, ("norm", "LayerNorm 1"), *ffn, ("norm", "LayerNorm 2"), out]
    return steps, [(0, 3), (4, 7)]


def _draw_layer(ax, norm_first: bool) -> None:
    steps, residuals = layer_diagram_steps(norm_first)
    gap, x_main, x_skip = 1.0, 0.6, 0.08
    ys = [i * gap for i in range(len(steps))]
    for (kind, label), y in zip(steps, ys):
        if kind == "add":
            ax.text(x_main, y, "+", ha="center", va="center", fontsize=12, zorder=4,
                    bbox={"boxstyle": "circle,pad=0.25", "facecolor": "white", "edgecolor": "black"})
            continue
        width, height = (0.62, 0.5) if kind in ("attn", "ffn") else (0.5, 0.38)
        ax.add_patch(FancyBboxPatch((x_main - width / 2, y - height / 2), width, height,
                                    boxstyle="round,pad=0.02", facecolor=_COLOURS[kind], edgecolor="black",
                                    zorder=3))
        ax.text(x_main, y, label, ha="center", va="center", fontsize=7.5 if kind == "ffn" else 8.5, zorder=4)
    # main path: one arrow between consecutive steps, labelled with the activation's shape
    for i in range(len(steps) - 1):
        ax.annotate("", xy=(x_main, ys[i + 1] - 0.22), xytext=(x_main, ys[i] + 0.22),
                    arrowprops={"arrowstyle": "-|>", "color": "black", "lw": 1.0}, zorder=2)
        ax.text(x_main + 0.05, (ys[i] + ys[i + 1]) / 2, _ACTIVATION_SHAPE, fontsize=6.5, va="center",
                color="#333333")
    # residual paths: leave the arrow above `start`, run on the left, enter the + from the side
    for start, end in residuals:
        y0, y1 = ys[start] + 0.32 * gap, ys[end]
        ax.plot([x_main, x_skip, x_skip], [y0, y0, y1], color="#1f5f8b", lw=1.4, zorder=1)
        ax.annotate("", xy=(x_main - 0.17, y1), xytext=(x_skip, y1),
                    arrowprops={"arrowstyle": "-|>", "color": "#1f5f8b", "lw": 1.4}, zorder=2)
        ax.text(x_skip - 0.02, (y0 + y1) / 2, tr("residual {shape}", shape=_ACTIVATION_SHAPE), rotation=90,
                fontsize=6.5, ha="right", va="center", color="#1f5f8b")
    ax.set_xlim(-0.1, 1.05)
    ax.set_ylim(-0.5, ys[-1] + 0.5)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_ylabel(tr("data flows upwards"))
    for spine in ax.spines.values():
        spine.set_visible(False)


def layer_diagrams() -> Figure:
    """Post-LN (the original paper) and pre-LN encoder layers side by side, with the shape at every arrow.

    >>> fig = layer_diagrams()
    >>> [ax.get_title().split(":")[0] for ax in fig.axes]
    ['Post-LN (norm_first=False)', 'Pre-LN (norm_first=True)']
    """
    fig, axes = plt.subplots(1, 2, figsize=(9, 7.5))
    for ax, norm_first in zip(axes, (False, True)):
        _draw_layer(ax, norm_first)
    axes[0].set_title(tr("Post-LN (norm_first=False):\nnorm(x + sublayer(x)); the output is normalised"), fontsize=9)
    axes[1].set_title(tr("Pre-LN (norm_first=True):\nx + sublayer(norm(x)); a clean residual path"), fontsize=9)
    fig.suptitle(tr("Same boxes, different place for LayerNorm: where the residual path gets normalised"))
    fig.tight_layout()
    return fig


def loss_curves(losses: Mapping[str, Sequence[float]], *, title: str | None = None,
                chance: float | None = None, lr: float | None = None) -> Figure:
    """Plot one loss curve per run (a NaN/inf loss ends its curve). ``losses``: label -> per-step losses.

    ``title``: the axes' title. Default: "Training loss", or with ``lr`` (the learning rate of chapter 5's
    post-LN and pre-LN runs, Adam without warm-up) what those runs show at it; in the learner's language.

    ``chance``, when given, is drawn as a dashed line: the loss of a uniform guess, log(C).

    >>> loss_curves({"post-LN": [2.0, 1.9]}, lr=3e-2).axes[0].get_title()
    'Adam at lr = 3e-2, no warm-up: post-LN stays near chance, pre-LN learns with spikes'
    """
    if title is None and lr is not None:
        mantissa, exponent = f"{lr:e}".split("e")  # 3e-2, not 0.03 or 3.000000e-02
        title = tr("Adam at lr = {lr}, no warm-up: post-LN stays near chance, pre-LN learns with spikes",
                   lr=f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}")
    fig, ax = plt.subplots(figsize=(7, 3.8))
    colours = plt.get_cmap(CMAP)(torch.linspace(0.0, 0.8, max(len(losses), 1)).tolist())
    for colour, (label, values) in zip(colours, losses.items()):
        ax.plot(range(1, len(values) + 1), list(values), label=label, color=colour, lw=1.4)
    if chance is not None:
        ax.axhline(chance, color="grey", ls="--", lw=1, label=tr("chance, log(C) = {chance:.2f}", chance=chance))
    ax.set_xlabel(tr("optimiser step"))
    ax.set_ylabel(tr("cross-entropy loss"))
    ax.set_title(tr("Training loss") if title is None else title)
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def grad_norms_figure(norms: Mapping[str, torch.Tensor], *, title: str | None = None) -> Figure:
    """Grouped bars: the gradient norm of each layer's parameters, one group per layer, one bar per model.

    ``title``: the axes' title. Default: "Gradient norm per layer at initialisation" (in the learner's language).
    """
    fig, ax = plt.subplots(figsize=(7, 3.8))
    width = 0.8 / max(len(norms), 1)
    colours = plt.get_cmap(CMAP)(torch.linspace(0.0, 0.8, max(len(norms), 1)).tolist())
    for k, (colour, (label, values)) in enumerate(zip(colours, norms.items())):
        values = to_numpy(values)
        ax.bar([i + 1 + (k - (len(norms) - 1) / 2) * width for i in range(len(values))], values, width,
               label=label, color=colour)
    num_layers = max(len(to_numpy(v)) for v in norms.values())
    ax.set_xticks(range(1, num_layers + 1), [tr("layer {n}", n=i) for i in range(1, num_layers + 1)])
    ax.set_xlabel(tr("encoder layer (1 = nearest the input)"))
    ax.set_ylabel(tr("‖gradient‖ of the layer's parameters"))
    ax.set_title(tr("Gradient norm per layer at initialisation") if title is None else title)
    ax.legend()
    fig.tight_layout()
    return fig


def training_curves(history, *, chance: float | None = None) -> Figure:
    """Loss per step (left) and held-out accuracy (right) of a :class:`utils.training.History`."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4))
    left.plot(range(1, len(history.loss) + 1), history.loss, color=plt.get_cmap(CMAP)(0.2), lw=1.2)
    left.set_xlabel(tr("optimiser step"))
    left.set_ylabel(tr("cross-entropy loss"))
    left.set_title(tr("Training loss"))
    left.grid(alpha=0.3)
    right.plot(history.eval_steps, history.eval_accuracy, marker="o", color=plt.get_cmap(CMAP)(0.6),
               label=tr("held-out noun pairs"))
    if chance is not None:
        right.axhline(chance, color="grey", ls="--", lw=1,
                      label=tr("guess from the pronoun alone ({chance:.0%})", chance=chance))
    right.set_ylim(0, 1.05)
    right.set_xlabel(tr("optimiser step"))
    right.set_ylabel(tr("accuracy at the pronoun"))
    right.set_title(tr("Held-out accuracy"))
    right.legend(loc="lower right", fontsize=8)
    right.grid(alpha=0.3)
    fig.suptitle(tr("The tiny model learns the agreement rule within a few dozen steps"))
    fig.tight_layout()
    return fig


def sentence_attention_grid(maps: torch.Tensor, tokens: Sequence[str], pronoun_pos: int, *,
                            title: str | None = None, referent_pos: int | None = None) -> Figure:
    """Every head's ``(L, L)`` map on one sentence, ``maps`` ``(num_layers, H, L, L)``, the pronoun's row outlined.

    Rows are the queries (the words that attend), columns the keys (the words attended to); one shared
    colour scale from 0 to 1. ``title``: the figure's title. Default: "Every head on one sentence", or with
    ``referent_pos`` (the position of the noun the pronoun refers to, in a held-out sentence) "Every head on
    one held-out sentence: 'it' refers to 'cup'"; in the learner's language.

    >>> fig = sentence_attention_grid(torch.rand(2, 2, 3, 3).softmax(-1), ["a", "b", "it"], 2)
    >>> fig.axes[1].get_title(), fig.axes[-1].get_ylabel()
    ('Layer 1, Head 2', 'attention weight')
    """
    maps = torch.as_tensor(maps)
    if maps.dim() != 4 or maps.shape[-1] != maps.shape[-2] or maps.shape[-1] != len(tokens):
        raise ValueError(f"maps: expected (num_layers, H, L, L) with L = len(tokens) = {len(tokens)}, "
                         f"got shape {tuple(maps.shape)}")
    rows, cols, L, _ = maps.shape
    size = 1.2 + 0.3 * L
    fig, axes = plt.subplots(rows, cols, figsize=(size * cols + 1.0, size * rows + 0.4), squeeze=False,
                             layout="constrained")
    for r in range(rows):
        for c in range(cols):
            ax = axes[r][c]
            image = ax.imshow(to_numpy(maps[r, c]), cmap=CMAP, vmin=0.0, vmax=1.0)
            ax.set_title(tr("Layer {layer}, Head {head}", layer=r + 1, head=c + 1), fontsize=9)
            ax.set_xticks(range(L), tokens, rotation=90, fontsize=7)
            ax.set_yticks(range(L), tokens, fontsize=7)
            ax.get_yticklabels()[pronoun_pos].set_color("red")
            ax.add_patch(Rectangle((-0.5, pronoun_pos - 0.5), L, 1, fill=False, edgecolor="red", lw=1.8))
            if r == rows - 1:
                ax.set_xlabel(tr("key (attended to)"), fontsize=8)
            if c == 0:
                ax.set_ylabel(tr("query (attending)"), fontsize=8)
    bar = fig.colorbar(image, ax=axes.ravel().tolist(), fraction=0.03, pad=0.02)
    bar.set_label(tr("attention weight"))
    if title is None:
        title = (tr("Every head on one sentence") if referent_pos is None else
                 tr("Every head on one held-out sentence: '{pronoun}' refers to '{referent}'",
                    pronoun=tokens[pronoun_pos], referent=tokens[referent_pos]))
    fig.suptitle(title, fontsize=10)
    return fig


def head_ablation_figure(results: Mapping[str, float], *, chance: float, title: str | None = None) -> Figure:
    """Horizontal bars: held-out accuracy of each configuration (label -> accuracy), every value written out.

    ``chance`` (the accuracy of guessing from the pronoun alone) is drawn as a dashed line. The labels of
    :func:`utils.training.ablation_configurations` are shown in the learner's language. ``title``: the
    axes' title. Default: "Held-out accuracy with heads switched off" (in the learner's language).

    >>> fig = head_ablation_figure({"all heads on": 1.0, "L1H1 off": 0.95}, chance=0.25)
    >>> [t.get_text() for t in fig.axes[0].texts]
    ['1.000', '0.950']
    """
    labels, values = list(results), [float(v) for v in results.values()]
    fig, ax = plt.subplots(figsize=(7.5, 0.9 + 0.32 * len(labels)))
    colours = plt.get_cmap(CMAP)([0.15 + 0.7 * v for v in values])
    ax.barh(range(len(labels)), values, color=colours)
    for i, value in enumerate(values):
        ax.text(value + 0.01, i, f"{value:.3f}", va="center", fontsize=8)
    ax.axvline(chance, color="grey", ls="--", lw=1,
               label=tr("guess from the pronoun alone ({chance:.3f})", chance=chance))
    ax.set_yticks(range(len(labels)), [configuration_label(label) for label in labels], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0.0, 1.12)
    ax.set_xlabel(tr("held-out accuracy at the pronoun"))
    ax.set_ylabel(tr("heads switched off"))
    ax.set_title(tr("Held-out accuracy with heads switched off") if title is None else title, fontsize=10)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig


def pronoun_heads_figure(table: torch.Tensor, row_labels: Sequence[str], pronouns: Sequence[str], *,
                         chance: float) -> Figure:
    """Accuracy per pronoun (columns) for each configuration of heads (rows), ``table`` ``(R, P)``, annotated.

    The colour scale runs from ``chance`` to 1, so that "no better than guessing" is the darkest colour.

    >>> fig = pronoun_heads_figure(torch.tensor([[1.0, 0.5]]), ["all on"], ["he", "she"], chance=0.25)
    >>> fig.axes[-1].get_ylabel()
    'accuracy'
    """
    values = to_numpy(table)
    if values.shape != (len(row_labels), len(pronouns)):
        raise ValueError(f"table: expected shape ({len(row_labels)}, {len(pronouns)}), got {values.shape}")
    fig, ax = plt.subplots(figsize=(2.4 + 1.0 * len(pronouns), 0.9 + 0.4 * len(row_labels)))
    image = ax.imshow(values, cmap=CMAP, vmin=chance, vmax=1.0, aspect="auto")
    middle = (chance + 1.0) / 2
    for i in range(values.shape[0]):
        for j in range(values.shape[1]):
            cell_text(ax, j, i, f"{values[i, j]:.2f}", fontsize=8, color="black" if values[i, j] > middle else "white")
    ax.set_xticks(range(len(pronouns)), [f"'{p}'" for p in pronouns])
    ax.set_yticks(range(len(row_labels)), [configuration_label(label) for label in row_labels], fontsize=8)
    ax.set_xlabel(tr("pronoun of the sentence"))
    ax.set_ylabel(tr("heads switched off"))
    ax.set_title(tr("Accuracy per pronoun: different pronouns lean on different heads"), fontsize=10)
    bar = fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    bar.set_label(tr("accuracy"))
    fig.tight_layout()
    return fig


def layer_head_similarity_figure(similarity: torch.Tensor, *, metric: str | None = None) -> Figure:
    """One ``(H, H)`` similarity matrix per layer, ``similarity`` ``(num_layers, H, H)``.

    The matrices come from chapter 3's :func:`utils.heads.head_similarity` (by default
    ``1 - JS divergence`` of the heads' attention rows); ``metric`` names the measure in the title.
    Default: "1 - JS divergence" (in the learner's language).
    """
    similarity = torch.as_tensor(similarity)
    if similarity.dim() != 3 or similarity.shape[1] != similarity.shape[2]:
        raise ValueError(f"similarity: expected (num_layers, H, H), got shape {tuple(similarity.shape)}")
    values = to_numpy(similarity)
    fig, axes = plt.subplots(1, values.shape[0], figsize=(2.8 * values.shape[0], 2.8), squeeze=False)
    for i, ax in enumerate(axes[0]):
        H = values.shape[-1]
        image = ax.imshow(values[i], cmap=CMAP, vmin=0.0, vmax=1.0)
        for a in range(H):
            for b in range(H):
                cell_text(ax, b, a, f"{values[i, a, b]:.2f}", color="black" if values[i, a, b] > 0.5 else "white")
        labels = [tr("head {n}", n=h + 1) for h in range(H)]
        ax.set_xticks(range(H), labels)
        ax.set_yticks(range(H), labels)
        ax.set_xlabel(tr("head"))
        ax.set_ylabel(tr("head"))
        ax.set_title(tr("Layer {n}", n=i + 1), fontsize=9)
    metric = tr("1 - JS divergence") if metric is None else metric
    fig.suptitle(tr("Head redundancy: {metric} of attention rows (1 = identical)", metric=metric), fontsize=10)
    fig.tight_layout()
    bar = fig.colorbar(image, ax=axes.ravel().tolist(), fraction=0.046, pad=0.04)
    bar.set_label(tr("similarity"))
    return fig


def attention_view_figure(view: AttentionView) -> Figure:
    """One head's ``(L, L)`` map on one sentence, with the pronoun's row outlined and its label in red,
    from :func:`utils.explorers.transformer.attention_view`."""
    fig = attention_heatmap(view.weights, view.tokens, title=view.title, vmin=0.0, vmax=1.0, annotate=False,
                            xlabel=tr("key (attended to)"), ylabel=tr("query (attending)"))
    ax = fig.axes[0]
    L = len(view.tokens)
    ax.add_patch(Rectangle((-0.5, view.pronoun_pos - 0.5), L, 1, fill=False, edgecolor="red", lw=2))
    ax.get_yticklabels()[view.pronoun_pos].set_color("red")
    fig.axes[-1].set_ylabel(tr("attention weight"))
    return fig


def _outline_pronoun(ax, pronoun_pos: int | None, length: int, lw: float) -> None:
    if pronoun_pos is not None:
        ax.add_patch(Rectangle((-0.5, pronoun_pos - 0.5), length, 1, fill=False, edgecolor="red", lw=lw))
        ax.get_yticklabels()[pronoun_pos].set_color("red")


def sentence_figure(state: SentenceState) -> Figure:
    """The learner's sentence (from :func:`utils.explorers.transformer.sentence_state`): every layer and head
    as a small map on the left, the chosen one enlarged on the right, the pronoun's row in red. A sentence
    that cannot run gives a figure that says why."""
    if state.maps is None:
        fig, ax = plt.subplots(figsize=(8, 1.6))
        ax.axis("off")
        ax.text(0.0, 0.5, tr("Nothing to show: the model did not run.\n(see the message above the figure)"),
                va="center", fontsize=11)
        ax.set_title(tr("Your sentence"))
        return fig
    rows, cols, L, _ = state.maps.shape
    tokens = state.words
    fig = plt.figure(figsize=(4.2 + 2.2 * cols, max(4.2, 2.0 * rows + 0.8)), layout="constrained")
    left, right = fig.subfigures(1, 2, width_ratios=[cols, 2.2])
    small = left.subplots(rows, cols, squeeze=False)
    for r in range(rows):
        for c in range(cols):
            ax = small[r][c]
            ax.imshow(to_numpy(state.maps[r, c]), cmap=CMAP, vmin=0.0, vmax=1.0)
            chosen = (r, c) == (state.layer, state.head)
            title = (tr("Layer {layer}, Head {head} (enlarged)", layer=r + 1, head=c + 1) if chosen
                     else tr("Layer {layer}, Head {head}", layer=r + 1, head=c + 1))
            ax.set_title(title, fontsize=8, fontweight="bold" if chosen else "normal")
            ax.set_xticks(range(L), tokens, rotation=90, fontsize=6)
            ax.set_yticks(range(L), tokens, fontsize=6)
            _outline_pronoun(ax, state.pronoun_pos, L, 1.2)
    left.supxlabel(tr("key (attended to)"), fontsize=8)
    left.supylabel(tr("query (attending)"), fontsize=8)
    big = right.subplots()
    image = big.imshow(to_numpy(state.maps[state.layer, state.head]), cmap=CMAP, vmin=0.0, vmax=1.0)
    big.set_xticks(range(L), tokens, rotation=90)
    big.set_yticks(range(L), tokens)
    big.set_xlabel(tr("key (attended to)"))
    big.set_ylabel(tr("query (attending)"))
    _outline_pronoun(big, state.pronoun_pos, L, 2.0)
    big.set_title(tr("Layer {layer}, Head {head}", layer=state.layer + 1, head=state.head + 1), fontsize=10)
    right.colorbar(image, ax=big, fraction=0.046, pad=0.04).set_label(tr("attention weight"))
    if state.predicted is None:
        verdict = tr("no pronoun: no prediction")
    else:
        said = tr("'{pronoun}' -> model says '{predicted}'", pronoun=tokens[state.pronoun_pos],
                  predicted=state.predicted)
        if state.correct is None:
            verdict = said
        elif state.correct:
            verdict = tr("{said} (right)", said=said)
        else:
            verdict = tr("{said} (wrong: '{noun}' agrees)", said=said, noun=tokens[state.referent_pos])
    fig.suptitle(tr("Your sentence: {verdict}", verdict=verdict), fontsize=10)
    return fig
