"""Chapter 6 helpers: naive attention and its memory, the SDPA backend, sliding-window (local) masks with
global tokens, receptive fields, one attention step with a KV cache, and what the cache saves. The decoder
that uses it is in :mod:`utils.decoder`, the caches (full and ring buffer) in :mod:`utils.kv_cache`.

Masks follow the package convention (``True`` = may attend). Shape letters: N batch, H heads, L query
length, S key length (the cache length plus the new tokens), E model dimension, D head dimension.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from utils.attention import causal_mask

try:  # torch >= 2.2 names the backends; older versions cannot say which one runs
    from torch.nn.attention import SDPBackend
except ImportError:  # pragma: no cover - the pinned torch has it
    SDPBackend = None

__all__ = ["naive_attention", "naive_bytes", "attention_memory_bytes", "sdpa_backend", "sliding_window_mask",
           "global_tokens_mask",
           "receptive_field", "attend_with_cache", "decode_flops_ratio"]


def naive_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """Attention that materialises the scores: ``(..., L, D), (..., S, D), (..., S, Dv) -> (..., L, Dv)``.

    >>> q = torch.randn(1, 2, 5, 4)
    >>> torch.allclose(naive_attention(q, q, q), torch.nn.functional.scaled_dot_product_attention(q, q, q), atol=1e-6)
    True
    """
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])  # (..., L, S): the O(L * S) part
    return torch.softmax(scores, dim=-1) @ value  # (..., L, S) @ (..., S, Dv) -> (..., L, Dv)


def naive_bytes(length: int, heads: int = 8, batch: int = 1, itemsize: int = 4) -> int:
    """Bytes of the two (N, H, L, L) matrices naive attention holds at once (scores and weights)."""
    return 2 * batch * heads * length * length * itemsize


def attention_memory_bytes(length: int, block_size: int, *, heads: int = 8, head_dim: int = 64, batch: int = 1,
                           itemsize: int = 4) -> dict[str, int]:
    """Bytes of the largest tensors each way of computing self-attention's forward holds at once.

    Returns:
        ``"naive scores"``: the ``(N, H, L, L)`` scores; ``"naive scores + weights"``: those and their
        softmax; ``"keys tiled"``: tiling only the keys, an ``(N, H, L, B)`` stripe of scores and its
        exponentials; ``"queries and keys tiled"``: one ``(N, H, B, B)`` block of scores and its
        exponentials; ``"output"``: the ``(N, H, L, D)`` output that every version holds.

    >>> sizes = attention_memory_bytes(1024, 128)
    >>> sizes["keys tiled"] == 2 * 8 * 1024 * 128 * 4, sizes["naive scores + weights"] == naive_bytes(1024)
    (True, True)
    """
    per_head = batch * heads * itemsize
    return {"naive scores": per_head * length * length,
            "naive scores + weights": naive_bytes(length, heads, batch, itemsize),
            "keys tiled": 2 * per_head * length * block_size,
            "queries and keys tiled": 2 * per_head * block_size * block_size,
            "output": per_head * length * head_dim}


def sdpa_backend(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *, is_causal: bool = False) -> str:
    """The backend ``F.scaled_dot_product_attention`` picks for these inputs: ``"FLASH_ATTENTION"``,
    ``"EFFICIENT_ATTENTION"``, ``"CUDNN_ATTENTION"``, ``"MATH"``... (``torch._fused_sdp_choice``, a private
    helper that the dispatcher itself calls; ``"unknown"`` where it is missing).

    >>> sdpa_backend(*(torch.randn(1, 2, 8, 4) for _ in range(3))) in ("FLASH_ATTENTION", "MATH", "unknown")
    True
    """
    choose = getattr(torch, "_fused_sdp_choice", None)
    if choose is None or SDPBackend is None:
        return "unknown"
    try:
        index = choose(query, key, value, None, 0.0, is_causal)
        return next((b.name for b in SDPBackend.__members__.values() if int(b) == index), str(index))
    except Exception:  # noqa: BLE001 - best effort: the name is informative, never essential
        return "unknown"


def sliding_window_mask(L: int, window: int, *, device: torch.device | str | None = None) -> torch.Tensor:
    """Bool ``(L, L)``: query ``i`` may attend to key ``j`` when ``|i - j| <= window`` (Longformer's local band).

    >>> sliding_window_mask(4, 1).int()
    tensor([[1, 1, 0, 0],
            [1, 1, 1, 0],
            [0, 1, 1, 1],
            [0, 0, 1, 1]], dtype=torch.int32)
    """
    positions = torch.arange(L, device=device)  # (L,)
    return (positions[:, None] - positions[None, :]).abs() <= window  # (L, L)


def global_tokens_mask(L: int, window: int, num_global: int = 0) -> torch.Tensor:
    """:func:`sliding_window_mask` plus ``num_global`` global tokens (the first ones, like Longformer's [CLS]):
    they attend to every position and every position attends to them. Bool ``(L, L)``.

    >>> global_tokens_mask(4, 0, 1).int()
    tensor([[1, 1, 1, 1],
            [1, 1, 0, 0],
            [1, 0, 1, 0],
            [1, 0, 0, 1]], dtype=torch.int32)
    """
    mask = sliding_window_mask(L, window)  # (L, L)
    mask[:num_global, :] = True  # global queries see everything
    mask[:, :num_global] = True  # everyone sees the global keys
    return mask


def receptive_field(mask: torch.Tensor, depth: int) -> torch.Tensor:
    """Which inputs can influence each position after 1..depth layers of attention with ``mask``.

    Layer d's field is the boolean matrix power ``mask^d``: position i sees j if some path of d hops
    through allowed (query, key) pairs leads from i to j.

    Args:
        mask: bool ``(L, L)``.
        depth: number of stacked layers.

    Returns:
        bool ``(depth, L, L)``.

    >>> receptive_field(sliding_window_mask(5, 1), 2)[1, 0].int()
    tensor([1, 1, 1, 0, 0], dtype=torch.int32)
    """
    step = mask.to(torch.float32)  # (L, L)
    reach = step.clone()  # (L, L): one layer
    fields = [reach > 0]
    for _ in range(depth - 1):
        reach = ((reach @ step) > 0).to(torch.float32)  # (L, L) @ (L, L) -> (L, L): one more hop
        fields.append(reach > 0)
    return torch.stack(fields)  # (depth, L, L)


def attend_with_cache(q_new: torch.Tensor, k_new: torch.Tensor, v_new: torch.Tensor,
                      k_cache: torch.Tensor | None, v_cache: torch.Tensor | None,
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Append the new keys/values to the cache and attend from the new queries to everything cached.

    The new tokens are the *last* ones, so new query ``i`` may see all cached keys and new keys ``0..i``:
    that is :func:`~utils.attention.causal_mask` ``(S, S)`` cut to its last ``L`` rows.

    Args:
        q_new: ``(N, H, L, D)``, usually ``L = 1`` while decoding (the whole prompt when prefilling).
        k_new, v_new: ``(N, H, L, D)``.
        k_cache, v_cache: ``(N, H, T, D)`` from the previous steps, or ``None`` at the first step.

    Returns:
        ``(output (N, H, L, D), k_cache (N, H, T + L, D), v_cache (N, H, T + L, D))``.
    """
    k_all = k_new if k_cache is None else torch.cat([k_cache, k_new], dim=-2)  # (N, H, S, D), S = T + L
    v_all = v_new if v_cache is None else torch.cat([v_cache, v_new], dim=-2)  # (N, H, S, D)
    L, S = q_new.shape[-2], k_all.shape[-2]
    mask = causal_mask(S, device=q_new.device)[S - L:]  # (L, S): new query i is position S - L + i
    output = F.scaled_dot_product_attention(q_new, k_all, v_all, attn_mask=mask)  # (N, H, L, D)
    return output, k_all, v_all


def decode_flops_ratio(prompt_len: int, new_tokens: int) -> float:
    """Tokens pushed through the model without a cache divided by with one (ignores attention's own L²).

    >>> decode_flops_ratio(1, 3)
    2.0
    """
    without = sum(prompt_len + t for t in range(new_tokens))  # step t runs P + t tokens
    with_cache = prompt_len + new_tokens - 1
    return without / with_cache if with_cache else math.nan
