"""Chapter 6's KV caches for a grouped-query model, and StreamingLLM's window with attention sinks.

* :class:`GroupedKVCache` — chapter 6's full :class:`~utils.kv_cache.KVCache`, holding the H_kv shared
  key/value heads only (that is where GQA saves memory); queries keep their H heads.
* :class:`SinkKVCache` — a ring buffer of the ``window`` most recent positions plus the first ``sinks``
  positions, kept for ever (StreamingLLM). ``sinks = 0`` is chapter 6's :class:`~utils.kv_cache.RingKVCache`.
* :func:`sink_window_mask` — the same attention pattern as a mask on full attention.
* :func:`kv_cache_bytes_per_token` — what one more token costs in the cache, for any number of KV heads.

Keys are cached after their rotation (RoPE), at their position in the text. StreamingLLM instead numbers
the positions inside the cache, so that a stream may run past the trained context; within the context
(8192 tokens for SmolLM2) both give the model positions it was trained on.

Masks follow the package convention (``True`` = may attend). Shape letters: N batch, H query heads,
H_kv key/value heads, L new tokens, T positions held, S keys attended, W window, D head dimension.
"""

from __future__ import annotations

import torch

from utils._checks import check_positive_int, check_tensor, fmt_shape
from utils.attention import causal_mask
from utils.kv_cache import KVCache, causal_window_mask
from utils.llm.blocks import grouped_query_attention

__all__ = ["sink_window_mask", "GroupedKVCache", "SinkKVCache", "kv_cache_bytes_per_token"]


def _check_sinks(sinks: object) -> int:
    if isinstance(sinks, bool) or not isinstance(sinks, int) or sinks < 0:
        raise ValueError(f"sinks: expected a non-negative int (the first positions every query keeps), got {sinks!r}")
    return sinks


def sink_window_mask(L: int, window: int, sinks: int = 0, *,
                     device: torch.device | str | None = None) -> torch.Tensor:
    """Bool ``(L, L)``: query ``i`` sees key ``j <= i`` when ``i - j < window`` or ``j < sinks``.

    The ``window`` most recent positions (itself included), as in :func:`~utils.kv_cache.causal_window_mask`,
    plus the first ``sinks`` positions: what a :class:`SinkKVCache` holds.

    >>> sink_window_mask(5, 2, sinks=1).int()
    tensor([[1, 0, 0, 0, 0],
            [1, 1, 0, 0, 0],
            [1, 1, 1, 0, 0],
            [1, 0, 1, 1, 0],
            [1, 0, 0, 1, 1]], dtype=torch.int32)
    """
    _check_sinks(sinks)
    mask = causal_window_mask(L, window, device=device)  # (L, L)
    mask[:, :sinks] = True
    return mask & causal_mask(L, device=device)


def _check_grouped(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                   held: torch.Tensor | None) -> None:
    check_tensor("query", query, ndim=4, expected="(N, H, L, D)")
    for name, x in (("key", key), ("value", value)):
        check_tensor(name, x, ndim=4, expected="(N, H_kv, L, D)")
    N, H, L, D = query.shape
    if key.shape[0] != N or key.shape[2] != L or key.shape[3] != D or H % key.shape[1]:
        raise ValueError(f"key: expected (N, H_kv, L, D) = ({N}, H_kv, {L}, {D}) with H_kv dividing the "
                         f"query heads {H}, got {key.shape[1]}: shape {fmt_shape(key.shape)}")
    if value.shape[:3] != key.shape[:3]:
        raise ValueError(f"value: expected (N, H_kv, L) = {fmt_shape(key.shape[:3])} like key, got "
                         f"{fmt_shape(value.shape)}")
    if held is not None and (held.shape[:2] != key.shape[:2] or held.shape[3] != D):
        raise ValueError(f"key: expected (N, H_kv, L, D) matching the cache's {fmt_shape(held.shape)} outside L, "
                         f"got {fmt_shape(key.shape)}")


class GroupedKVCache(KVCache):
    """The full KV cache of one grouped-query layer: after T tokens, ``k`` and ``v`` ``(N, H_kv, T, D)``.

    It holds H_kv heads, not H: a GQA model's cache is ``H / H_kv`` times smaller than the same model's
    with one key/value head per query head.

    >>> cache = GroupedKVCache()
    >>> out = cache.attend(torch.randn(1, 6, 3, 4), torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4))
    >>> out.shape, cache.k.shape, cache.nbytes
    (torch.Size([1, 6, 3, 4]), torch.Size([1, 2, 3, 4]), 192)
    """

    def attend(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        """Attend from L new queries ``(N, H, L, D)`` to the held keys and the new ``(N, H_kv, L, D)`` ones,
        then keep the new keys and values. Returns ``(N, H, L, Dv)``."""
        _check_grouped(query, key, value, self.k)
        return self._attend(query, key, value)

    def _attend(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        L = query.shape[-2]
        self.k = key if self.k is None else torch.cat([self.k, key], dim=-2)  # (N, H_kv, T + L, D)
        self.v = value if self.v is None else torch.cat([self.v, value], dim=-2)  # (N, H_kv, T + L, Dv)
        S = self.k.shape[-2]
        mask = causal_mask(S, device=query.device)[S - L:]  # (L, S): new query i is position S - L + i
        output, _ = grouped_query_attention(query, self.k, self.v, mask)  # (N, H, L, Dv)
        self.positions = torch.arange(S)
        self.seen = S
        return output


class SinkKVCache(GroupedKVCache):
    """StreamingLLM's cache of one layer: the first ``sinks`` positions, kept, and a ring buffer of ``window``.

    Position ``p < sinks`` goes to slot ``p``, every later position to slot ``sinks + (p - sinks) % window``,
    over the oldest one there; memory stays at ``sinks + window`` slots however long the text. A query sees
    :func:`sink_window_mask`'s keys. With ``sinks = 0`` this is chapter 6's
    :class:`~utils.kv_cache.RingKVCache` for grouped heads.

    Args:
        window: W, the most recent positions each query sees (itself included), a positive int.
        sinks: the first positions every query also sees. Default: ``0``.

    >>> cache = SinkKVCache(window=2, sinks=1)
    >>> for step in range(5):
    ...     _ = cache.attend(torch.randn(1, 2, 1, 4), torch.randn(1, 1, 1, 4), torch.randn(1, 1, 1, 4))
    >>> cache.positions.tolist()  # the sink, then the ring's two slots
    [0, 3, 4]
    """

    def __init__(self, window: int, sinks: int = 0) -> None:
        super().__init__()
        self.window = check_positive_int("window", window)
        self.sinks = _check_sinks(sinks)

    def _slots(self, positions: torch.Tensor) -> torch.Tensor:
        ring = self.sinks + (positions - self.sinks) % self.window
        return torch.where(positions < self.sinks, positions, ring)

    def _attend(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        L = query.shape[-2]
        new_positions = torch.arange(self.seen, self.seen + L)  # (L,)
        if self.k is None:
            k_all, v_all, key_positions = key, value, new_positions
        else:
            held = self.positions >= 0  # (slots,): slots written so far
            k_all = torch.cat([self.k[:, :, held], key], dim=-2)  # (N, H_kv, S, D)
            v_all = torch.cat([self.v[:, :, held], value], dim=-2)  # (N, H_kv, S, Dv)
            key_positions = torch.cat([self.positions[held], new_positions])  # (S,)
        offset = new_positions[:, None] - key_positions[None, :]  # (L, S): how far back each key is
        mask = (offset >= 0) & ((offset < self.window) | (key_positions[None, :] < self.sinks))  # (L, S)
        output, _ = grouped_query_attention(query, k_all, v_all, mask.to(query.device))  # (N, H, L, Dv)
        self._write(key, value, new_positions)
        return output

    def _write(self, key: torch.Tensor, value: torch.Tensor, new_positions: torch.Tensor) -> None:
        """Keep the new sinks and the last ``window`` of the rest; earlier ones would be overwritten at once."""
        slots = self.sinks + self.window
        if self.k is None:
            self.k = key.new_zeros(*key.shape[:2], slots, key.shape[-1])  # (N, H_kv, sinks + W, D)
            self.v = value.new_zeros(*value.shape[:2], slots, value.shape[-1])
            self.positions = torch.full((slots,), -1, dtype=torch.long)  # -1: empty
        keep = (new_positions < self.sinks) | (new_positions >= new_positions[-1] + 1 - self.window)  # (L,)
        where = self._slots(new_positions[keep])
        self.k[:, :, where] = key[:, :, keep]
        self.v[:, :, where] = value[:, :, keep]
        self.positions[where] = new_positions[keep]
        self.seen += len(new_positions)


def kv_cache_bytes_per_token(config, *, num_kv_heads: int | None = None, bytes_per_value: int = 4) -> int:
    """Bytes one more token adds to a full KV cache: ``2 (K and V) x layers x H_kv x D x bytes_per_value``.

    Args:
        config: a :class:`~utils.llm.model.LlamaConfig`.
        num_kv_heads: H_kv for the comparison: ``config.num_heads`` for multi-head attention, ``1`` for
            multi-query attention. Default: ``None``, the model's own.
        bytes_per_value: 4 for float32, 2 for bfloat16 or float16. Default: ``4``.

    >>> from utils.llm.model import LlamaConfig
    >>> c = LlamaConfig(vocab_size=10, d_model=576, num_layers=30, num_heads=9, num_kv_heads=3, d_ff=1536)
    >>> kv_cache_bytes_per_token(c), kv_cache_bytes_per_token(c, num_kv_heads=9)
    (46080, 138240)
    """
    heads = config.num_kv_heads if num_kv_heads is None else check_positive_int("num_kv_heads", num_kv_heads)
    if config.num_heads % heads:
        raise ValueError(f"num_kv_heads: expected a number of key/value heads that divide num_heads = "
                         f"{config.num_heads}, got {heads}")
    check_positive_int("bytes_per_value", bytes_per_value)
    return 2 * config.num_layers * heads * config.head_dim * bytes_per_value
