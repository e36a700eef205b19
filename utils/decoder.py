"""Chapter 6's tiny decoder: a GPT-style model built from the course's layers, trained on
:func:`~utils.tasks.repeat_task`, that generates greedily with no cache, a full KV cache or a ring buffer.

* :class:`TinyDecoder` — token and learned position embeddings, pre-norm decoder layers (causal
  self-attention through :class:`~utils.attention.MultiHeadAttention`'s projections, then
  :class:`~utils.layers.FeedForward`), a final LayerNorm and a next-token head.
* :func:`train_decoder` — Adam on next-token cross-entropy, seeded, with a tqdm progress bar.
* :func:`continuation_accuracy` — how many generated tokens continue the prompt's pattern correctly.
* :func:`decode_trace` — what every decoding step holds in its caches (for the KV-cache explorer).

Shape letters: N batch, L new tokens, T tokens so far, P prompt length, E model dimension, H heads,
D head dimension, V vocabulary size, W window.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from utils._checks import check_positive_int, check_tensor, fmt_shape
from utils.at_scale import attend_with_cache
from utils.attention import MultiHeadAttention, merge_heads, split_heads
from utils.kv_cache import KVCache, RingKVCache, causal_window_mask
from utils.layers import FeedForward
from utils.training import History, adam_loop

__all__ = ["TinyDecoder", "train_decoder", "continuation_accuracy", "DecodeStep", "decode_trace"]


class _DecoderLayer(nn.Module):
    """Pre-norm decoder layer: causal self-attention and a feed-forward block, each with a residual.

    Built from the course's modules and named like :class:`~utils.layers.TransformerEncoderLayer`:
    ``self_attn`` is a :class:`~utils.attention.MultiHeadAttention` (its ``q_proj``, ``k_proj``, ``v_proj``
    and ``out_proj``), ``feed_forward`` a :class:`~utils.layers.FeedForward`. The attention itself goes
    through a cache's ``attend`` (or :func:`~utils.at_scale.attend_with_cache` without one), because the
    layer must read and extend a KV cache.
    """

    def __init__(self, d_model: int, num_heads: int) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.feed_forward = FeedForward(d_model, 4 * d_model, activation="gelu")

    def forward(self, x: torch.Tensor, cache: KVCache | None = None, window: int | None = None) -> torch.Tensor:
        """``x (N, L, E)`` -> ``(N, L, E)``; with a ``cache``, read and extend it; without one, ``window``
        restricts each query to the ``window`` most recent positions (:func:`~utils.kv_cache.causal_window_mask`)."""
        N, L, E = x.shape
        attn = self.self_attn
        h = self.norm1(x)  # (N, L, E)
        q, k, v = (split_heads(proj(h), attn.num_heads) for proj in (attn.q_proj, attn.k_proj, attn.v_proj))
        # (N, H, L, D) each. Without a cache every step recomputes K and V for the whole prefix.
        if cache is not None:
            attended = cache.attend(q, k, v)  # (N, H, L, D)
        elif window is None:
            attended, _, _ = attend_with_cache(q, k, v, None, None)  # (N, H, L, D): causal
        else:
            mask = causal_window_mask(L, window, device=x.device)  # (L, L)
            attended = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (N, H, L, D)
        x = x + attn.out_proj(merge_heads(attended))  # (N, L, E)
        return x + self.feed_forward(self.norm2(x))  # (N, L, E)


class TinyDecoder(nn.Module):
    """A small GPT-style decoder that generates with no cache, a full KV cache or a ring-buffer cache.

    ``logits = head(norm(layers(embedding(tokens) + position(positions))))``, with pre-norm decoder layers
    (causal self-attention through :class:`~utils.attention.MultiHeadAttention`'s projections, then
    :class:`~utils.layers.FeedForward` with GELU) and learned absolute positions.

    Args:
        vocab_size: the number of token ids V. Default: ``256``.
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
        self.vocab_size = check_positive_int("vocab_size", vocab_size)
        self.max_len = check_positive_int("max_len", max_len)
        # input: token and learned position embeddings
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.position = nn.Embedding(max_len, d_model)
        # body
        self.layers = nn.ModuleList(_DecoderLayer(d_model, num_heads) for _ in range(num_layers))
        # next-token head
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)

    def new_caches(self, window: int | None = None) -> list[KVCache]:
        """One empty cache per layer: a :class:`~utils.kv_cache.KVCache`, or with ``window`` a
        :class:`~utils.kv_cache.RingKVCache` of that many slots."""
        return [KVCache() if window is None else RingKVCache(window) for _ in self.layers]

    def forward(self, tokens: torch.Tensor, caches: list[KVCache] | None = None, *,
                window: int | None = None) -> torch.Tensor:
        """Next-token logits for every position.

        Args:
            tokens: ``(N, L)`` integer ids. With ``caches`` they follow the ``T`` tokens the caches have seen
                (positions ``T .. T + L - 1``); without, they start at position 0.
            caches: one cache per layer (:meth:`new_caches`), read and extended in place. Default: ``None``.
            window: without caches, let each query see only the ``window`` most recent positions, itself
                included (what a ring buffer of ``window`` slots gives). Default: ``None`` (all of them).

        Returns:
            Logits ``(N, L, V)``.

        Shape:
            N batch, L new tokens, T cached positions, E ``d_model``, V ``vocab_size``.
        """
        check_tensor("tokens", tokens, ndim=2, expected="(N, L)")
        if caches is not None and window is not None:
            raise ValueError("window: pass it to new_caches(window) when decoding with caches, not to forward")
        if caches is not None and len(caches) != len(self.layers):
            raise ValueError(f"caches: expected one per layer ({len(self.layers)}), got {len(caches)}")
        if window is not None:
            check_positive_int("window", window)
        N, L = tokens.shape
        start = 0 if caches is None else caches[0].seen
        if start + L > self.max_len:
            raise ValueError(f"tokens: positions {start}..{start + L - 1} exceed max_len {self.max_len} "
                             f"(tokens {fmt_shape(tokens.shape)}, {start} cached)")
        positions = torch.arange(start, start + L, device=tokens.device)  # (L,)
        x = self.embedding(tokens) + self.position(positions)  # (N, L, E)
        for i, layer in enumerate(self.layers):
            x = layer(x, None if caches is None else caches[i], window)  # (N, L, E)
        return self.head(self.norm(x))  # (N, L, V)

    @torch.no_grad()
    def generate(self, prompt: torch.Tensor, new_tokens: int, *, use_cache: bool = True,
                 window: int | None = None) -> torch.Tensor:
        """Greedy decoding.

        Without a cache every step runs the whole sequence so far (``O(T²)`` work for T tokens); with it,
        the prompt is run once (prefill) and each step runs one token against the cached K and V.

        Args:
            prompt: ``(N, P)`` integer ids.
            new_tokens: how many tokens to append; ``P + new_tokens`` must not exceed ``max_len``.
            use_cache: keep each layer's K and V between steps. Default: ``True``.
            window: each query sees only the ``window`` most recent positions: with the cache, a
                :class:`~utils.kv_cache.RingKVCache` of ``window`` slots; without, the equivalent mask.
                Default: ``None`` (every position; a full :class:`~utils.kv_cache.KVCache`).

        Returns:
            ``(N, P + new_tokens)``: the prompt followed by the generated ids.
        """
        check_tensor("prompt", prompt, ndim=2, expected="(N, P)")
        check_positive_int("new_tokens", new_tokens)
        if prompt.shape[1] + new_tokens > self.max_len:
            raise ValueError(f"prompt length {prompt.shape[1]} + new_tokens {new_tokens} exceeds max_len "
                             f"{self.max_len}")
        tokens = prompt  # (N, T)
        if not use_cache:
            for _ in range(new_tokens):
                logits = self(tokens, window=window)  # (N, T, V): recomputes every position
                tokens = torch.cat([tokens, logits[:, -1:].argmax(-1)], dim=1)  # (N, T + 1)
            return tokens
        caches = self.new_caches(window)
        logits = self(tokens, caches)  # prefill: (N, P, V)
        for _ in range(new_tokens):
            next_token = logits[:, -1:].argmax(-1)  # (N, 1)
            tokens = torch.cat([tokens, next_token], dim=1)  # (N, T + 1)
            if tokens.shape[1] == prompt.shape[1] + new_tokens:
                break
            logits = self(next_token, caches)  # (N, 1, V): one position only
        return tokens


def train_decoder(model: TinyDecoder, data: torch.Tensor, *, steps: int, batch_size: int = 16, lr: float = 1e-2,
                  skip: int = 0, windows: tuple[int | None, ...] = (None,), seed: int = 0, progress: bool = True,
                  desc: str = "training") -> History:
    """Train ``model`` in place with Adam on next-token prediction over random rows of ``data``.

    The loss is the cross-entropy of predicting token ``t + 1`` from tokens ``0..t``, averaged over the
    targets after the first ``skip`` (those a model cannot know, such as :func:`~utils.tasks.repeat_task`'s
    first pattern). Each step attends within a window drawn from ``windows`` (``None``: every position), as
    sliding-window models are trained, so that the model learns to use only what a ring buffer of that many
    slots keeps. Deterministic: batches and windows come from a generator seeded with ``seed``. A loss that
    becomes NaN or infinite stops training (:func:`~utils.training.adam_loop`). The model is left in eval mode.

    Args:
        model: a :class:`TinyDecoder`.
        data: ``(N, T)`` token ids, ``T <= max_len + 1``.
        steps: the number of optimiser steps, a positive int.
        batch_size: rows drawn (with replacement) per step, a positive int. Default: ``16``.
        lr: Adam's learning rate. Default: ``1e-2``.
        skip: targets not scored at the start of each row, ``0 <= skip < T - 1``. Default: ``0``.
        windows: the windows to draw from, one per step (see :meth:`TinyDecoder.forward`). Default:
            ``(None,)`` (full causal attention only).
        seed: seed of the batch order and the windows. Default: ``0``.
        progress: show a tqdm progress bar. Default: ``True``.
        desc: the progress bar's label. Default: ``"training"``.

    Returns:
        A :class:`~utils.training.History` whose ``loss`` has one float per step.

    >>> from utils.tasks import REPEAT_VOCAB, repeat_task
    >>> _ = torch.manual_seed(0)
    >>> model = TinyDecoder(len(REPEAT_VOCAB), d_model=16, num_heads=2, num_layers=1, max_len=12)
    >>> history = train_decoder(model, repeat_task(8, 13, period=3), steps=2, batch_size=4, progress=False)
    >>> len(history.loss)
    2
    """
    check_tensor("data", data, ndim=2, expected="(N, T)")
    check_positive_int("steps", steps)
    check_positive_int("batch_size", batch_size)
    if not 0 <= skip < data.shape[1] - 1:
        raise ValueError(f"skip: expected 0 <= skip < T - 1 = {data.shape[1] - 1} for data "
                         f"{fmt_shape(data.shape)}, got {skip}")
    if not windows:
        raise ValueError("windows: expected at least one window (None = every position), got an empty tuple")
    for window in windows:
        if window is not None:
            check_positive_int("windows", window)

    def step_loss(gen: torch.Generator) -> torch.Tensor:
        batch = data[torch.randint(len(data), (batch_size,), generator=gen)]  # (B, T)
        window = windows[int(torch.randint(len(windows), (), generator=gen))]
        logits = model(batch[:, :-1], window=window)  # (B, T - 1, V): predicts tokens 1..T-1
        return F.cross_entropy(logits[:, skip:].flatten(0, 1), batch[:, 1 + skip:].flatten())

    return adam_loop(model, step_loss, steps=steps, lr=lr, seed=seed, progress=progress, desc=desc,
                     postfix_every=10)


def continuation_accuracy(generated: torch.Tensor, expected: torch.Tensor, prompt_len: int) -> float:
    """The fraction of generated tokens (after the first ``prompt_len``) that equal ``expected``'s.

    >>> continuation_accuracy(torch.tensor([[1, 2, 1, 2]]), torch.tensor([[1, 2, 1, 1]]), 2)
    0.5
    """
    if generated.shape != expected.shape:
        raise ValueError(f"generated, expected: expected the same shape (N, T), got {fmt_shape(generated.shape)} "
                         f"and {fmt_shape(expected.shape)}")
    return float((generated[:, prompt_len:] == expected[:, prompt_len:]).float().mean())


@dataclass(frozen=True)
class DecodeStep:
    """One step of :func:`decode_trace`: what the model computed and what its first layer's cache holds."""

    position: int  # of the token whose logits this step computed (the last one it ran)
    token: int  # the token predicted for position + 1
    cache_positions: list[int]  # held by layer 0's cache after the step, in slot order (-1: empty slot)
    cache_bytes: int  # keys and values of every layer
    positions_run_cached: int  # positions pushed through the model so far, with the cache
    positions_run_uncached: int  # what recomputing the whole prefix at every step would have run


def decode_trace(model: TinyDecoder, prompt: torch.Tensor, new_tokens: int, *,
                 window: int | None = None) -> list[DecodeStep]:
    """Decode greedily with a cache, one step at a time, recording what each step computes and holds.

    Step 0 is the prefill (the whole prompt); each later step runs one token. The tokens are those of
    ``model.generate(prompt, new_tokens, window=window)``.

    Args:
        model: a :class:`TinyDecoder`.
        prompt: ``(1, P)`` integer ids.
        new_tokens: the number of tokens to generate, a positive int.
        window: the ring buffer's slots W. Default: ``None`` (a full cache).

    Returns:
        ``new_tokens`` :class:`DecodeStep` records.

    >>> model = TinyDecoder(vocab_size=10, d_model=8, num_heads=2, num_layers=1, max_len=8).eval()
    >>> steps = decode_trace(model, torch.tensor([[1, 2, 3]]), 4, window=2)
    >>> [s.cache_positions for s in steps], [s.positions_run_cached for s in steps]
    ([[2, 1], [2, 3], [4, 3], [4, 5]], [3, 4, 5, 6])
    """
    check_tensor("prompt", prompt, ndim=2, expected="(1, P)")
    if prompt.shape[0] != 1:
        raise ValueError(f"prompt: expected one sequence (1, P), got {fmt_shape(prompt.shape)}")
    check_positive_int("new_tokens", new_tokens)
    P = prompt.shape[1]
    caches = model.new_caches(window)
    steps, tokens, run = [], prompt, 0
    with torch.no_grad():
        for step in range(new_tokens):
            fed = tokens if step == 0 else tokens[:, -1:]  # (1, P) prefill, then (1, 1)
            next_token = model(fed, caches)[:, -1:].argmax(-1)  # (1, 1)
            tokens = torch.cat([tokens, next_token], dim=1)  # (1, T + 1)
            run += fed.shape[1]
            steps.append(DecodeStep(position=P + step - 1, token=int(next_token),
                                    cache_positions=caches[0].positions.tolist(),
                                    cache_bytes=sum(c.nbytes for c in caches), positions_run_cached=run,
                                    positions_run_uncached=sum(P + t for t in range(step + 1))))
    return steps
