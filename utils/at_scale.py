"""Chapter 6 helpers: naive attention and its memory, the SDPA backend, sliding-window (local) masks with
global tokens, receptive fields, and a tiny decoder that generates with or without a KV cache.

Masks follow the package convention (``True`` = may attend). Shape letters: N batch, H heads, L query
length, S key length (the cache length plus the new tokens), E model dimension, D head dimension.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from utils.attention import MultiHeadAttention, causal_mask, merge_heads, split_heads
from utils.layers import FeedForward

try:  # torch >= 2.2 names the backends; older versions cannot say which one runs
    from torch.nn.attention import SDPBackend
except ImportError:  # pragma: no cover - the pinned torch has it
    SDPBackend = None

__all__ = ["naive_attention", "naive_bytes", "attention_memory_bytes", "sdpa_backend", "sliding_window_mask",
           "global_tokens_mask",
           "receptive_field", "attend_with_cache", "TinyDecoder", "decode_flops_ratio"]


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


class _DecoderLayer(nn.Module):
    """Pre-norm decoder layer: causal self-attention and a feed-forward block, each with a residual.

    Built from the course's modules and named like :class:`~utils.layers.TransformerEncoderLayer`:
    ``self_attn`` is a :class:`~utils.attention.MultiHeadAttention` (its ``q_proj``, ``k_proj``, ``v_proj``
    and ``out_proj``), ``feed_forward`` a :class:`~utils.layers.FeedForward`. The attention itself goes
    through :func:`attend_with_cache`, because the layer must read and extend a KV cache.
    """

    def __init__(self, d_model: int, num_heads: int) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.feed_forward = FeedForward(d_model, 4 * d_model, activation="gelu")

    def forward(self, x: torch.Tensor, cache: dict | None = None) -> torch.Tensor:
        """``x (N, L, E)`` -> ``(N, L, E)``; with a ``cache`` dict, read and extend its ``"k"`` and ``"v"``."""
        N, L, E = x.shape
        attn = self.self_attn
        h = self.norm1(x)  # (N, L, E)
        q, k, v = (split_heads(proj(h), attn.num_heads) for proj in (attn.q_proj, attn.k_proj, attn.v_proj))
        # (N, H, L, D) each. Without a cache every step recomputes K and V for the whole prefix.
        past = {} if cache is None else cache
        attended, k_all, v_all = attend_with_cache(q, k, v, past.get("k"), past.get("v"))  # (N, H, L, D)
        if cache is not None:
            cache["k"], cache["v"] = k_all, v_all  # (N, H, S, D)
        x = x + attn.out_proj(merge_heads(attended))  # (N, L, E)
        return x + self.feed_forward(self.norm2(x))  # (N, L, E)


class TinyDecoder(nn.Module):
    """A small random GPT-style decoder, just big enough to time generation with and without a KV cache.

    ``logits = head(norm(layers(embedding(tokens) + position(positions))))``, with pre-norm decoder layers
    (causal self-attention through :class:`~utils.attention.MultiHeadAttention`'s projections, then
    :class:`~utils.layers.FeedForward` with GELU) and learned absolute positions.

    Args:
        vocab_size: the number of token ids. Default: ``256``.
        d_model: the model dimension E. Default: ``128``.
        num_heads: the number of heads H; must divide ``d_model``. Default: ``4``.
        num_layers: the number of decoder layers. Default: ``4``.
        max_len: the number of positions that have an embedding. Default: ``512``.

    >>> model = TinyDecoder(vocab_size=50, d_model=32, num_heads=4, num_layers=2, max_len=64).eval()
    >>> prompt = torch.tensor([[1, 2, 3]])
    >>> torch.equal(model.generate(prompt, 10, use_cache=True), model.generate(prompt, 10, use_cache=False))
    True
    """

    def __init__(self, vocab_size: int = 256, d_model: int = 128, num_heads: int = 4, num_layers: int = 4,
                 max_len: int = 512) -> None:
        super().__init__()
        # input: token and learned position embeddings
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.position = nn.Embedding(max_len, d_model)
        # body
        self.layers = nn.ModuleList(_DecoderLayer(d_model, num_heads) for _ in range(num_layers))
        # next-token head
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)
        self.max_len = max_len

    def forward(self, tokens: torch.Tensor, caches: list[dict] | None = None, start: int = 0) -> torch.Tensor:
        """Next-token logits for every position.

        Args:
            tokens: ``(N, L)`` integer ids, at positions ``start .. start + L - 1``.
            caches: one dict per layer holding that layer's ``"k"`` and ``"v"`` ``(N, H, T, D)`` (empty
                before the first call); read and extended in place. Default: ``None`` (no cache).
            start: the position of the first token, ``T`` when the caches hold T positions. Default: ``0``.

        Returns:
            Logits ``(N, L, vocab_size)``.

        Shape:
            N batch, L new tokens, T cached positions, E ``d_model``, H ``num_heads``, D ``d_model // H``.
        """
        N, L = tokens.shape
        positions = torch.arange(start, start + L, device=tokens.device)  # (L,)
        x = self.embedding(tokens) + self.position(positions)  # (N, L, E)
        for i, layer in enumerate(self.layers):
            x = layer(x, None if caches is None else caches[i])  # (N, L, E)
        return self.head(self.norm(x))  # (N, L, vocab)

    @torch.no_grad()
    def generate(self, prompt: torch.Tensor, new_tokens: int, *, use_cache: bool = True) -> torch.Tensor:
        """Greedy decoding.

        Without a cache every step runs the whole sequence so far (``O(T²)`` work for T tokens); with it,
        the prompt is run once (prefill) and each step runs one token against the cached K and V.

        Args:
            prompt: ``(N, P)`` integer ids.
            new_tokens: how many tokens to append; ``P + new_tokens`` must not exceed ``max_len``.
            use_cache: keep each layer's K and V between steps. Default: ``True``.

        Returns:
            ``(N, P + new_tokens)``: the prompt followed by the generated ids.
        """
        if prompt.shape[1] + new_tokens > self.max_len:
            raise ValueError(f"prompt length {prompt.shape[1]} + new_tokens {new_tokens} exceeds max_len "
                             f"{self.max_len}")
        tokens = prompt  # (N, T)
        if not use_cache:
            for _ in range(new_tokens):
                logits = self(tokens)  # (N, T, vocab): recomputes every position
                tokens = torch.cat([tokens, logits[:, -1:].argmax(-1)], dim=1)  # (N, T + 1)
            return tokens
        caches: list[dict] = [{} for _ in self.layers]
        logits = self(tokens, caches)  # prefill: (N, P, vocab)
        for _ in range(new_tokens):
            next_token = logits[:, -1:].argmax(-1)  # (N, 1)
            tokens = torch.cat([tokens, next_token], dim=1)  # (N, T + 1)
            if tokens.shape[1] == prompt.shape[1] + new_tokens:
                break
            logits = self(next_token, caches, start=tokens.shape[1] - 1)  # (N, 1, vocab): one position only
        return tokens


def decode_flops_ratio(prompt_len: int, new_tokens: int) -> float:
    """Tokens pushed through the model without a cache divided by with one (ignores attention's own L²).

    >>> decode_flops_ratio(1, 3)
    2.0
    """
    without = sum(prompt_len + t for t in range(new_tokens))  # step t runs P + t tokens
    with_cache = prompt_len + new_tokens - 1
    return without / with_cache if with_cache else math.nan
