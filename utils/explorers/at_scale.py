"""The explorers' state of chapter 6, attention at scale: :func:`window_explorer_state` and
:func:`kv_cache_explorer_state` compute what the explorers draw (pure, tested by pytest);
:mod:`utils.widgets.at_scale` wires them to controls and :mod:`utils.plotting.at_scale` draws them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from utils.at_scale import global_tokens_mask, receptive_field
from utils.decoder import DecodeStep
from utils.kv_cache import causal_window_mask
from utils.tasks import REPEAT_VOCAB

__all__ = ["WindowExplorerState", "window_explorer_state", "KVCacheExplorerState", "kv_cache_explorer_state"]


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
    cache_positions: list[int]  # layer 1's (index 0's) cache after the step, in slot order (-1: empty slot)
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

    >>> from utils.decoder import TinyDecoder, decode_trace
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
