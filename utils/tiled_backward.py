"""FlashAttention-2's backward pass, in readable PyTorch: the gradients of tiled attention without the
``(..., L, S)`` matrices.

With scores ``S = Q K^T * scale + mask``, weights ``P = softmax(S)`` (per row) and output ``O = P V``,
an upstream gradient ``dO`` gives

* ``dV = P^T dO`` and ``dP = dO V^T``;
* ``dS = P * (dP - Δ)``, where ``Δ = rowsum(dO * O)`` (chapter 6's Δ; D is the head dimension): the
  softmax's backward on row ``i`` is
  ``dS_ij = P_ij (dP_ij - sum_k P_ik dP_ik)``, and ``sum_k P_ik dP_ik = sum_k P_ik (dO_i . v_k) = dO_i . O_i``,
  so one number per row replaces the whole row of ``P * dP``;
* ``dQ = dS K * scale`` and ``dK = dS^T Q * scale``.

Every product is a sum over blocks, so the backward walks over blocks of keys (outer loop: their ``dK``
and ``dV`` accumulate locally, as in FlashAttention-2) and blocks of queries (inner loop: ``dQ``
accumulates in place). Each block of weights is *recomputed* from Q, K and the logsumexp saved by the
forward, ``P = exp(S - logsumexp)``: no ``(L, S)`` tensor is ever kept, and the extra memory is
``O(B * B + (L + S) * D)``.

Shape letters: N batch, H heads, L query length, S key length, D query/key dim, Dv value dim, Bq/Bk block.
"""

from __future__ import annotations

import math

import torch

from utils._tiles import in_future, mask_block, masked_scores

__all__ = ["tiled_attention_backward"]


def tiled_attention_backward(grad_out: torch.Tensor, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                             out: torch.Tensor, logsumexp: torch.Tensor, mask: torch.Tensor | None = None, *,
                             block_size: int = 256, is_causal: bool = False, scale: float | None = None,
                             mask_grad: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                                               torch.Tensor | None]:
    r"""The gradients of ``out = softmax(Q K^T * scale + mask) V`` from ``grad_out``, one block at a time.

    This is the backward of :func:`utils.tiled_attention.tiled_attention` (which calls it; the arguments
    are checked there). The scores are recomputed exactly as the forward computed them, so
    ``exp(scores - logsumexp)`` gives back the forward's weights.

    Args:
        grad_out: ``(..., L, Dv)`` the gradient of the loss with respect to ``out``.
        query: ``(..., L, D)``.
        key: ``(..., S, D)``.
        value: ``(..., S, Dv)``.
        out: ``(..., L, Dv)`` the forward's output.
        logsumexp: ``(..., L, 1)`` ``log(sum_j exp(s_ij))`` per query row, from the forward; ``+inf`` for a
            row whose keys are all masked (its weights, and so its gradients, are then 0).
        mask: the forward's mask (bool ``True`` = may attend, or float, added). Default: ``None``.
        block_size: rows per query block and per key block. Default: ``256``.
        is_causal: the forward's causal flag; key blocks wholly in the future are skipped. Default: ``False``.
        scale: factor on the scores. Default: ``None``, meaning ``1 / sqrt(D)``.
        mask_grad: also return the gradient of a float mask (``dS`` summed to the mask's shape).
            Default: ``False``.

    Returns:
        ``(grad_query, grad_key, grad_value, grad_mask)`` with the shapes and dtypes of ``query``, ``key``,
        ``value`` and ``mask``; ``grad_mask`` is ``None`` unless ``mask_grad``.

    >>> q, k, v = (torch.randn(1, 2, 10, 4, requires_grad=True) for _ in range(3))
    >>> out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    >>> lse = (q @ k.transpose(-2, -1) / 2).logsumexp(-1, keepdim=True)  # scale 1/sqrt(4)
    >>> dq, dk, dv, _ = tiled_attention_backward(torch.ones_like(out), q, k, v, out, lse, block_size=3)
    >>> out.sum().backward()
    >>> all(torch.allclose(a, b.grad, atol=1e-5) for a, b in ((dq, q), (dk, k), (dv, v)))
    True
    """
    *batch, L, S = (*torch.broadcast_shapes(query.shape[:-2], key.shape[:-2]), query.shape[-2], key.shape[-2])
    D, Dv = query.shape[-1], value.shape[-1]
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    acc_dtype = torch.float32 if query.dtype in (torch.float16, torch.bfloat16) else query.dtype
    device = query.device
    with torch.no_grad():
        logsumexp = logsumexp.to(acc_dtype)  # (..., L, 1)
        # Δ = rowsum(dO * O), one number per query row, computed a block at a time (no (L, Dv) temporary)
        delta = torch.empty(*batch, L, 1, dtype=acc_dtype, device=device)  # (..., L, 1)
        for q_start in range(0, L, block_size):
            rows = slice(q_start, min(q_start + block_size, L))
            delta[..., rows, :] = (grad_out[..., rows, :].to(acc_dtype)
                                   * out[..., rows, :].to(acc_dtype)).sum(-1, keepdim=True)  # (..., Bq, 1)

        grad_query = torch.zeros(*batch, L, D, dtype=acc_dtype, device=device)  # (..., L, D)
        grad_key = torch.empty(*batch, S, D, dtype=acc_dtype, device=device)  # (..., S, D)
        grad_value = torch.empty(*batch, S, Dv, dtype=acc_dtype, device=device)  # (..., S, Dv)
        float_mask = mask is not None and mask.is_floating_point()
        grad_mask = torch.zeros_like(mask, dtype=acc_dtype) if mask_grad and float_mask else None  # mask's shape

        for k_start in range(0, S, block_size):
            cols = slice(k_start, min(k_start + block_size, S))
            k_block = key[..., cols, :].to(acc_dtype)  # (..., Bk, D)
            v_block = value[..., cols, :].to(acc_dtype)  # (..., Bk, Dv)
            Bk = k_block.shape[-2]
            grad_k_block = torch.zeros(*batch, Bk, D, dtype=acc_dtype, device=device)  # (..., Bk, D)
            grad_v_block = torch.zeros(*batch, Bk, Dv, dtype=acc_dtype, device=device)  # (..., Bk, Dv)

            for q_start in range(0, L, block_size):
                rows = slice(q_start, min(q_start + block_size, L))
                if is_causal and in_future(rows, cols):  # the forward skipped this block: P = 0 there
                    continue
                q_block = query[..., rows, :].to(acc_dtype) * scale  # (..., Bq, D), scaled as in the forward
                grad_out_block = grad_out[..., rows, :].to(acc_dtype)  # (..., Bq, Dv)
                scores = q_block @ k_block.transpose(-2, -1)  # (..., Bq, D) @ (..., D, Bk) -> (..., Bq, Bk)
                masked_scores(scores, mask, rows, cols, is_causal)  # (..., Bq, Bk), in place
                # P rebuilt from the saved logsumexp: the forward's normalised weights, in place of the scores
                probs = scores.sub_(logsumexp[..., rows, :]).exp_()  # (..., Bq, Bk)

                # dV += P^T dO: (..., Bk, Bq) @ (..., Bq, Dv)
                grad_v_block += probs.transpose(-2, -1) @ grad_out_block  # (..., Bk, Dv)
                # dP = dO V^T: (..., Bq, Dv) @ (..., Dv, Bk)
                grad_probs = grad_out_block @ v_block.transpose(-2, -1)  # (..., Bq, Bk)
                # dS = P * (dP - Δ), in place of dP
                grad_scores = grad_probs.sub_(delta[..., rows, :]).mul_(probs)  # (..., Bq, Bk)
                if grad_mask is not None:  # the mask is added to the scores: its gradient is dS
                    target = mask_block(grad_mask, rows, cols)  # a view, (..., Bq or 1, Bk or 1)
                    target += grad_scores.sum_to_size(target.shape)  # summed over the mask's broadcast dims
                # dQ += dS K * scale: (..., Bq, Bk) @ (..., Bk, D)
                grad_query[..., rows, :] += (grad_scores @ k_block).mul_(scale)  # (..., Bq, D)
                # dK += dS^T Q * scale (q_block already carries the scale): (..., Bk, Bq) @ (..., Bq, D)
                grad_k_block += grad_scores.transpose(-2, -1) @ q_block  # (..., Bk, D)

            grad_key[..., cols, :] = grad_k_block  # (..., Bk, D)
            grad_value[..., cols, :] = grad_v_block  # (..., Bk, Dv)

    # a query or key broadcast over batch dims gets the sum of its gradients over them
    grad_query = grad_query.sum_to_size(query.shape).to(query.dtype)  # (..., L, D)
    grad_key = grad_key.sum_to_size(key.shape).to(key.dtype)  # (..., S, D)
    grad_value = grad_value.sum_to_size(value.shape).to(value.dtype)  # (..., S, Dv)
    if grad_mask is not None:
        grad_mask = grad_mask.to(mask.dtype)  # mask's shape
    return grad_query, grad_key, grad_value, grad_mask
