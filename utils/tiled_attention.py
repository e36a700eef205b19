"""Tiled attention: FlashAttention's forward algorithm written out in readable PyTorch.

Plain attention builds the scores ``(..., L, S)`` and needs memory that grows as ``L * S``. Tiled
attention walks over *blocks of queries* and, inside each, over *blocks of keys and values*. It keeps
three running quantities per query row, and never holds more than one ``(..., B, B)`` block of scores:

* ``running_max`` ``(..., B, 1)``: the largest score seen so far (for a stable softmax);
* ``running_sum`` ``(..., B, 1)``: the softmax denominator, relative to ``running_max``;
* ``acc`` ``(..., B, Dv)``: the weighted sum of values, relative to ``running_max``.

When a new block raises the maximum from ``m`` to ``m'``, everything accumulated so far is multiplied
by ``exp(m - m')``: that is the *online softmax* (Milakov & Gimelshein 2018; Dao et al. 2022). The 1-D
helpers :func:`online_softmax_update` and :func:`online_softmax` show it on a single row of numbers.

Autograd through the Python loop would store every block it computed, so the *backward* would need
``O(L * S)`` memory again. FlashAttention avoids that with a custom backward: the forward saves one
logsumexp per query row (``running_max + log(running_sum)``), and the backward recomputes each block of
scores and weights from it (:mod:`utils.tiled_backward`). :func:`tiled_attention` does the same by
default (``backward="recompute"``); ``backward="autograd"`` keeps the loop under autograd, to measure
the ``O(L * S)`` backward it avoids.

Shape letters: N batch, H heads, L query length, S key length, D query/key dim, Dv value dim, B block.
"""

from __future__ import annotations

import math

import torch

from utils._checks import check_mask, check_positive_int, check_qkv
from utils._tiles import masked_scores
from utils.tiled_backward import tiled_attention_backward

__all__ = ["online_softmax_update", "online_softmax", "BACKWARDS", "TiledAttentionFunction", "tiled_attention"]


def online_softmax_update(running_max: torch.Tensor, running_sum: torch.Tensor,
                          block: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Fold one block of scores into a running maximum and a running sum of exponentials.

    After every block, ``running_sum == sum(exp(x - running_max))`` over all the scores seen so far.

    Args:
        running_max: ``(...,)`` the maximum so far; ``-inf`` before the first block.
        running_sum: ``(...,)`` ``sum(exp(x - running_max))`` so far; ``0`` before the first block.
        block: ``(..., B)`` the new scores.

    Returns:
        ``(new_max, new_sum)``, both ``(...,)``.

    >>> m, s = online_softmax_update(torch.tensor(float("-inf")), torch.tensor(0.0), torch.tensor([1.0, 2.0]))
    >>> m, s = online_softmax_update(m, s, torch.tensor([3.0]))
    >>> torch.allclose(s, torch.tensor([1.0, 2.0, 3.0]).sub(3.0).exp().sum())
    True
    """
    new_max, new_sum, _, _ = _online_step(running_max[..., None], running_sum[..., None], block)  # (..., 1)
    return new_max[..., 0], new_sum[..., 0]  # (...,)


def _online_step(running_max: torch.Tensor, running_sum: torch.Tensor, scores: torch.Tensor, *,
                 reuse_scores: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The online-softmax update, the one place it is written: fold the block ``scores`` into the state.

    Args:
        running_max: ``(..., R, 1)`` the maximum so far per row; ``-inf`` before the first block.
        running_sum: ``(..., R, 1)`` ``sum(exp(x - running_max))`` so far; ``0`` before the first block.
        scores: ``(..., R, B)`` the new block of scores.
        reuse_scores: compute the weights in place in ``scores`` (only when no autograd graph needs it).
            Default: ``False``.

    Returns:
        ``(new_max, new_sum, rescale, weights)``: the new state ``(..., R, 1)`` each, the factor
        ``exp(running_max - new_max)`` ``(..., R, 1)`` that moves anything accumulated relative to the old
        maximum onto the new one, and the block's unnormalised weights ``exp(scores - new_max)`` ``(..., R, B)``.
    """
    new_max = torch.maximum(running_max, scores.amax(dim=-1, keepdim=True))  # (..., R, 1)
    shift = torch.where(new_max == float("-inf"), 0.0, new_max)  # (..., R, 1): avoid -inf - -inf = nan
    rescale = torch.exp(running_max - shift)  # (..., R, 1), <= 1: old terms, now relative to the new max
    weights = scores.sub_(shift).exp_() if reuse_scores else torch.exp(scores - shift)  # (..., R, B)
    new_sum = running_sum * rescale + weights.sum(dim=-1, keepdim=True)  # (..., R, 1)
    return new_max, new_sum, rescale, weights


def online_softmax(x: torch.Tensor, block_size: int) -> torch.Tensor:
    """Softmax over the last dim computed in two passes of blocks: the statistics, then the weights.

    Equal to ``torch.softmax(x, dim=-1)``; the first pass reads each block once and keeps only
    ``(...,)``-sized state.

    >>> x = torch.randn(3, 10)
    >>> torch.allclose(online_softmax(x, block_size=4), x.softmax(-1))
    True
    """
    check_positive_int("block_size", block_size)
    running_max = torch.full(x.shape[:-1], float("-inf"), dtype=x.dtype, device=x.device)  # (...,)
    running_sum = torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)  # (...,)
    for start in range(0, x.shape[-1], block_size):
        block = x[..., start:start + block_size]  # (..., B)
        running_max, running_sum = online_softmax_update(running_max, running_sum, block)
    return torch.exp(x - running_max[..., None]) / running_sum[..., None]  # (..., S)


BACKWARDS = ("recompute", "autograd")
"""How :func:`tiled_attention` gets its gradients. ``recompute``: FlashAttention-2's backward
(:func:`utils.tiled_backward.tiled_attention_backward`), which saves Q, K, V, the output and one
logsumexp per query row and recomputes every score block. ``autograd``: autograd records the Python loop,
which keeps every block of weights for the backward, ``O(L * S)`` memory."""


def _tiled_forward(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None,
                   block_size: int, is_causal: bool, scale: float, *,
                   with_logsumexp: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The forward loop of :func:`tiled_attention` (arguments checked there).

    Returns:
        ``(out, logsumexp)``: ``out`` ``(..., L, Dv)`` in the input's dtype and, if ``with_logsumexp``,
        ``log(sum_j exp(s_ij))`` ``(..., L, 1)`` in the accumulation dtype (``+inf`` for a query that sees
        no key, so that the backward's ``exp(s - logsumexp)`` is 0 there, not NaN); else ``None``.
    """
    *batch, L, S = (*torch.broadcast_shapes(query.shape[:-2], key.shape[:-2]), query.shape[-2], key.shape[-2])
    Dv = value.shape[-1]
    acc_dtype = torch.float32 if query.dtype in (torch.float16, torch.bfloat16) else query.dtype
    out = torch.empty(*batch, L, Dv, dtype=query.dtype, device=query.device)  # (..., L, Dv)
    logsumexp = torch.empty(*batch, L, 1, dtype=acc_dtype, device=query.device) if with_logsumexp else None
    # Without an autograd graph to keep, every score block is written into one reused buffer: a fresh
    # (..., B, B) tensor per block costs page faults, about a tenth of SDPA's whole time on CPU.
    recording = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (query, key, value, mask))
    scores_buffer = None if recording else torch.empty(
        math.prod(batch) * min(block_size, L) * min(block_size, S), dtype=acc_dtype, device=query.device)

    for q_start in range(0, L, block_size):
        rows = slice(q_start, min(q_start + block_size, L))
        q_block = query[..., rows, :].to(acc_dtype) * scale  # (..., Bq, D), scaled once
        Bq = q_block.shape[-2]
        running_max = torch.full((*batch, Bq, 1), float("-inf"), dtype=acc_dtype, device=query.device)  # (..., Bq, 1)
        running_sum = torch.zeros(*batch, Bq, 1, dtype=acc_dtype, device=query.device)  # (..., Bq, 1)
        acc = torch.zeros(*batch, Bq, Dv, dtype=acc_dtype, device=query.device)  # (..., Bq, Dv)

        # causal: the last query of this block is rows.stop - 1, so later key blocks are all in the future
        k_stop = min(S, rows.stop) if is_causal else S
        for k_start in range(0, k_stop, block_size):
            cols = slice(k_start, min(k_start + block_size, S))
            k_block = key[..., cols, :].to(acc_dtype)  # (..., Bk, D)
            v_block = value[..., cols, :].to(acc_dtype)  # (..., Bk, Dv)
            # (..., Bq, D) @ (..., D, Bk) -> (..., Bq, Bk)
            if recording:
                scores = q_block @ k_block.transpose(-2, -1)  # (..., Bq, Bk), kept by autograd
            else:
                scores = scores_buffer[:math.prod((*batch, Bq, cols.stop - k_start))].view(*batch, Bq, -1)
                torch.matmul(q_block, k_block.transpose(-2, -1), out=scores)  # (..., Bq, Bk), in the buffer
            masked_scores(scores, mask, rows, cols, is_causal)  # (..., Bq, Bk), in place

            # online softmax: raise the running max, rescale what was accumulated relative to the old one.
            # Without a graph to keep, the weights reuse the block's memory (amax's backward needs the scores).
            running_max, running_sum, rescale, weights = _online_step(
                running_max, running_sum, scores, reuse_scores=not recording)
            # running_max, running_sum, rescale: (..., Bq, 1); weights: (..., Bq, Bk), unnormalised
            acc = acc * rescale + weights @ v_block  # (..., Bq, Bk) @ (..., Bk, Dv) -> (..., Bq, Dv)

        # normalise once at the end; a row that saw no key at all (sum 0) gets zeros, as torch does
        seen_nothing = running_sum == 0  # (..., Bq, 1)
        denominator = torch.where(seen_nothing, 1.0, running_sum)  # (..., Bq, 1)
        out[..., rows, :] = (acc / denominator).to(query.dtype)  # (..., Bq, Dv)
        if logsumexp is not None:  # log(sum_j exp(s_ij)) = m_i + log(l_i): all the backward needs of a row
            logsumexp[..., rows, :] = torch.where(seen_nothing, float("inf"),
                                                  running_max + running_sum.log())  # (..., Bq, 1)
    return out, logsumexp


class TiledAttentionFunction(torch.autograd.Function):
    """:func:`tiled_attention` with FlashAttention-2's backward: the forward saves only Q, K, V, the output
    and the logsumexp ``(..., L, 1)`` (and the mask, the caller's own tensor, which is not copied); the
    backward recomputes each score block from them
    (:func:`utils.tiled_backward.tiled_attention_backward`). Call it through ``tiled_attention``."""

    @staticmethod
    def forward(ctx, query, key, value, mask, block_size, is_causal, scale):
        out, logsumexp = _tiled_forward(query, key, value, mask, block_size, is_causal, scale,
                                        with_logsumexp=True)  # (..., L, Dv), (..., L, 1)
        ctx.save_for_backward(query, key, value, out, logsumexp, mask)
        ctx.options = (block_size, is_causal, scale)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        if torch.is_grad_enabled():  # create_graph=True: our backward records no graph, so refuse, never be wrong
            raise RuntimeError("tiled_attention(backward='recompute') cannot be differentiated twice (create_graph="
                               "True); use backward='autograd' for higher-order gradients")
        query, key, value, out, logsumexp, mask = ctx.saved_tensors
        block_size, is_causal, scale = ctx.options
        mask_grad = ctx.needs_input_grad[3]
        grads = tiled_attention_backward(grad_out, query, key, value, out, logsumexp, mask, block_size=block_size,
                                         is_causal=is_causal, scale=scale, mask_grad=mask_grad)
        return (*grads, None, None, None)


def tiled_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                    mask: torch.Tensor | None = None, *, block_size: int = 256, is_causal: bool = False,
                    scale: float | None = None, backward: str = "recompute") -> torch.Tensor:
    r"""``softmax(Q K^T * scale + mask) V`` without ever building the ``(..., L, S)`` scores.

    Queries are cut into blocks of ``block_size`` rows and keys/values into blocks of ``block_size``
    rows; each query block keeps a running max, a running sum and an output accumulator (online softmax),
    so the extra memory is ``O(B * B + L * Dv)``, not ``O(L * S)``. Scores and accumulators are float32
    even for float16/bfloat16 inputs, as in FlashAttention. The result equals
    ``F.scaled_dot_product_attention(query, key, value, attn_mask=mask, is_causal=is_causal, scale=scale)``,
    and so do the gradients.

    Args:
        query: ``(..., L, D)``.
        key: ``(..., S, D)``.
        value: ``(..., S, Dv)``.
        mask: bool (``True`` = may attend) or float (added), broadcastable to ``(..., L, S)``; fourth, as in
            ``F.scaled_dot_product_attention`` and :func:`utils.attention.scaled_dot_product_attention`.
            A float mask that requires grad gets its gradient (``dS``, summed over its broadcast dims), as
            in SDPA. Default: ``None``.
        block_size: rows per query block and per key block; need not divide L or S. Default: ``256``.
        is_causal: query ``i`` sees keys ``0..i`` (top-left aligned, like torch); key blocks wholly in the
            future are skipped. May be combined with ``mask``. Default: ``False``.
        scale: factor on the scores. Default: ``None``, meaning ``1 / sqrt(D)``.
        backward: ``"recompute"``: FlashAttention-2's backward, which saves Q, K, V, the output and one
            logsumexp per query row, ``O(L)`` extra memory, and recomputes the score blocks;
            ``"autograd"``: autograd through the loop, which stores every block, ``O(L * S)``, kept to show
            what the custom backward avoids. The forward's values are the same; only ``"autograd"`` can be
            differentiated twice. Default: ``"recompute"``.

    Returns:
        ``(..., L, Dv)`` in the input's dtype. A query whose keys are all masked gets zeros, and zero
        gradients.

    >>> q, k, v = torch.randn(2, 4, 100, 8), torch.randn(2, 4, 70, 8), torch.randn(2, 4, 70, 8)
    >>> out = tiled_attention(q, k, v, block_size=32)
    >>> torch.allclose(out, torch.nn.functional.scaled_dot_product_attention(q, k, v), atol=1e-5)
    True
    """
    scores_shape = check_qkv(query, key, value)
    check_positive_int("block_size", block_size)
    if mask is not None:
        check_mask(mask, scores_shape, dtype=query.dtype)
    if backward not in BACKWARDS:
        raise ValueError(f"backward: expected one of {BACKWARDS}, got {backward!r}")
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    needs_grad = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (query, key, value, mask))
    if backward == "autograd" or not needs_grad:
        return _tiled_forward(query, key, value, mask, block_size, is_causal, scale)[0]
    return TiledAttentionFunction.apply(query, key, value, mask, block_size, is_causal, scale)
