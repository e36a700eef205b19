"""The blocks that tiled attention's forward (:mod:`utils.tiled_attention`) and its recomputing backward
(:mod:`utils.tiled_backward`) both cut: one place, so the two passes mask the same scores the same way.

Shape letters: L query length, S key length, Bq/Bk query/key block rows.
"""

from __future__ import annotations

import torch


def mask_block(mask: torch.Tensor | None, rows: slice, cols: slice) -> torch.Tensor | None:
    """The part of a broadcastable ``(..., L, S)`` mask that covers ``rows`` x ``cols`` (size-1 dims kept).

    The result is a view, so the same call on a gradient of the mask's shape selects where that block's
    gradient goes.

    >>> mask_block(torch.ones(1, 1, 6), slice(0, 2), slice(2, 5)).shape  # a padding mask: one row for all
    torch.Size([1, 1, 3])
    """
    if mask is None:
        return None
    if mask.dim() >= 2 and mask.shape[-2] != 1:
        mask = mask[..., rows, :]  # (..., Bq, S or 1)
    if mask.shape[-1] != 1:
        mask = mask[..., cols]  # (..., Bq or 1, Bk)
    return mask


def crosses_diagonal(rows: slice, cols: slice) -> bool:
    """Whether some key of ``cols`` lies in the future of some query of ``rows`` (causal, top-left aligned)."""
    return cols.stop > rows.start + 1


def in_future(rows: slice, cols: slice) -> bool:
    """Whether every key of ``cols`` lies in the future of every query of ``rows``: a block causal skips."""
    return cols.start >= rows.stop


def future_mask(rows: slice, cols: slice, device: torch.device) -> torch.Tensor:
    """``(Bq, Bk)`` bool, ``True`` where key ``j`` is in the future of query ``i`` (``j > i``).

    >>> future_mask(slice(0, 2), slice(0, 3), torch.device("cpu")).int()
    tensor([[0, 1, 1],
            [0, 0, 1]], dtype=torch.int32)
    """
    return (torch.arange(cols.start, cols.stop, device=device)[None, :]
            > torch.arange(rows.start, rows.stop, device=device)[:, None])  # (Bq, Bk)


def masked_scores(scores: torch.Tensor, mask: torch.Tensor | None, rows: slice, cols: slice,
                  is_causal: bool) -> torch.Tensor:
    """Apply the block's part of ``mask`` and of the causal mask to ``scores`` ``(..., Bq, Bk)``, in place.

    The score block is a fresh tensor (a matmul's backward needs its inputs, not its output), so masking
    edits it in place: fewer passes over the block, no extra temporaries. Returns ``scores``.
    """
    block_mask = mask_block(mask, rows, cols)  # (..., Bq or 1, Bk or 1) or None
    if block_mask is not None and block_mask.dtype == torch.bool:
        scores.masked_fill_(~block_mask, float("-inf"))  # (..., Bq, Bk)
    elif block_mask is not None:
        scores.add_(block_mask.to(scores.dtype))  # (..., Bq, Bk)
    if is_causal and crosses_diagonal(rows, cols):  # only key blocks that reach past the diagonal
        scores.masked_fill_(future_mask(rows, cols, scores.device), float("-inf"))  # (..., Bq, Bk)
    return scores
