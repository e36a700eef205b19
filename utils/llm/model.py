"""Chapter 7's decoder: chapter 6's :class:`~utils.decoder.TinyDecoder` brought to 2024, with the parts of
:mod:`utils.llm.blocks` (RMSNorm, rotate-half RoPE, grouped-query attention, SwiGLU). It is the Llama
architecture that SmolLM2, Llama 3 and Qwen share, and :func:`~utils.llm.load_smollm2` fills it with
SmolLM2-135M's weights.

Named like the course's other models: ``embedding``, ``layers[i].norm1``, ``.self_attn`` (``q_proj``,
``k_proj``, ``v_proj``, ``out_proj``), ``.norm2``, ``.feed_forward`` (``gate_proj``, ``up_proj``,
``down_proj``), ``norm``, ``head`` (tied to ``embedding``).

Shape letters: N batch, L new tokens, T tokens so far, E model dimension, H query heads, H_kv key/value
heads, D head dimension, V vocabulary size.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from utils._checks import check_positive_int, check_tensor, fmt_shape
from utils.attention import merge_heads, split_heads
from utils.llm.blocks import RMSNorm, SwiGLU, grouped_query_attention, rope_permutation, rotate_half_rope
from utils.llm.cache import GroupedKVCache, SinkKVCache, sink_window_mask
from utils.positional import apply_rotary

__all__ = ["ROPE_LAYOUTS", "LlamaConfig", "GroupedQueryAttention", "LlamaBlock", "LlamaDecoder"]

ROPE_LAYOUTS = ("rotate_half", "interleaved")  # Llama's pairs (i, i + D/2); chapter 4's pairs (2i, 2i + 1)


@dataclass(frozen=True)
class LlamaConfig:
    """The sizes of a Llama-architecture decoder (read from a GGUF file's metadata by the loader).

    ``num_kv_heads`` must divide ``num_heads``, and ``num_heads`` must divide ``d_model``.

    >>> LlamaConfig(vocab_size=10, d_model=576, num_layers=30, num_heads=9, num_kv_heads=3, d_ff=1536).head_dim
    64
    """

    vocab_size: int
    d_model: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    d_ff: int
    rope_base: float = 10000.0
    rms_eps: float = 1e-5
    context_length: int = 2048
    tie_embeddings: bool = True

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "num_layers", "num_heads", "num_kv_heads", "d_ff", "context_length"):
            check_positive_int(name, getattr(self, name))
        if self.d_model % self.num_heads or (self.d_model // self.num_heads) % 2:
            raise ValueError(f"d_model: expected a multiple of num_heads = {self.num_heads} with an even head "
                             f"dimension (RoPE rotates pairs), got d_model = {self.d_model}")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_kv_heads: expected a number of key/value heads that divide num_heads = "
                             f"{self.num_heads}, got {self.num_kv_heads}")

    @property
    def head_dim(self) -> int:
        """D = d_model / num_heads."""
        return self.d_model // self.num_heads

    @property
    def groups(self) -> int:
        """G = num_heads / num_kv_heads: query heads per key/value head."""
        return self.num_heads // self.num_kv_heads


def _check_layout(layout: object) -> str:
    if layout not in ROPE_LAYOUTS:
        raise ValueError(f"layout: expected one of {', '.join(map(repr, ROPE_LAYOUTS))}, got {layout!r}")
    return layout


class GroupedQueryAttention(nn.Module):
    """Causal grouped-query self-attention with RoPE on the queries and keys; no biases.

    ``q_proj`` maps E to H * D, ``k_proj`` and ``v_proj`` map E to H_kv * D, ``out_proj`` maps H * D to E.
    """

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = config.num_heads, config.num_kv_heads, config.head_dim
        self.rope_base = config.rope_base
        kv_dim = config.num_kv_heads * config.head_dim
        self.q_proj = nn.Linear(config.d_model, config.d_model, bias=False)
        self.k_proj = nn.Linear(config.d_model, kv_dim, bias=False)
        self.v_proj = nn.Linear(config.d_model, kv_dim, bias=False)
        self.out_proj = nn.Linear(config.d_model, config.d_model, bias=False)

    def forward(self, x: torch.Tensor, positions: torch.Tensor, *, rope: str = "rotate_half",
                cache: GroupedKVCache | None = None, mask: torch.Tensor | None = None,
                need_weights: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``x (N, L, E)`` at ``positions (L,)`` -> ``(out (N, L, E), weights (N, H, L, S) or None)``.

        With a ``cache``, attend to what it holds and extend it (no weights); without one, attend causally,
        within ``mask`` ``(L, L)`` when given."""
        q = split_heads(self.q_proj(x), self.num_heads)  # (N, H, L, D)
        k = split_heads(self.k_proj(x), self.num_kv_heads)  # (N, H_kv, L, D)
        v = split_heads(self.v_proj(x), self.num_kv_heads)  # (N, H_kv, L, D)
        rotate = rotate_half_rope if rope == "rotate_half" else apply_rotary
        q, k = rotate(q, positions, base=self.rope_base), rotate(k, positions, base=self.rope_base)
        if cache is not None:
            attended, weights = cache.attend(q, k, v), None  # (N, H, L, D)
        else:
            attended, weights = grouped_query_attention(q, k, v, mask, is_causal=mask is None,
                                                        need_weights=need_weights)
        return self.out_proj(merge_heads(attended)), weights  # (N, L, E)


class LlamaBlock(nn.Module):
    """Pre-norm decoder layer: ``x + attn(norm1(x))``, then ``x + feed_forward(norm2(x))``, with RMSNorm
    and SwiGLU."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.norm1 = RMSNorm(config.d_model, eps=config.rms_eps)
        self.self_attn = GroupedQueryAttention(config)
        self.norm2 = RMSNorm(config.d_model, eps=config.rms_eps)
        self.feed_forward = SwiGLU(config.d_model, config.d_ff)

    def forward(self, x: torch.Tensor, positions: torch.Tensor,
                **attention) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``x (N, L, E)`` -> ``(x (N, L, E), attention weights or None)``; ``attention``: see
        :meth:`GroupedQueryAttention.forward`."""
        attended, weights = self.self_attn(self.norm1(x), positions, **attention)
        x = x + attended  # (N, L, E)
        return x + self.feed_forward(self.norm2(x)), weights


class LlamaDecoder(nn.Module):
    """A Llama-architecture decoder: token ids ``(N, T)`` to next-token logits ``(N, T, V)``.

    ``logits = head(norm(layers(embedding(tokens))))``: no position embedding at the input, because every
    layer rotates its queries and keys (RoPE). The head shares the embedding's weight when
    ``config.tie_embeddings``.

    Args:
        config: the sizes (:class:`LlamaConfig`).
        rope: the RoPE layout the query and key weights are written for: ``"rotate_half"`` (Llama's,
            the default) or ``"interleaved"`` (chapter 4's). Setting :attr:`rope` alone, without permuting
            the weights (:meth:`use_rope_layout`), is the silent mistake of mixing the two.

    >>> config = LlamaConfig(vocab_size=20, d_model=16, num_layers=2, num_heads=4, num_kv_heads=2, d_ff=24)
    >>> model = LlamaDecoder(config).eval()
    >>> model(torch.tensor([[1, 2, 3]])).shape
    torch.Size([1, 3, 20])
    """

    def __init__(self, config: LlamaConfig, *, rope: str = "rotate_half") -> None:
        super().__init__()
        self.config = config
        self.rope = _check_layout(rope)
        self.embedding = nn.Embedding(config.vocab_size, config.d_model)
        self.layers = nn.ModuleList(LlamaBlock(config) for _ in range(config.num_layers))
        self.norm = RMSNorm(config.d_model, eps=config.rms_eps)
        self.head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_embeddings:  # as in SmolLM2, whose file has no output matrix of its own
            self.head.weight = self.embedding.weight

    def new_caches(self, window: int | None = None, sinks: int = 0) -> list[GroupedKVCache]:
        """One empty cache per layer: a :class:`~utils.llm.cache.GroupedKVCache`, or with ``window`` a
        :class:`~utils.llm.cache.SinkKVCache` of ``window`` recent positions and ``sinks`` first ones."""
        if window is None:
            if sinks:
                raise ValueError(f"sinks: {sinks} sinks need a window (window=None keeps every position)")
            return [GroupedKVCache() for _ in self.layers]
        return [SinkKVCache(window, sinks) for _ in self.layers]

    def _check_tokens(self, tokens: torch.Tensor, start: int) -> None:
        check_tensor("tokens", tokens, ndim=2, expected="(N, T)")
        if tokens.dtype.is_floating_point or tokens.dtype == torch.bool:
            raise TypeError(f"tokens: expected integer ids, got dtype {tokens.dtype}")
        V = self.config.vocab_size
        if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= V):
            raise ValueError(f"tokens: expected ids in 0 .. {V - 1}, got {int(tokens.min())} .. {int(tokens.max())}")
        end = start + tokens.shape[1]
        if end > self.config.context_length:
            raise ValueError(f"tokens: positions {start}..{end - 1} exceed the context length "
                             f"{self.config.context_length} (tokens {fmt_shape(tokens.shape)}, {start} cached)")

    def _run(self, tokens: torch.Tensor, caches: list[GroupedKVCache] | None, window: int | None, sinks: int,
             need_weights: bool) -> tuple[torch.Tensor, list[torch.Tensor]]:
        if caches is not None and (window is not None or sinks):
            raise ValueError("window: pass window and sinks to new_caches(window, sinks) when decoding with "
                             "caches, not to forward")
        if caches is not None and len(caches) != len(self.layers):
            raise ValueError(f"caches: expected one per layer ({len(self.layers)}), got {len(caches)}")
        if window is None and sinks:
            raise ValueError(f"sinks: {sinks} sinks need a window (window=None keeps every position)")
        _check_layout(self.rope)
        start = 0 if caches is None else caches[0].seen
        self._check_tokens(tokens, start)
        L = tokens.shape[1]
        positions = torch.arange(start, start + L, device=tokens.device)  # (L,)
        mask = None if window is None else sink_window_mask(L, window, sinks, device=tokens.device)  # (L, L)
        x = self.embedding(tokens)  # (N, L, E)
        maps = []
        for i, layer in enumerate(self.layers):
            x, weights = layer(x, positions, rope=self.rope, cache=None if caches is None else caches[i],
                               mask=mask, need_weights=need_weights)  # (N, L, E)
            if need_weights:
                maps.append(weights)
        return self.head(self.norm(x)), maps  # (N, L, V)

    def forward(self, tokens: torch.Tensor, caches: list[GroupedKVCache] | None = None, *,
                window: int | None = None, sinks: int = 0) -> torch.Tensor:
        """Next-token logits for every position.

        Args:
            tokens: ``(N, L)`` integer ids. With ``caches`` they follow the T tokens the caches have seen
                (positions ``T .. T + L - 1``); without, they start at position 0.
            caches: one cache per layer (:meth:`new_caches`), read and extended in place. Default: ``None``.
            window: without caches, let each query see only the ``window`` most recent positions (itself
                included). Default: ``None`` (all of them).
            sinks: with ``window``, the first positions every query also sees (StreamingLLM). Default: ``0``.

        Returns:
            Logits ``(N, L, V)``.
        """
        return self._run(tokens, caches, window, sinks, need_weights=False)[0]

    @torch.no_grad()
    def attention_maps(self, tokens: torch.Tensor, *, window: int | None = None, sinks: int = 0) -> torch.Tensor:
        """Every layer's attention weights on ``tokens`` ``(N, T)``: ``(layers, N, H, T, T)``, rows summing to 1.

        The weights of the explicit path (:func:`~utils.llm.blocks.grouped_query_attention` with
        ``need_weights=True``); ``window`` and ``sinks`` as in :meth:`forward`."""
        return torch.stack(self._run(tokens, None, window, sinks, need_weights=True)[1])

    @torch.no_grad()
    def generate(self, prompt: torch.Tensor, new_tokens: int, *, use_cache: bool = True,
                 window: int | None = None, sinks: int = 0) -> torch.Tensor:
        """Greedy decoding: ``(N, P)`` -> ``(N, P + new_tokens)``, the prompt then the most likely tokens.

        Without a cache every step runs the whole sequence so far; with it (chapter 6), the prompt runs once
        and each step runs one token against the cached keys and values. ``window`` and ``sinks`` restrict
        what each query sees, the same either way (:meth:`forward`, :meth:`new_caches`)."""
        check_tensor("prompt", prompt, ndim=2, expected="(N, P)")
        check_positive_int("new_tokens", new_tokens)
        tokens = prompt
        if not use_cache:
            for _ in range(new_tokens):
                logits = self(tokens, window=window, sinks=sinks)  # (N, T, V): recomputes every position
                tokens = torch.cat([tokens, logits[:, -1:].argmax(-1)], dim=1)  # (N, T + 1)
            return tokens
        caches = self.new_caches(window, sinks)
        logits = self(tokens, caches)  # prefill: (N, P, V)
        for step in range(new_tokens):
            next_token = logits[:, -1:].argmax(-1)  # (N, 1)
            tokens = torch.cat([tokens, next_token], dim=1)  # (N, T + 1)
            if step < new_tokens - 1:
                logits = self(next_token, caches)  # (N, 1, V): one position only
        return tokens

    @torch.no_grad()
    def use_rope_layout(self, layout: str) -> None:
        """Convert the query and key weights to ``layout`` (``"rotate_half"`` or ``"interleaved"``) in place.

        The rows of each head of ``q_proj`` and ``k_proj`` are reordered by
        :func:`~utils.llm.blocks.rope_permutation` (or its inverse), then :attr:`rope` is set. The logits do
        not change: only the layout in which the same model is written does."""
        _check_layout(layout)
        if layout == self.rope:
            return
        perm = rope_permutation(self.config.head_dim)  # rotate-half feature f is interleaved feature perm[f]
        order = perm if layout == "rotate_half" else torch.argsort(perm)
        for layer in self.layers:
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj):
                heads = proj.weight.view(-1, self.config.head_dim, proj.weight.shape[1])  # (heads, D, E)
                proj.weight.copy_(heads[:, order].reshape_as(proj.weight))
        self.rope = layout
