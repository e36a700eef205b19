"""Reading a trained model's attention: the sink, previous-token and induction heads, and StreamingLLM's
per-token loss with full attention, a sliding window, and a window with sinks.

Pure functions of attention maps ``(layers, N, H, T, T)`` (:meth:`~utils.llm.model.LlamaDecoder.attention_maps`)
and token ids, so that each is tested on maps made by hand. Shape letters: N batch, H heads, T tokens.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from utils._checks import check_positive_int, check_tensor, fmt_shape

__all__ = ["sink_share", "previous_token_score", "repeated_random_tokens", "induction_score", "streaming_loss",
           "merge_byte_tokens"]

_MAX_MERGE = 8  # tokens merged at most: a text that holds a real replacement mark still comes out in pieces


def _check_maps(maps: torch.Tensor) -> tuple[int, ...]:
    check_tensor("maps", maps, ndim=5, expected="(layers, N, H, T, T)")
    if maps.shape[-1] != maps.shape[-2] or maps.shape[-1] < 2:
        raise ValueError(f"maps: expected square (T, T) maps with T >= 2 over the last two axes, got "
                         f"{fmt_shape(maps.shape)}")
    return tuple(maps.shape)


def sink_share(maps: torch.Tensor) -> torch.Tensor:
    """The share of each head's attention that goes to the first token, averaged over queries ``1..T-1``.

    Query 0 is left out: it can see only the first token, so its share is 1 whatever the head does.

    Args:
        maps: attention weights ``(layers, N, H, T, T)``, rows summing to 1.

    Returns:
        ``(layers, H)``; ``.mean(-1)`` gives each layer's share.

    >>> uniform = torch.ones(4, 4).tril() / torch.arange(1, 5)[:, None]  # each query spreads evenly
    >>> sink_share(uniform.expand(1, 1, 1, 4, 4))  # (1/2 + 1/3 + 1/4) / 3
    tensor([[0.3611]])
    """
    _check_maps(maps)
    return maps[..., 1:, 0].mean(dim=(1, 3))  # (layers, N, H, T - 1) -> (layers, H)


def previous_token_score(maps: torch.Tensor) -> torch.Tensor:
    """Each head's mean attention from query ``i`` to key ``i - 1``, over queries ``1..T-1``: ``(layers, H)``.

    >>> previous = torch.tensor([[1.0, 0, 0], [1, 0, 0], [0, 1, 0]])  # each query on the token before it
    >>> previous_token_score(previous.expand(1, 1, 1, 3, 3)), sink_share(previous.expand(1, 1, 1, 3, 3))
    (tensor([[1.]]), tensor([[0.5000]]))
    """
    _check_maps(maps)
    return maps.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=(1, 3))  # (layers, N, H, T - 1) -> (layers, H)


def repeated_random_tokens(num_sequences: int, length: int, *, periods: tuple[int, int], low: int, high: int,
                           seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of random tokens that repeat with a period drawn at random for each row.

    Row n is a random block of ``period[n]`` ids from ``low .. high - 1`` (no id twice in a block), repeated
    until ``length``. A head that attends a fixed distance back cannot match every row's period, so only a
    head that finds the earlier occurrence of the current token by its content scores high on
    :func:`induction_score`.

    Args:
        num_sequences: N.
        length: T.
        periods: ``(shortest, longest)`` period, both included, with ``2 <= shortest`` and ``longest < T``.
        low, high: the ids to draw from (leave out special tokens), with ``high - low >= longest``.
        seed: the generator's seed. Default: ``0``.

    Returns:
        ``(tokens (N, T) long, periods (N,) long)``.

    >>> tokens, period = repeated_random_tokens(3, 9, periods=(2, 4), low=10, high=20)
    >>> tokens.shape, all(bool((row[p:] == row[:-p]).all()) for row, p in zip(tokens, period.tolist()))
    (torch.Size([3, 9]), True)
    """
    check_positive_int("num_sequences", num_sequences)
    check_positive_int("length", length)
    shortest, longest = periods
    if not 2 <= shortest <= longest < length:
        raise ValueError(f"periods: expected 2 <= shortest <= longest < length = {length}, got {periods}")
    if high - low < longest:
        raise ValueError(f"low, high: expected at least {longest} ids to draw a block from, got {low} .. {high - 1}")
    gen = torch.Generator().manual_seed(seed)
    period = torch.randint(shortest, longest + 1, (num_sequences,), generator=gen)  # (N,)
    rows = []
    for p in period.tolist():
        block = low + torch.randperm(high - low, generator=gen)[:p]  # (p,), distinct ids
        rows.append(block.repeat(length // p + 1)[:length])  # (T,)
    return torch.stack(rows), period


def induction_score(maps: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Each head's prefix-matching score: the attention from query ``i`` to the tokens that *followed*
    earlier occurrences of token ``i``.

    For query ``i`` the targets are the keys ``j <= i`` with ``tokens[j - 1] == tokens[i]`` (``j >= 1``); the
    score of a query is the total weight on its targets, averaged over the queries that have any. An
    induction head scores near 1 on :func:`repeated_random_tokens`; a previous-token or sink head near 0.

    Args:
        maps: ``(layers, N, H, T, T)``.
        tokens: ``(N, T)`` the ids the maps were computed on.

    Returns:
        ``(layers, H)``.

    >>> tokens = torch.tensor([[5, 6, 7, 5, 6, 7]])
    >>> perfect = torch.zeros(6, 6); perfect[:3, 0] = 1; perfect[torch.arange(3, 6), torch.arange(1, 4)] = 1
    >>> induction_score(perfect.expand(1, 1, 1, 6, 6), tokens)
    tensor([[1.]])
    """
    layers, N, H, T, _ = _check_maps(maps)
    check_tensor("tokens", tokens, ndim=2, expected="(N, T)")
    if tuple(tokens.shape) != (N, T):
        raise ValueError(f"tokens: expected (N, T) = ({N}, {T}) like the maps, got {fmt_shape(tokens.shape)}")
    previous = torch.cat([tokens.new_full((N, 1), -1), tokens[:, :-1]], dim=1)  # (N, T): token before key j
    target = previous[:, None, :] == tokens[:, :, None]  # (N, T, T): query i, key j
    target &= torch.ones(T, T, dtype=torch.bool).tril()  # keys j <= i only
    has_target = target.any(-1)  # (N, T)
    if not has_target.any():
        raise ValueError("tokens: no token occurs twice, so no query has a prefix-matching target")
    on_target = (maps * target[None, :, None].to(maps.dtype)).sum(-1)  # (layers, N, H, T): 0 without targets
    return on_target.sum(dim=(1, 3)) / has_target.sum()  # (layers, H): the mean over queries that have targets


@torch.no_grad()
def streaming_loss(model, tokens: torch.Tensor, *, window: int | None = None, sinks: int = 0,
                   chunk: int = 128) -> torch.Tensor:
    """The per-token loss (cross-entropy, in nats) of ``model`` on a text, read through its KV caches.

    The text is fed ``chunk`` tokens at a time into one cache per layer (``model.new_caches(window, sinks)``):
    a full cache (``window=None``), chapter 6's ring buffer of ``window`` positions (``sinks=0``), or
    StreamingLLM's ring buffer plus the first ``sinks`` positions. Memory grows with ``chunk`` times what
    the cache holds, never with the text squared.

    Args:
        model: a :class:`~utils.llm.model.LlamaDecoder`.
        tokens: ``(1, T)`` ids.
        window: the ring buffer's positions. Default: ``None`` (every position).
        sinks: the first positions kept besides the window. Default: ``0``.
        chunk: tokens per forward pass, a positive int. Default: ``128``.

    Returns:
        ``(T - 1,)`` float32: entry ``t`` is the loss of predicting token ``t + 1``.
    """
    check_tensor("tokens", tokens, ndim=2, expected="(1, T)")
    if tokens.shape[0] != 1 or tokens.shape[1] < 2:
        raise ValueError(f"tokens: expected one text of at least 2 tokens (1, T), got {fmt_shape(tokens.shape)}")
    check_positive_int("chunk", chunk)
    caches = model.new_caches(window, sinks)
    losses = []
    for start in range(0, tokens.shape[1] - 1, chunk):
        piece = tokens[:, start:start + chunk]  # (1, C)
        targets = tokens[0, start + 1:start + 1 + chunk]  # (C,) or one fewer at the end
        logits = model(piece, caches)[0, :len(targets)]  # (C, V)
        losses.append(F.cross_entropy(logits.float(), targets, reduction="none"))
    return torch.cat(losses)  # (T - 1,)


def merge_byte_tokens(tokenizer, ids: list[int]) -> list[tuple[str, list[int]]]:
    """Group token ids into pieces that decode to whole characters: ``[(text, ids), ...]`` in order.

    A byte-level tokenizer may split one character (a Chinese one takes 3 bytes in UTF-8) over several
    tokens, each of which alone decodes to ``"\\ufffd"``. Consecutive tokens are merged until their bytes
    decode cleanly, so that a view of the tokens shows characters, never replacement marks.

    Args:
        tokenizer: anything with ``decode(ids) -> str`` (a ``tokenizers.Tokenizer``).
        ids: the token ids, in order.

    Returns:
        The pieces; their ids, concatenated, are ``ids``.
    """
    pieces, pending = [], []
    for token in ids:
        pending.append(int(token))
        text = tokenizer.decode(pending)
        if "\ufffd" not in text or len(pending) >= _MAX_MERGE:
            pieces.append((text, pending))
            pending = []
    if pending:
        pieces.append((tokenizer.decode(pending), pending))
    return pieces
