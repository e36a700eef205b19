"""Explorers and quiz for chapter 6, attention at scale.

:func:`window_explorer_state` and :func:`kv_cache_explorer_state` compute what the explorers draw (pure,
tested by pytest); :func:`window_explorer` and :func:`kv_cache_explorer` wire them to controls and an
``Output`` widget.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from utils.at_scale import global_tokens_mask, receptive_field
from utils.decoder import DecodeStep, TinyDecoder, decode_trace
from utils.i18n.messages import tr
from utils.kv_cache import causal_window_mask
from utils.plotting.at_scale import kv_cache_explorer_figure, window_explorer_figure
from utils.tasks import REPEAT_VOCAB
from utils.widgets.common import wire_explorer
from utils.widgets.quiz import Choice, Quiz

__all__ = ["WindowExplorerState", "window_explorer_state", "window_explorer", "KVCacheExplorerState",
           "kv_cache_explorer_state", "kv_cache_explorer", "ch6_quiz"]


@dataclass(frozen=True)
class WindowExplorerState:
    """What the sliding-window explorer draws for one (window, global tokens, depth)."""

    mask: torch.Tensor  # bool (L, L), True = may attend
    field: torch.Tensor  # bool (depth, L): row d, the inputs that reach ``query`` after d + 1 layers
    reach: list[int]  # the number of inputs reaching ``query`` per layer
    fraction: float  # of the (L, L) entries kept
    full_depth: int | None  # the first depth at which ``query`` sees every input, or None
    window: int
    num_global: int
    depth: int
    query: int


def window_explorer_state(window: int, num_global: int = 0, depth: int = 3, *, length: int = 32,
                          query: int | None = None) -> WindowExplorerState:
    """The sliding-window mask with global tokens and the receptive field of one query by depth.

    Args:
        window: keys at most this far away on each side are visible.
        num_global: the first ``num_global`` tokens are global. Default: ``0``.
        depth: the number of stacked layers. Default: ``3``.
        length: L. Default: ``32``.
        query: the position whose receptive field is drawn. Default: the last one.

    Returns:
        A :class:`WindowExplorerState`: ``mask`` bool (L, L), ``field`` bool (depth, L) (row d: inputs
        that reach ``query`` after d + 1 layers), ``reach`` (the number of inputs reaching it per layer),
        ``fraction`` of the (L, L) entries kept, ``full_depth`` (first depth at which it sees every
        input, or None) and the settings.

    >>> s = window_explorer_state(2, 0, 3, length=16, query=15)
    >>> s.reach, s.full_depth
    ([3, 5, 7], None)
    """
    if window < 0 or num_global < 0 or depth < 1 or length < 1:
        raise ValueError(f"need window >= 0, num_global >= 0, depth >= 1, length >= 1; got window={window}, "
                         f"num_global={num_global}, depth={depth}, length={length}")
    query = length - 1 if query is None else query
    mask = global_tokens_mask(length, window, num_global)  # (L, L)
    field = receptive_field(mask, depth)[:, query, :]  # (depth, L)
    reach = field.sum(dim=-1).tolist()
    full = next((d + 1 for d, r in enumerate(reach) if r == length), None)
    return WindowExplorerState(mask=mask, field=field, reach=reach, fraction=mask.float().mean().item(),
                               full_depth=full, window=window, num_global=num_global, depth=depth, query=query)


def window_explorer(length: int = 32):
    """Sliders for the window, the number of global tokens and the depth; redraws the mask and the field.

    Returns:
        An ``ipywidgets.VBox`` (see :func:`~utils.widgets.common.wire_explorer`): the controls, then an
        ``Output`` with the figure. ``controls`` names them ``window``, ``num_global`` and ``depth``;
        ``state`` is the :class:`WindowExplorerState` drawn last.
    """

    import ipywidgets as w

    window = w.IntSlider(value=2, min=0, max=length // 2, description=tr("window"))
    num_global = w.IntSlider(value=0, min=0, max=4, description=tr("global tokens"))
    depth = w.IntSlider(value=3, min=1, max=8, description=tr("depth"))
    return wire_explorer(
        [w.HBox([window, num_global, depth])], {"window": window, "num_global": num_global, "depth": depth},
        lambda: window_explorer_state(window.value, num_global.value, depth.value, length=length),
        window_explorer_figure,  # the static edition's states:
        grid={"window": (0, 1, 2, 4, length // 2), "num_global": (0, 1), "depth": (1, 2, 4, 8)}, pure_draw=True)


@dataclass(frozen=True)
class KVCacheExplorerState:
    """What the KV-cache explorer draws at one decoding step, with the full cache or a ring buffer."""

    step: int  # 0: the prefill (the whole prompt); then one token per step
    window: int | None  # the ring buffer's slots W; None: the full cache
    labels: list[str]  # the words at positions 0..query (prompt, then what the model wrote)
    predicted: str  # the word this step predicts for position query + 1
    query: int  # the newest position, whose attention row this step computes
    rows: list[int]  # the attention rows computed at this step (the whole prompt at the prefill)
    grid: torch.Tensor  # long (T, T), T positions ever run: 0 not computed, 1 seen at an earlier step,
    #                     2 seen at this step, 3 an earlier key that row can no longer see (out of the window)
    cache_positions: list[int]  # layer 0's cache after the step, in slot order (-1: empty slot)
    written: list[int]  # the positions written into the cache at this step
    visible: list[int]  # the positions the newest token attends to
    hidden: list[int]  # the earlier positions it can no longer see
    tokens_so_far: list[int]  # per step 0..step: positions run so far with the cache (the memory line's x)
    cache_bytes: list[int]  # per step 0..step: keys and values of every layer, this cache
    full_bytes: list[int]  # per step 0..step: the same for the full cache
    positions_run_cached: int  # positions pushed through the model so far, with the cache
    positions_run_uncached: int  # what recomputing the whole prefix at every step would have run


def kv_cache_explorer_state(prompt: Sequence[int], traces: Mapping[int | None, Sequence[DecodeStep]], step: int,
                            window: int | None = None, *, vocab: Sequence[str] = REPEAT_VOCAB
                            ) -> KVCacheExplorerState:
    """What decoding step ``step`` computes and holds, read off :func:`~utils.decoder.decode_trace` records.

    Args:
        prompt: the prompt's ``P`` token ids.
        traces: window -> ``decode_trace(model, prompt, n, window=window)``; key ``None`` (the full cache) is
            required, the others are the ring buffers the explorer offers.
        step: ``0 <= step < n``; step 0 is the prefill (all P prompt rows), step s runs position ``P + s - 1``.
        window: the ring buffer shown, a key of ``traces``. Default: ``None`` (the full cache).
        vocab: the word of each token id. Default: :data:`~utils.tasks.REPEAT_VOCAB`.

    Returns:
        A :class:`KVCacheExplorerState`.

    >>> model = TinyDecoder(vocab_size=17, d_model=8, num_heads=2, num_layers=1, max_len=16).eval()
    >>> prompt = torch.tensor([[0, 1, 2, 16]])
    >>> traces = {None: decode_trace(model, prompt, 6), 3: decode_trace(model, prompt, 6, window=3)}
    >>> s = kv_cache_explorer_state([0, 1, 2, 16], traces, 2, window=3)
    >>> s.query, s.cache_positions, s.visible, s.hidden, s.positions_run_cached, s.positions_run_uncached
    (5, [3, 4, 5], [3, 4, 5], [0, 1, 2], 6, 15)
    """
    if None not in traces or window not in traces:
        raise ValueError(f"window: expected one of the traced windows {sorted(traces, key=str)} (None: the full "
                         f"cache, which traces must hold), got {window}")
    trace, full = traces[window], traces[None]
    if not 0 <= step < len(trace):
        raise ValueError(f"step: expected 0 <= step < {len(trace)} (the traced steps), got {step}")
    P = len(prompt)
    ids = [*prompt, *(s.token for s in trace)]  # every token of the decode, the last one never run
    if max(ids) >= len(vocab):
        raise ValueError(f"vocab: token id {max(ids)} has no word in a vocab of {len(vocab)}")
    record = trace[step]
    query = record.position
    rows = list(range(P)) if step == 0 else [query]
    T = P + len(trace) - 1  # positions ever run
    allowed = causal_window_mask(T, window or T)  # (T, T)
    earlier = torch.arange(T)[None, :] < torch.arange(T)[:, None]  # (T, T): keys before the query
    grid = torch.where(allowed, 1, torch.where(earlier, 3, 0))  # (T, T)
    grid[list(rows)] = torch.where(allowed[rows], 2, grid[rows])  # this step's rows
    grid[query + 1:] = 0  # not computed yet
    visible = allowed[query].nonzero().flatten().tolist()
    return KVCacheExplorerState(
        step=step, window=window, labels=[vocab[i] for i in ids[:query + 1]], predicted=vocab[ids[query + 1]],
        query=query, rows=rows, grid=grid, cache_positions=list(record.cache_positions), written=rows,
        visible=visible, hidden=[p for p in range(query) if p not in visible],
        tokens_so_far=[s.positions_run_cached for s in trace[:step + 1]],
        cache_bytes=[s.cache_bytes for s in trace[:step + 1]], full_bytes=[s.cache_bytes for s in full[:step + 1]],
        positions_run_cached=record.positions_run_cached, positions_run_uncached=record.positions_run_uncached)


def kv_cache_explorer(model: TinyDecoder, prompt: torch.Tensor, new_tokens: int = 32,
                      windows: Sequence[int] = (4, 8, 9, 16), *, vocab: Sequence[str] = REPEAT_VOCAB):
    """Play or step through greedy decoding with a KV cache; a switch turns the cache into a ring buffer.

    Decodes ``prompt`` once with the full cache and once per window (:func:`~utils.decoder.decode_trace`),
    then redraws :func:`~utils.plotting.at_scale.kv_cache_explorer_figure` for the chosen step.

    Args:
        model: a :class:`~utils.decoder.TinyDecoder`.
        prompt: ``(1, P)`` token ids.
        new_tokens: the steps to trace. Default: ``32``.
        windows: the ring-buffer sizes offered. Default: ``(4, 8, 9, 16)``.
        vocab: the word of each token id. Default: :data:`~utils.tasks.REPEAT_VOCAB`.

    Returns:
        An ``ipywidgets.VBox`` (see :func:`~utils.widgets.common.wire_explorer`); ``controls`` names
        ``step``, ``sliding`` and ``window``; ``play`` is the ``Play`` widget that drives ``step``; ``state``
        is the :class:`KVCacheExplorerState` drawn last.
    """
    import ipywidgets as w

    traces = {None: decode_trace(model, prompt, new_tokens)}
    traces.update({size: decode_trace(model, prompt, new_tokens, window=size) for size in windows})
    ids = prompt[0].tolist()
    play = w.Play(value=0, min=0, max=new_tokens - 1, interval=800, description=tr("play"))
    step = w.IntSlider(value=0, min=0, max=new_tokens - 1, description=tr("step"))
    w.link((play, "value"), (step, "value"))  # kernel-side, so that Play also works where tests drive it
    sliding = w.Checkbox(value=False, description=tr("sliding window (ring buffer)"))
    window = w.Dropdown(options=list(windows), value=max(windows), description=tr("W slots"))
    box = wire_explorer(
        [w.HBox([play, step]), w.HBox([sliding, window])], {"step": step, "sliding": sliding, "window": window},
        lambda: kv_cache_explorer_state(ids, traces, step.value, window.value if sliding.value else None,
                                        vocab=vocab),
        kv_cache_explorer_figure,
        grid={"step": sorted({s for s in (0, 1, 4, 8, new_tokens // 2) if s < new_tokens} | {new_tokens - 1}),
              "window": tuple(windows)}, pure_draw=True)  # the static edition: a window the full cache
    # ignores gives the same state, drawn once
    box.play = play
    return box


def ch6_quiz() -> Quiz:
    """Six questions on memory, tiling, the backward pass, windows, the KV cache and the ring-buffer cache."""
    return Quiz([
        Choice(
            tr("Tiled (FlashAttention-style) attention computes exactly the same output as the naive version. "
               "What does it save?"),
            [tr("Floating-point operations: it skips most of the (L, S) scores"),
             tr("Memory: it never holds the (L, S) scores at once, only one block"),
             tr("Nothing on CPU; it only helps on GPUs"),
             tr("Accuracy: it is more precise than softmax")],
            answer=1,
            feedback=[
                tr("No: it still computes every score, once; the FLOPs are the same (FlashAttention is faster on GPU "
                   "because it moves less data, not because it computes less)."),
                tr("Right: extra memory O(L) instead of O(L·S); we measured it with peak RSS."),
                tr("The memory saving is the same on CPU; we measured it here on a CPU."),
                tr("It gives the same result up to rounding; the online softmax is a rearrangement, not an "
                   "improvement."),
            ],
            explanation=tr("Same maths, same FLOPs, different order: only one block of scores is alive at a time."),
        ),
        Choice(
            tr("You train with tiled_attention(..., backward=\"autograd\"): the Python loop under autograd. How much "
               "memory does the backward pass need?"),
            [tr("O(L), like the forward"),
             tr("O(L·S): autograd saves every block it computed for the backward"),
             tr("None: the loop is not differentiable"),
             "O(1)"],
            answer=1,
            feedback=[
                tr("Only the forward is O(L). Autograd keeps each block's tensors alive for the backward."),
                tr("Right: that is why FlashAttention writes its own backward, which recomputes each block from the "
                   "one logsumexp per row the forward saved (section 3 does the same)."),
                tr("It is differentiable; the tests compare its gradients with F.scaled_dot_product_attention's."),
                tr("Even the output alone is O(L·Dv)."),
            ],
            explanation=tr("Memory-efficient training needs a custom backward (recomputation), not just a tiled "
                           "forward."),
        ),
        Choice(
            tr("FlashAttention's forward saves one logsumexp per query row for the backward. Why not save the weights "
               "P instead?"),
            [tr("P is an (L, S) matrix: saving it brings back the O(L·S) memory that tiling removed, while the "
                "logsumexp is L numbers from which each block of P is rebuilt as exp(S - lse)"),
             tr("The logsumexp is more accurate than P"),
             tr("P cannot be computed block by block"),
             tr("The backward does not need P at all")],
            answer=0,
            feedback=[
                tr("Right: the backward recomputes each block's scores from Q and K and gets its exact weights back "
                   "from one saved number per row, trading a second pass of FLOPs for memory."),
                tr("Both are exact up to rounding; the point is their size, not their accuracy."),
                tr("The forward computes P one block at a time; it simply never keeps it."),
                tr("It does: dV = Pᵀ dO and dS = P ⊙ (dP − D) both use P, rebuilt block by block."),
            ],
            explanation=tr("Recompute rather than store: L numbers instead of L × S, at the cost of redoing the "
                           "scores."),
        ),
        Choice(
            tr("A model stacks 4 layers of sliding-window attention with window 2 (two keys on each side). How far "
               "back can information reach the last token?"),
            [tr("2 positions"), tr("4 positions"), tr("8 positions"), tr("Everywhere: attention is global")],
            answer=2,
            feedback=[
                tr("That is one layer. Each layer adds another window."),
                tr("That counts two layers."),
                tr("Right: the receptive field grows by the window per layer, 4 x 2 = 8."),
                tr("Not with a window mask: a token outside the band has weight zero in that layer."),
            ],
            explanation=tr("Depth widens a local model's view linearly; global tokens shortcut it in two hops."),
        ),
        Choice(
            tr("Why does a KV cache give exactly the same tokens as recomputing the whole prefix at every step?"),
            [tr("It does not: it is an approximation"),
             tr("Because of the causal mask: earlier positions never see later ones, so their keys and values "
                "never change"),
             tr("Because the model is in eval mode"),
             tr("Because keys and values are the same tensor")],
            answer=1,
            feedback=[
                tr("It is exact; the chapter checks that both generate the same tokens."),
                tr("Right: with causal attention, position t's K and V depend only on tokens 0..t, so we compute "
                   "them once."),
                tr("Eval mode switches dropout off, but the reason the cache is exact is the causal mask."),
                tr("They are two different projections of the same hidden states."),
            ],
            explanation=tr("No causal mask (e.g. an encoder) means no KV cache: every position would change at each "
                           "step."),
        ),
        Choice(
            tr("A 2-layer decoder generates with a ring-buffer cache of W slots per layer. Can the newest token still "
               "be influenced by a token more than W positions back?"),
            [tr("No: its keys and values were overwritten, so nothing of that token is left"),
             tr("Yes: layer 2's cached keys were computed from layer-1 states that each saw their own window, so "
                "information can arrive from up to 2(W - 1) positions back"),
             tr("Yes: the ring buffer keeps a summary of the evicted tokens in its oldest slot"),
             tr("Only if W is at least the length of the prompt")],
            answer=1,
            feedback=[
                tr("Its own keys are gone, but not everything it passed on: the cached keys of layer 2 come from "
                   "layer-1 states that attended to it while it was still in the window."),
                tr("Right: each layer reaches one window further, as section 4's receptive fields showed. Our model "
                   "still fails below one pattern's length, because it was never trained to relay a word that way."),
                tr("It keeps nothing but the W most recent keys and values; slots are simply overwritten."),
                tr("The prompt length does not matter: once more than W tokens exist, the oldest slot is overwritten."),
            ],
            explanation=tr("A sliding window limits what one layer sees, not how far information travels through "
                           "depth."),
        ),
    ], title=tr("Chapter 6 quiz: attention at scale"))
