"""The explorer state of chapter 1, "Queries, keys and values": what its explorer draws, computed by
pure functions (tested by pytest); :mod:`utils.widgets.qkv` wires them to controls and
:func:`utils.plotting.qkv.query_scores_figure` draws them.

* :func:`random_projection`: a seeded random W_Q or W_K;
* :func:`qkv_explorer_scores`: the scores X Xᵀ or Q Kᵀ of a sentence, and three facts about them
  (:class:`QKVScores`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = ["QKVScores", "random_projection", "qkv_explorer_scores"]


def random_projection(d_model: int, d_k: int, *, seed: int = 0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A random (E, D_k) projection with entries N(0, 1/E), so that x @ W has entries of size about 1.

    The same (d_model, d_k, seed) always gives the same matrix.

    >>> random_projection(16, 4, seed=1).shape
    torch.Size([16, 4])
    """
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(d_model, d_k, generator=generator, dtype=torch.float64) / math.sqrt(d_model)).to(dtype)


@dataclass(frozen=True)
class QKVScores:
    """What chapter 1's explorer draws: the scores of one setting, and three facts about them."""

    scores: torch.Tensor  # (L, L)
    symmetric: bool  # scores == scores.T
    self_top: float  # fraction of queries whose top key is themselves or an identical token
    spread: float  # standard deviation of the scores


def qkv_explorer_scores(x: torch.Tensor, *, projected: bool, d_k: int = 8, seed: int = 0) -> QKVScores:
    """The scores the explorer draws for a sequence x (L, E).

    Args:
        x: (L, E) token embeddings.
        projected: ``False`` for the parameter-free scores X Xᵀ; ``True`` for Q Kᵀ with random W_Q, W_K.
        d_k: D_k, the query/key size, when ``projected``. Default: ``8``.
        seed: draws W_Q from ``seed`` and W_K from ``seed + 1``. Default: ``0``.

    Returns:
        A :class:`QKVScores`: the (L, L) ``scores``, whether they are ``symmetric``, ``self_top`` (the
        fraction of queries whose top key is themselves or an identical token) and ``spread`` (their std).

    >>> x = torch.eye(3)
    >>> out = qkv_explorer_scores(x, projected=False)
    >>> out.symmetric, out.self_top
    (True, 1.0)
    """
    if x.dim() != 2:
        raise ValueError(f"x: expected shape (L, E), got {tuple(x.shape)}")
    if projected:
        d_model = x.shape[-1]
        q = x @ random_projection(d_model, d_k, seed=seed, dtype=x.dtype)  # (L, D_k)
        k = x @ random_projection(d_model, d_k, seed=seed + 1, dtype=x.dtype)  # (L, D_k)
        scores = q @ k.T  # (L, L)
    else:
        scores = x @ x.T  # (L, L)
    # a query "finds itself" when its top key is its own position or a token with the same embedding
    same_token = (x[:, None, :] == x[None, :, :]).all(-1)  # (L, L)
    top = scores.argmax(-1)
    self_top = same_token[torch.arange(len(top)), top].double().mean().item()
    return QKVScores(
        scores=scores,
        symmetric=bool(torch.allclose(scores, scores.T, atol=1e-5, rtol=1e-5)),
        self_top=self_top,
        spread=scores.std().item(),
    )
