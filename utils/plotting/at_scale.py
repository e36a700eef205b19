"""Figures for chapter 6, attention at scale: the quadratic wall (forward and backward), sliding-window
masks, receptive fields and the memory of KV caches.

Shape letters: N batch, H heads, L sequence length, D head dimension.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

from utils.explorers.at_scale import KVCacheExplorerState, WindowExplorerState
from utils.i18n.messages import tr
from utils.plotting.common import CMAP, to_numpy

__all__ = ["memory_scaling_figure", "window_mask_figure", "receptive_field_figure", "window_explorer_figure",
           "online_softmax_figure", "cache_memory_figure", "kv_cache_explorer_figure"]

_BOOL_CMAP = ListedColormap([plt.get_cmap(CMAP)(0.0), plt.get_cmap(CMAP)(1.0)])  # False, True: viridis' ends


def _bool_key(ax, image, false_label: str, true_label: str) -> None:
    """A two-entry colour key beside a boolean image: which colour is False and which is True."""
    bar = ax.figure.colorbar(image, ax=ax, ticks=[0.25, 0.75], fraction=0.046, pad=0.04)
    bar.ax.set_yticklabels([false_label, true_label])
    bar.ax.tick_params(labelsize=8)


_STYLE = {"naive": ("o", "tab:red"), "tiled_autograd": ("D", "tab:orange"), "sdpa": ("s", "tab:blue"),
          "tiled": ("^", "tab:green")}
def _mode_text(mode: str) -> tuple[dict[str, str], str, str]:
    """The legend label of each implementation, the title and the y label of ``mode``'s figure, in the
    learner's language (built when drawn: see :mod:`utils.i18n.messages`)."""
    if mode == "forward":
        return ({"naive": tr("naive (scores (L, L))"), "sdpa": "F.scaled_dot_product_attention",
                 "tiled": "tiled_attention"},
                tr("Naive attention grows as L², tiled as L"), tr("peak memory above the inputs (MiB)"))
    return ({"tiled_autograd": tr("tiled loop under autograd"), "sdpa": tr("SDPA's fused backward"),
             "tiled": tr("tiled_attention's recomputing backward")},
            tr("Autograd through the tiled loop grows as L², the recomputing backward as L"),
            tr("peak memory above inputs and gradients (MiB)"))


def memory_scaling_figure(rows: Sequence[dict], *, heads: int = 8) -> Figure:
    """Log-log peak memory against L, from :func:`utils.benchmark.memory.memory_benchmark` rows.

    Forward rows (naive, SDPA, tiled) show the growth above the inputs; backward rows (``mode="backward"``:
    autograd through the tiled loop, SDPA, the recomputing backward) the forward+backward growth above the
    inputs and their gradients. Skipped rows are drawn hollow at their predicted size; dotted guides show
    slopes 1 (O(L)) and 2 (O(L²)).

    >>> rows = [{"impl": "tiled", "length": n, "peak_mib": n / 64, "skipped": False, "mode": "backward"}
    ...         for n in (512, 1024)]
    >>> memory_scaling_figure(rows, heads=2).axes[0].get_title()
    'Autograd through the tiled loop grows as L², the recomputing backward as L (H=2, float32)'
    """
    mode = "backward" if any(r.get("mode") == "backward" for r in rows) else "forward"
    labels, title, ylabel = _mode_text(mode)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for impl in (impl for impl in _STYLE if any(r["impl"] == impl for r in rows)):
        measured = [r for r in rows if r["impl"] == impl and not r["skipped"]]
        marker, color = _STYLE[impl]
        if measured:
            ax.plot([r["length"] for r in measured], [max(r["peak_mib"], 0.1) for r in measured],
                    marker=marker, color=color, label=labels.get(impl, impl))
        skipped = [r for r in rows if r["impl"] == impl and r["skipped"]]
        if skipped:
            ax.plot([r["length"] for r in skipped], [r["predicted_mib"] for r in skipped], marker=marker,
                    color=color, linestyle="--", markerfacecolor="none",
                    label=tr("{impl}: predicted, not run", impl=impl))
    lengths = sorted({r["length"] for r in rows})
    if lengths:
        last = lengths[-1]
        top = max([r["peak_mib"] or 0.0 for r in rows if not r["skipped"]]
                  + [r["predicted_mib"] or 0.0 for r in rows if r["skipped"]] + [1.0])
        ax.plot(lengths, [top * (n / last) ** 2 for n in lengths], ":", color="gray", label=tr("slope 2: O(L²)"))
        ax.plot(lengths, [top / 16 * n / last for n in lengths], "-.", color="gray", label=tr("slope 1: O(L)"))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    if lengths:
        ax.set_xticks(lengths, [str(n) for n in lengths])
        ax.minorticks_off()
    ax.set_xlabel(tr("sequence length L (tokens)"))
    ax.set_ylabel(ylabel)
    ax.set_title(f"{title} (H={heads}, float32)", fontsize=10 if mode == "backward" else None)
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    return fig


def window_mask_figure(mask: torch.Tensor, *, title: str | None = None, window: int | None = None,
                       num_global: int = 0, ax=None) -> Figure:
    """Draw a boolean (L, L) mask (True = may attend) with position tick labels and a colour key.

    ``title`` defaults to "Sliding-window mask: each query sees a band", or, given the ``window`` and
    ``num_global`` the mask was made with (:func:`utils.at_scale.global_tokens_mask`), names them: "Window 2
    plus a global token t0"; in the learner's language.

    >>> from utils.at_scale import global_tokens_mask
    >>> window_mask_figure(global_tokens_mask(8, 2, 1), window=2, num_global=1).axes[0].get_title()
    'Window 2 plus a global token t0'
    """
    if title is None and window is not None:
        if num_global == 0:
            title = tr("Window {window}", window=window)
        elif num_global == 1:
            title = tr("Window {window} plus a global token t0", window=window)
        else:
            title = tr("Window {window} plus {n} global tokens t0–t{last}", window=window, n=num_global,
                       last=num_global - 1)
    array = to_numpy(mask).astype(float)
    own_figure = ax is None
    if own_figure:
        fig, ax = plt.subplots(figsize=(5.4, 4.2))
    else:
        fig = ax.figure
    image = ax.imshow(array, cmap=_BOOL_CMAP, vmin=0, vmax=1, aspect="equal")
    L = array.shape[0]
    ticks = list(range(0, L, max(1, L // 8)))
    ax.set_xticks(ticks, [f"t{j}" for j in ticks])
    ax.set_yticks(ticks, [f"t{i}" for i in ticks])
    ax.set_xlabel(tr("key position (attended to)"))
    ax.set_ylabel(tr("query position (attending)"))
    ax.set_title(tr("Sliding-window mask: each query sees a band") if title is None else title)
    _bool_key(ax, image, tr("blocked\n(False)"), tr("may attend\n(True)"))
    if own_figure:
        fig.tight_layout()
    return fig


def receptive_field_figure(field: torch.Tensor, *, query: int, ax=None) -> Figure:
    """Draw which positions (columns) can reach ``query`` after 1..depth layers (rows); the title counts
    them after the last layer and names the first layer at which every input reaches it."""
    array = to_numpy(field).astype(float)
    if ax is None:
        fig, ax = plt.subplots(figsize=(6.0, 2.8))
    else:
        fig = ax.figure
    image = ax.imshow(array, cmap=_BOOL_CMAP, vmin=0, vmax=1, aspect="auto")
    depth, L = array.shape
    ticks = list(range(0, L, max(1, L // 8)))
    ax.set_xticks(ticks, [f"t{j}" for j in ticks])
    ax.set_yticks(range(depth), [tr("layer {n}", n=d + 1) for d in range(depth)])
    ax.set_xlabel(tr("input position that can influence it"))
    ax.set_ylabel(tr("after layer"))
    reach = [int(r) for r in array.sum(axis=1)]
    full = next((d + 1 for d, r in enumerate(reach) if r == L), None)
    if depth == 1:
        seen = tr("t{index} sees {reach} of {length} inputs after {depth} layer", index=query, reach=reach[-1],
                  length=L, depth=depth)
    else:
        seen = tr("t{index} sees {reach} of {length} inputs after {depth} layers", index=query, reach=reach[-1],
                  length=L, depth=depth)
    whole = tr("; all of them from layer {full}", full=full) if full is not None else ""
    ax.set_title(seen + whole)
    _bool_key(ax, image, tr("no path"), tr("reaches\nt{index}", index=query))
    return fig


def window_explorer_figure(state: WindowExplorerState) -> Figure:
    """The explorer's figure: the mask (left) and the receptive field of one query by depth (right),
    from :func:`utils.explorers.at_scale.window_explorer_state`."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2), gridspec_kw={"width_ratios": [1, 1.4]})
    window_mask_figure(state.mask, ax=left,
                       title=tr("window={window}, global={num_global}: {fraction:.0%} of (L, L) kept",
                                window=state.window, num_global=state.num_global, fraction=state.fraction))
    receptive_field_figure(state.field, query=state.query, ax=right)
    fig.tight_layout()
    return fig


def online_softmax_figure(x: torch.Tensor, block_size: int) -> Figure:
    """The running max and running sum of a 1-D online softmax after each block, with the exact values.

    Left: the scores as bars, the block boundaries, and the running max after each block drawn over the
    positions of that block. Right: the running sum after each block against the exact sum.
    """
    from utils.tiled_attention import online_softmax_update

    running_max, running_sum = torch.tensor(float("-inf")), torch.tensor(0.0)
    maxes, sums, ends = [], [], []
    for start in range(0, x.numel(), block_size):
        running_max, running_sum = online_softmax_update(running_max, running_sum, x[start:start + block_size])
        maxes.append(running_max.item())
        sums.append(running_sum.item())
        ends.append(min(start + block_size, x.numel()))
    fig, (ax_x, ax_s) = plt.subplots(1, 2, figsize=(9, 3.4))
    S = x.numel()
    ax_x.bar(range(S), to_numpy(x), color="tab:gray", label=tr("scores x"))
    # a bar spans position ± 0.5, so block b covers [start - 0.5, end - 0.5]: the max steps at the boundary
    ax_x.stairs(maxes, [-0.5, *(end - 0.5 for end in ends)], baseline=None, color="tab:red", linewidth=2,
                label=tr("running max after the block"))
    for end in ends[:-1]:
        ax_x.axvline(end - 0.5, color="black", linewidth=0.8, linestyle=":")
    ax_x.set_xticks(range(S))
    ax_x.set_xlim(-0.5, S - 0.5)
    low, high = min(0.0, x.min().item()), max(0.0, x.max().item())
    ax_x.set_ylim(low - 0.1 * (high - low), high + 0.35 * (high - low))  # room for the legend on top
    ax_x.set_xlabel(tr("position in the row (blocks of {block_size}, dotted)", block_size=block_size))
    ax_x.set_ylabel(tr("score"))
    ax_x.set_title(tr("The running max only ever goes up"))
    ax_x.legend(fontsize=8, loc="upper left", ncol=2)
    ax_s.plot(range(1, len(sums) + 1), sums, marker="o", color="tab:green", label=tr("running sum"))
    ax_s.axhline(torch.exp(x - x.max()).sum().item(), color="black", linestyle="--", label=tr("exact Σ exp(x - max)"))
    ax_s.set_xticks(range(1, len(sums) + 1))
    ax_s.set_xlabel(tr("blocks seen"))
    ax_s.set_ylabel(tr("Σ exp(x - running max)"))
    ax_s.set_title(tr("After the last block the sum is exact"))
    ax_s.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _cache_label(label: str) -> str:
    """``"full cache"`` and ``"ring buffer, W = <n>"`` in the learner's language (the labels stay English in
    the chapter's code); any other label as it is."""
    window = label.removeprefix("ring buffer, W = ")
    if label == "full cache":
        return tr("full cache")
    return tr("ring buffer, W = {window}", window=int(window)) if window != label and window.isdigit() else label


def cache_memory_figure(tokens: Sequence[int], cache_bytes: dict[str, Sequence[int]]) -> Figure:
    """The bytes each KV cache holds against the number of tokens so far, one line per cache.

    Args:
        tokens: the x values, e.g. the positions run so far at each decoding step.
        cache_bytes: label -> the cache's bytes (keys and values of every layer) at each of ``tokens``,
            e.g. from :func:`utils.decoder.decode_trace`'s ``cache_bytes``. The labels ``"full cache"``
            and ``"ring buffer, W = 16"`` are shown in the learner's language, any other as it is.

    >>> fig = cache_memory_figure([1, 2], {"full cache": [8, 16], "ring buffer, W = 1": [8, 8]})
    >>> [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    ['full cache', 'ring buffer, W = 1']
    """
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    colors = plt.get_cmap(CMAP)([0.15, 0.6, 0.9])
    for (label, values), color in zip(cache_bytes.items(), [*colors] * len(cache_bytes)):
        ax.plot(list(tokens), [b / 2**10 for b in values], color=color, linewidth=2, label=_cache_label(label))
    ax.set_xlabel(tr("tokens so far (prompt + generated)"))
    ax.set_ylabel(tr("KV cache, all layers (KiB)"))
    ax.set_title(tr("The full cache grows with the text; the ring buffer stays flat"))
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return fig


def _span(positions: Sequence[int]) -> str:
    """``[0, 1, 2, 3]`` -> ``"t0–t3"``; a single position ``"t5"``."""
    return f"t{positions[0]}" if len(positions) == 1 else f"t{positions[0]}–t{positions[-1]}"


def kv_cache_explorer_figure(state: KVCacheExplorerState) -> Figure:
    """The KV-cache explorer's figure, from :func:`utils.explorers.at_scale.kv_cache_explorer_state`.

    Top: the cache's slots (position and word; this step's writes highlighted). Bottom left: the causal
    attention matrix, the rows computed so far, this step's in bright colour, and the keys the window hides.
    Bottom right: the bytes held by this cache and by the full cache against the tokens so far.
    """
    fig = plt.figure(figsize=(11, 6.6))
    grid_spec = fig.add_gridspec(2, 2, height_ratios=[1, 3.2], width_ratios=[1.25, 1])
    table, attention, memory = (fig.add_subplot(grid_spec[0, :]), fig.add_subplot(grid_spec[1, 0]),
                                fig.add_subplot(grid_spec[1, 1]))
    colors = plt.get_cmap(CMAP)([0.0, 0.35, 0.95, 0.65])
    # the slots, in the order the cache stores them
    slots = state.cache_positions
    codes = [[0 if p < 0 else 2 if p in state.written else 1 for p in slots]]
    table.imshow(codes, cmap=ListedColormap([colors[0], colors[1], colors[2]]), vmin=0, vmax=2, aspect="auto")
    for slot, position in enumerate(slots):
        text = tr("empty") if position < 0 else f"t{position} {state.labels[position]}"
        table.text(slot, 0, text, rotation=90, ha="center", va="center", fontsize=7,
                   color="black" if position in state.written else "white")
    table.set_yticks([])
    table.set_xticks(range(len(slots)))
    table.tick_params(labelsize=6)
    table.set_xlabel(tr("slot"))
    kiB = state.cache_bytes[-1] / 2**10
    if state.window is None:
        slots_title = tr("Layer 1's full cache after step {step}: {written} written (bright), {kib:.1f} KiB in all "
                         "layers", step=state.step, written=len(state.written), kib=kiB)
    else:
        slots_title = tr("Layer 1's ring buffer of W = {window} slots after step {step}: {written} written "
                         "(bright), {kib:.1f} KiB in all layers", window=state.window, step=state.step,
                         written=len(state.written), kib=kiB)
    table.set_title(slots_title, fontsize=9)
    # the attention matrix: which rows were computed, and which keys each could see
    T = state.grid.shape[0]
    attention.imshow(to_numpy(state.grid), cmap=ListedColormap([[0.93, 0.93, 0.93, 1], colors[1], colors[2],
                                                                 (0.85, 0.3, 0.3, 1)]), vmin=0, vmax=3)
    ticks = range(0, T, max(1, T // 12))
    attention.set_xticks(ticks, [f"t{t}" for t in ticks], fontsize=7, rotation=90)
    attention.set_yticks(ticks, [f"t{t}" for t in ticks], fontsize=7)
    attention.set_xlabel(tr("key position"))
    attention.set_ylabel(tr("query position (row)"))
    lost = tr("; no longer sees {span}", span=_span(state.hidden)) if state.hidden else ""
    attention.set_title(tr("Row t{index} ({word!r}) computed", index=state.query, word=state.labels[state.query])
                        + lost, fontsize=9)
    attention.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=c) for c in (colors[2], colors[1], (0.85, 0.3, 0.3))],
                     labels=[tr("this step"), tr("earlier steps"), tr("out of the window")], fontsize=7,
                     loc="upper right")
    # memory: this cache against the full cache
    horizon = T + 1
    memory.plot(state.tokens_so_far, [b / 2**10 for b in state.full_bytes], color=colors[1], linewidth=2,
                label=tr("full cache"))
    memory.plot(state.tokens_so_far, [b / 2**10 for b in state.cache_bytes], color=colors[3], linewidth=2,
                linestyle="--", label=tr("shown cache") if state.window is None
                else tr("ring buffer, W = {window}", window=state.window))
    memory.set_xlim(state.tokens_so_far[0] - 0.5, horizon)
    memory.set_ylim(bottom=0)
    memory.set_xlabel(tr("tokens so far"))
    memory.set_ylabel(tr("KV cache, all layers (KiB)"))
    memory.set_title(tr("Cache memory"), fontsize=9)
    memory.legend(fontsize=7, loc="upper left")
    memory.grid(True, alpha=0.3)
    fig.suptitle(tr("Step {step}: predicts {word!r} for t{next}; positions run with cache {cached}, without "
                    "{uncached}", step=state.step, word=state.predicted, next=state.query + 1,
                    cached=state.positions_run_cached, uncached=state.positions_run_uncached), fontsize=10)
    fig.tight_layout()
    return fig
