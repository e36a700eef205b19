"""Figures for chapter 7, attention in a real language model: where SmolLM2's heads look (the sink,
previous-token and induction scores of every layer and head), one layer's query heads by the key/value
head they share, StreamingLLM's per-token loss, and the two explorers' views.

Shape letters: H query heads, G query heads per key/value head, T tokens, P pieces (whole characters).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from utils.explorers.llm import HeadsState, SinkCacheState, run_label
from utils.i18n.messages import tr
from utils.plotting.common import CMAP, to_numpy

__all__ = ["score_name", "head_scores_figure", "kv_group_figure", "streaming_loss_figure", "heads_explorer_figure",
           "sink_cache_figure", "moving_average"]


def score_name(score: str) -> str:
    """The axis or title name of a score of :data:`~utils.explorers.llm.SCORES`, in the learner's language."""
    names = {"sink": tr("share on the first token (sink)"), "previous": tr("share on the previous token"),
             "induction": tr("induction (prefix-matching) score")}
    if score not in names:
        raise ValueError(f"score: expected one of {', '.join(names)}, got {score!r}")
    return names[score]


def _score_grid(ax, grid: torch.Tensor, title: str, *, chosen: tuple[int, int] | None = None, colorbar=True):
    """A (layers, H) grid of scores in [0, 1], layer 1 at the top, heads counted from 1."""
    layers, heads = grid.shape
    image = ax.imshow(to_numpy(grid), cmap=CMAP, vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(heads), [str(h + 1) for h in range(heads)], fontsize=7)
    ticks = sorted({0, *range(4, layers, 5), layers - 1})
    ax.set_yticks(ticks, [str(t + 1) for t in ticks], fontsize=7)
    ax.set_xlabel(tr("query head"))
    ax.set_ylabel(tr("layer"))
    ax.set_title(title, fontsize=9)
    if chosen is not None:
        ax.add_patch(Rectangle((chosen[1] - 0.5, chosen[0] - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2))
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.08, pad=0.03)
    return image


def head_scores_figure(scores: Mapping[str, torch.Tensor], *, title: str | None = None,
                       texts: Mapping[str, str] | None = None) -> Figure:
    """One (layers, H) grid per score (``{"sink": ..., "previous": ..., "induction": ...}``, any of them),
    side by side, every head a cell on the same 0-to-1 colour scale. ``texts`` names the text each score
    was measured on (``"sentence"`` or ``"repeated random tokens"``), written under that panel's title.

    >>> fig = head_scores_figure({"sink": torch.rand(30, 9), "previous": torch.rand(30, 9)},
    ...                          texts={"previous": "sentence"})
    >>> len(fig.axes), fig.axes[0].get_xlabel(), fig.axes[1].get_title()
    (4, 'query head', 'share on the previous token\\n(sentence)')
    """
    if not scores:
        raise ValueError("scores: expected at least one (layers, H) grid")
    names = {"sentence": tr("(sentence)"), "repeated random tokens": tr("(repeated random tokens)")}
    texts = dict(texts or {})
    if set(texts) - set(scores) or set(texts.values()) - set(names):
        raise ValueError(f"texts: expected score -> one of {', '.join(map(repr, names))} for scores among "
                         f"{', '.join(scores)}, got {texts!r}")
    fig, axes = plt.subplots(1, len(scores), figsize=(3.3 * len(scores) + 0.6, 5.2), squeeze=False,
                             layout="constrained")
    for ax, (score, grid) in zip(axes[0], scores.items()):
        on = "\n" + names[texts[score]] if score in texts else ""
        _score_grid(ax, torch.as_tensor(grid), score_name(score) + on)
    if title is None:
        title = (tr("The share of each head's attention that goes to the first token") if list(scores) == ["sink"]
                 else tr("Each head's scores: the bright cells are the heads that do this job"))
    fig.suptitle(title)
    return fig


def kv_group_figure(maps: torch.Tensor, labels: Sequence[str], *, layer: int, groups_of: int) -> Figure:
    """One layer's H query heads ``(H, P, P)``, one row per key/value head: the G heads of a row read the
    same keys and values and still attend differently.

    >>> fig = kv_group_figure(torch.eye(4).expand(6, 4, 4), list("abcd"), layer=2, groups_of=3)
    >>> len(fig.axes), fig.axes[4].get_title()  # six heads and the colour bar
    (7, 'query head 5 (KV head 2)')
    """
    H = maps.shape[0]
    if H % groups_of or maps.dim() != 3 or len(labels) != maps.shape[-1]:
        raise ValueError(f"maps: expected (H, P, P) with H a multiple of groups_of = {groups_of} and P = "
                         f"{len(labels)} labels, got {tuple(maps.shape)}")
    rows, P = H // groups_of, len(labels)
    size = 1.2 + 0.16 * P
    fig, axes = plt.subplots(rows, groups_of, figsize=(size * groups_of + 0.4, size * rows + 0.6), squeeze=False,
                             layout="constrained")
    for h in range(H):
        ax = axes[h // groups_of][h % groups_of]
        image = ax.imshow(to_numpy(maps[h]), cmap=CMAP, vmin=0.0, vmax=1.0)
        ax.set_title(tr("query head {head} (KV head {kv})", head=h + 1, kv=h // groups_of + 1), fontsize=8)
        ax.set_xticks(range(P), labels, rotation=90, fontsize=5)
        ax.set_yticks(range(P), labels, fontsize=5)
    fig.colorbar(image, ax=axes, fraction=0.03, pad=0.02).set_label(tr("attention weight"))
    fig.supxlabel(tr("key (attended to)"), fontsize=9)
    fig.supylabel(tr("query (attending)"), fontsize=9)
    fig.suptitle(tr("Layer {layer}: each row of heads shares one key/value head, yet each head looks elsewhere",
                    layer=layer + 1), fontsize=10)
    return fig


def moving_average(values: torch.Tensor, width: int) -> torch.Tensor:
    """The mean of each run of ``width`` consecutive values, ``(T - width + 1,)`` (``(1,)`` when shorter).

    >>> moving_average(torch.tensor([1.0, 2.0, 3.0, 4.0]), 2)
    tensor([1.5000, 2.5000, 3.5000])
    """
    values = torch.as_tensor(values, dtype=torch.float32)
    width = max(1, min(int(width), len(values)))
    return values.unfold(0, width, 1).mean(-1)


_STYLES = ("-", "--", "-.")
_COLORS = ("#0072B2", "#D55E00", "#009E73")  # Okabe-Ito blue, vermillion, green: colour-blind safe


def streaming_loss_figure(losses: Mapping[str, torch.Tensor], *, smooth: int = 32,
                          evict_at: Mapping[str, int] | None = None, step: int | None = None, ax=None) -> Figure:
    """Per-token loss along a text for each run (label -> ``(T - 1,)``), as a running mean over ``smooth``
    tokens (a curve starts at position ``smooth``); ``evict_at`` (a run's label -> the position where its cache
    first evicts one) draws a dotted line per run in that run's colour; ``step`` a cursor (the curves stop
    there).

    >>> fig = streaming_loss_figure({"full attention": torch.rand(300), "window 64 alone": torch.rand(300)},
    ...                             evict_at={"window 64 alone": 64})
    >>> fig.axes[0].get_xlabel(), fig.axes[0].texts[0].get_text()
    ('position in the text (tokens)', 'window 64 alone: evicts from position 64')
    """
    if evict_at is not None and not isinstance(evict_at, Mapping):
        raise TypeError(f"evict_at: expected a mapping from a run's label to a position, got {evict_at!r}")
    evict_at = dict(evict_at or {})
    unknown = sorted(set(evict_at) - set(losses))
    if unknown:
        raise ValueError(f"evict_at: expected labels among the runs {list(losses)}, got {unknown}")
    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(7.6, 4.2), layout="constrained")
    fig = ax.figure
    colors = {}
    for (label, loss), style, color in zip(losses.items(), _STYLES, _COLORS):
        colors[label] = color
        loss = torch.as_tensor(loss, dtype=torch.float32)
        if step is not None:
            loss = loss[:max(step, 1)]
        curve = moving_average(loss, smooth)
        x = torch.arange(len(curve)) + min(smooth, len(loss))  # the position each average ends at
        ax.plot(to_numpy(x), to_numpy(curve), style, color=color,
                label=tr("{label}: mean {mean:.2f} nats", label=label, mean=float(loss.mean())))
    for row, (label, position) in enumerate(sorted(evict_at.items(), key=lambda item: item[1])):
        color = colors.get(label, "gray")
        ax.axvline(position, color=color, linestyle=":", linewidth=1.2)
        ax.annotate(tr("{label}: evicts from position {position}", label=label, position=position), (position, 1),
                    xycoords=("data", "axes fraction"), xytext=(4, -12 - 12 * row), textcoords="offset points",
                    fontsize=8, color=color, bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "none", "pad": 1})
    if step is not None:
        ax.axvline(step, color="red", linewidth=1)
    ax.set_xlabel(tr("position in the text (tokens)"))
    ax.set_ylabel(tr("loss per token (nats),\nrunning mean over {n} tokens", n=smooth))
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=len(losses))
    ax.grid(True, alpha=0.3)
    if own:
        ax.set_title(tr("A window alone loses the first tokens and the loss jumps; a few sinks bring most of it back"),
                     fontsize=11)
    return fig


def heads_explorer_figure(state: HeadsState) -> Figure:
    """The heads explorer: the chosen score for every layer and head (the chosen head outlined), and that
    head's attention on the text, in whole characters."""
    if state.head_map is None:
        fig, ax = plt.subplots(figsize=(8, 1.6))
        ax.axis("off")
        ax.text(0.0, 0.5, tr("Nothing to show: the model did not run.\n(see the message above the figure)"),
                va="center", fontsize=11)
        return fig
    P = len(state.labels)
    # tight_layout, not a layout engine: the static edition draws each of its states once (figure_png)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11.5, 5.6), gridspec_kw={"width_ratios": [1, 1.7]})
    name = score_name(state.score)
    if state.grid is None:
        left.axis("off")
        left.text(0.5, 0.5, tr("No {score}\nfor this text", score=name), ha="center", va="center", fontsize=10,
                  wrap=True)
    else:
        _score_grid(left, state.grid, name, chosen=(state.layer, state.head))
    image = right.imshow(to_numpy(state.head_map), cmap=CMAP, vmin=0.0, vmax=1.0)
    fontsize = 8 if P <= 24 else 6
    right.set_xticks(range(P), state.labels, rotation=90, fontsize=fontsize)
    right.set_yticks(range(P), state.labels, fontsize=fontsize)
    right.set_xlabel(tr("key (attended to)"))
    right.set_ylabel(tr("query (attending)"))
    fig.colorbar(image, ax=right, fraction=0.046, pad=0.03).set_label(tr("attention weight"))
    value = "" if state.value is None else tr(": {value:.2f}", value=state.value)
    right.set_title(tr("Layer {layer}, Head {head} (KV head {kv}){value}", layer=state.layer + 1,
                       head=state.head + 1, kv=state.kv_head + 1, value=value), fontsize=10)
    fig.tight_layout()
    return fig


_SLOT_CMAP = ListedColormap(["#DDDDDD", "#E69F00", "#56B4E9"])  # empty, sink, window (Okabe-Ito)


def sink_cache_figure(state: SinkCacheState, *, smooth: int = 32) -> Figure:
    """The stepper: the cache's slots at this step (the sinks, then the ring of the window, the slot just
    written outlined), and the per-token loss of each run up to this step."""
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9.5, 6.2), gridspec_kw={"height_ratios": [1, 2.6]})
    kinds = [0 if p < 0 else (1 if slot < state.sinks else 2) for slot, p in enumerate(state.slots)]
    top.imshow([kinds], cmap=_SLOT_CMAP, vmin=0, vmax=2, aspect="auto")
    top.add_patch(Rectangle((state.written - 0.5, -0.5), 1, 1, fill=False, edgecolor="red", linewidth=2))
    slots = len(state.slots)
    every = max(1, slots // 16)
    ticks = sorted({*range(0, slots, every), state.written})
    top.set_xticks(ticks, [str(state.slots[t]) if state.slots[t] >= 0 else "" for t in ticks], fontsize=7,
                   rotation=90)
    top.set_yticks([])
    top.set_xlabel(tr("cache slot, labelled with the position it holds (orange: sinks, blue: window)"), fontsize=8)
    top.set_title(tr("Step {step}: {held} positions held ({mib:.2f} MiB), {evicted} evicted; a full cache would "
                     "hold {full} ({full_mib:.2f} MiB)", step=state.step, held=len(state.visible),
                     mib=state.cache_bytes / 2**20, evicted=state.evicted, full=state.step + 1,
                     full_mib=state.full_bytes / 2**20), fontsize=9)
    evict_at = {run_label(state.window, 0): state.window, state.label: state.window + state.sinks}
    streaming_loss_figure(state.losses, smooth=smooth, step=state.step, ax=bottom,
                          evict_at={label: at for label, at in evict_at.items() if label in state.losses})
    bottom.set_title(tr("Loss so far; the red line is this step"), fontsize=9)
    fig.tight_layout()
    return fig
