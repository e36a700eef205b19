"""Chapter 6's KV caches: the full cache, which grows by one slot per token, and a sliding-window cache, a
ring buffer of W slots whose memory stays flat however long generation runs.

Both keep, for one decoder layer, the keys and values of the positions they hold and those positions
themselves, so that what a query may see is computed from positions, not from where a key sits in memory.
Attention does not care about the order of its keys (a weighted sum over a set), and each key carries its
position in its vector (the decoder adds a position embedding at the input), so a ring buffer may overwrite
its oldest slot in place.

Masks follow the package convention (``True`` = may attend). Shape letters: N batch, H heads, L new tokens,
T positions held, W window (slots), S = T + L keys attended, D head dimension.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from utils._checks import check_positive_int, check_tensor, fmt_shape
from utils.at_scale import attend_with_cache

__all__ = ["causal_window_mask", "KVCache", "RingKVCache"]


def causal_window_mask(L: int, window: int, *, device: torch.device | str | None = None) -> torch.Tensor:
    """Bool ``(L, L)``: query ``i`` may attend to key ``j`` when ``0 <= i - j < window``.

    Each query sees itself and the ``window - 1`` positions before it: the ``window`` most recent tokens,
    what a :class:`RingKVCache` of ``window`` slots holds. ``window >= L`` gives the causal mask.

    Args:
        L: the sequence length.
        window: W, the number of most recent positions each query sees (itself included), a positive int.
        device: where to build the mask. Default: ``None`` (the default device).

    >>> causal_window_mask(4, 2).int()
    tensor([[1, 0, 0, 0],
            [1, 1, 0, 0],
            [0, 1, 1, 0],
            [0, 0, 1, 1]], dtype=torch.int32)
    """
    check_positive_int("window", window)
    offset = torch.arange(L, device=device)[:, None] - torch.arange(L, device=device)[None, :]  # (L, L): i - j
    return (offset >= 0) & (offset < window)


def _check_new(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, held: torch.Tensor | None) -> None:
    for name, x in (("query", query), ("key", key), ("value", value)):
        check_tensor(name, x, ndim=4, expected="(N, H, L, D)")
    if not (query.shape == key.shape and key.shape[:-1] == value.shape[:-1]):
        raise ValueError(f"query, key, value: expected query and key (N, H, L, D) and value (N, H, L, Dv) with the "
                         f"same N, H, L, got {fmt_shape(query.shape)}, {fmt_shape(key.shape)}, "
                         f"{fmt_shape(value.shape)}")
    if held is not None and held.shape[:2] + held.shape[3:] != key.shape[:2] + key.shape[3:]:
        raise ValueError(f"key: expected (N, H, L, D) = (*, *, L, *) matching the cache's {fmt_shape(held.shape)} "
                         f"outside L, got {fmt_shape(key.shape)}")


class KVCache:
    """The full KV cache of one layer: every position's key and value, appended as tokens arrive.

    After ``T`` tokens it holds ``k`` and ``v`` ``(N, H, T, D)``: memory grows linearly with the text.

    >>> cache = KVCache()
    >>> q = k = v = torch.randn(1, 2, 3, 4)  # (N, H, L, D): a prompt of 3 tokens
    >>> out = cache.attend(q, k, v)
    >>> out.shape, cache.positions.tolist(), cache.nbytes
    (torch.Size([1, 2, 3, 4]), [0, 1, 2], 192)
    """

    window: int | None = None

    def __init__(self) -> None:
        self.k: torch.Tensor | None = None  # (N, H, T, D)
        self.v: torch.Tensor | None = None  # (N, H, T, Dv)
        self.positions = torch.empty(0, dtype=torch.long)  # (T,): the position held in each slot
        self.seen = 0  # tokens attended so far: the position of the next one

    @property
    def nbytes(self) -> int:
        """Bytes of the keys and values held."""
        return sum(t.numel() * t.element_size() for t in (self.k, self.v) if t is not None)

    def attend(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        """Attend from the L new queries to the cached keys and the new ones, then keep the new keys and values.

        The new tokens sit at positions ``seen .. seen + L - 1``; new query ``i`` sees every cached key and the
        new keys ``0..i`` (:func:`~utils.at_scale.attend_with_cache`). A :class:`RingKVCache` sees only those
        within its window, and keeps only the last W (see there).

        Args:
            query, key: ``(N, H, L, D)``.
            value: ``(N, H, L, Dv)``.

        Returns:
            ``(N, H, L, Dv)``.
        """
        _check_new(query, key, value, self.k)
        return self._attend(query, key, value)

    def _attend(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        L = query.shape[-2]
        output, self.k, self.v = attend_with_cache(query, key, value, self.k, self.v)  # k, v: (N, H, T + L, D)
        self.positions = torch.arange(self.seen + L)  # (T + L,)
        self.seen += L
        return output  # (N, H, L, Dv)


class RingKVCache(KVCache):
    """A sliding-window KV cache of one layer: a ring buffer of ``window`` slots.

    Position ``p`` is written to slot ``p % window``, over the key and value of position ``p - window``, so
    the cache never holds more than W keys and values (memory flat in the length of the text). Each query
    sees itself and the ``window - 1`` positions before it: exactly :func:`causal_window_mask` on full
    attention, and, with ``window`` at least the sequence length, exactly the full :class:`KVCache`.

    Args:
        window: W, the number of slots, a positive int.

    Raises:
        TypeError: if ``window`` is not an int. ValueError: if it is not positive.

    >>> cache = RingKVCache(window=2)
    >>> for step in range(5):
    ...     q = k = v = torch.randn(1, 2, 1, 4)  # (N, H, 1, D): one new token
    ...     _ = cache.attend(q, k, v)
    >>> cache.positions.tolist(), cache.nbytes  # slot 0 holds position 4, slot 1 position 3
    ([4, 3], 128)
    """

    def __init__(self, window: int) -> None:
        super().__init__()
        self.window = check_positive_int("window", window)

    def _attend(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        """Attend from the L new queries to the held keys and the new ones within the window, then write the
        new keys and values into their slots (the last W of them, when ``L > W``)."""
        N, H, L, D = query.shape  # (N, H, L, D); value (N, H, L, Dv)
        new_positions = torch.arange(self.seen, self.seen + L)  # (L,)
        filled = min(self.seen, self.window)  # slots in use
        if self.k is None:
            k_all, v_all, key_positions = key, value, new_positions  # (N, H, L, D), (L,)
        else:
            k_all = torch.cat([self.k[:, :, :filled], key], dim=-2)  # (N, H, S, D), S = filled + L
            v_all = torch.cat([self.v[:, :, :filled], value], dim=-2)  # (N, H, S, Dv)
            key_positions = torch.cat([self.positions[:filled], new_positions])  # (S,)
        offset = new_positions[:, None] - key_positions[None, :]  # (L, S): how far back each key is
        mask = ((offset >= 0) & (offset < self.window)).to(query.device)  # (L, S)
        output = F.scaled_dot_product_attention(query, k_all, v_all, attn_mask=mask)  # (N, H, L, Dv)
        self._write(key, value, new_positions)
        return output

    def _write(self, key: torch.Tensor, value: torch.Tensor, new_positions: torch.Tensor) -> None:
        """Write the last ``min(L, W)`` new keys and values to slots ``position % W``."""
        if self.k is None:
            self.k = key.new_zeros(*key.shape[:2], self.window, key.shape[-1])  # (N, H, W, D)
            self.v = value.new_zeros(*value.shape[:2], self.window, value.shape[-1])  # (N, H, W, Dv)
            self.positions = torch.full((self.window,), -1, dtype=torch.long)  # (W,): -1 = empty
        keep = slice(max(0, len(new_positions) - self.window), None)  # earlier ones would be overwritten at once
        slots = new_positions[keep] % self.window  # (min(L, W),)
        self.k[:, :, slots] = key[:, :, keep]
        self.v[:, :, slots] = value[:, :, keep]
        self.positions[slots] = new_positions[keep]
        self.seen += len(new_positions)
