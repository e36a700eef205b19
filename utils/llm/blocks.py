"""The four parts a 2024 decoder adds to chapter 5's layer: RMSNorm, rotate-half RoPE, grouped-query
attention (a ``repeat_kv`` in front of plain attention) and the SwiGLU feed-forward block.

Shape letters: N batch, L sequence length (queries), S keys, E model dimension, H query heads,
H_kv key/value heads, G = H / H_kv query heads per key/value head, D head dimension.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from utils._checks import check_positive_int, check_sequence, check_tensor, fmt_shape
from utils.attention import scaled_dot_product_attention
from utils.positional import rotary_angles

__all__ = [
    "rms_norm",
    "RMSNorm",
    "rotate_half",
    "rotate_half_rope",
    "rope_permutation",
    "repeat_kv",
    "grouped_query_attention",
    "SwiGLU",
]


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None = None, *, eps: float = 1e-6) -> torch.Tensor:
    r"""Root-mean-square normalisation over the last dimension: ``x / sqrt(mean(x²) + eps) * weight``.

    Unlike LayerNorm it does not subtract the mean and has no bias: it only rescales each vector to unit
    root mean square, then multiplies by a learned gain per feature.

    Args:
        x: ``(..., E)``.
        weight: the gain ``(E,)``. Default: ``None`` (all ones).
        eps: added to the mean square. Default: ``1e-6``.

    Returns:
        ``(..., E)``, like ``torch.nn.functional.rms_norm(x, (E,), weight, eps)``.

    >>> rms_norm(torch.tensor([3.0, 4.0]), eps=0.0)  # RMS of (3, 4) is sqrt(12.5)
    tensor([0.8485, 1.1314])
    """
    check_tensor("x", x, min_ndim=1, expected="(..., E)")
    mean_square = x.pow(2).mean(dim=-1, keepdim=True)  # (..., 1)
    normed = x * torch.rsqrt(mean_square + eps)  # (..., E)
    return normed if weight is None else normed * weight


class RMSNorm(nn.Module):
    """:func:`rms_norm` with a learned gain ``weight`` ``(E,)``, initialised to ones.

    Args:
        d_model: the model dimension E.
        eps: added to the mean square. Default: ``1e-6``.

    >>> RMSNorm(4)(torch.randn(2, 3, 4)).shape
    torch.Size([2, 3, 4])
    """

    def __init__(self, d_model: int, *, eps: float = 1e-6) -> None:
        super().__init__()
        self.d_model = check_positive_int("d_model", d_model)
        self.eps = float(eps)
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x (N, L, E)`` -> ``(N, L, E)``."""
        check_sequence("x", x, self.d_model)
        return rms_norm(x, self.weight, eps=self.eps)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, eps={self.eps:g}"


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """``[x1, x2] -> [-x2, x1]`` on the two halves of the last dimension.

    >>> rotate_half(torch.tensor([1.0, 2.0, 3.0, 4.0]))
    tensor([-3., -4.,  1.,  2.])
    """
    first, second = x.chunk(2, dim=-1)  # two of (..., D/2)
    return torch.cat((-second, first), dim=-1)  # (..., D)


def _check_rope_input(x: torch.Tensor, positions: torch.Tensor | None) -> torch.Tensor:
    check_tensor("x", x, min_ndim=2, expected="(..., L, D)")
    L, D = x.shape[-2:]
    if D % 2:
        raise ValueError(f"x: rotary encoding needs an even last dimension D, got shape {fmt_shape(x.shape)}")
    if positions is None:
        return torch.arange(L, device=x.device)
    check_tensor("positions", positions, min_ndim=1, expected="(..., L)")
    if positions.shape[-1] != L:
        raise ValueError(f"positions: expected (..., L) with L = {L}, got {fmt_shape(positions.shape)} "
                         f"for x {fmt_shape(x.shape)}")
    return positions


def rotate_half_rope(x: torch.Tensor, positions: torch.Tensor | None = None, *,
                     base: float = 10000.0) -> torch.Tensor:
    r"""RoPE as Llama, Qwen and SmolLM write it: feature ``i`` is paired with feature ``i + D/2``.

    ``out = x * cos + rotate_half(x) * sin``, with the angles ``position * base^(-2i/D)`` of
    :func:`~utils.positional.rotary_angles` written twice, once per half. Pair ``(i, i + D/2)`` is rotated
    by angle ``i``, where chapter 4's :func:`~utils.positional.apply_rotary` rotates pair ``(2i, 2i + 1)``:
    the same rotations of a permuted vector (:func:`rope_permutation`).

    Args:
        x: ``(..., L, D)`` with even D, e.g. queries ``(N, H, L, D)``.
        positions: ``(L,)`` or broadcastable ``(..., L)`` positions. Default: ``None``, meaning ``0..L-1``.
        base: the wavelength base (SmolLM2: 100000). Default: ``10000.0``.

    Returns:
        ``(..., L, D)``, same dtype as ``x``.

    >>> q = torch.randn(1, 2, 5, 4)
    >>> torch.allclose(rotate_half_rope(q).norm(dim=-1), q.norm(dim=-1), atol=1e-5)
    True
    """
    positions = _check_rope_input(x, positions)
    angle = rotary_angles(positions, x.shape[-1], base=base)  # (..., L, D/2)
    angle = torch.cat((angle, angle), dim=-1)  # (..., L, D): angle i for features i and i + D/2
    return x * angle.cos().to(x.dtype) + rotate_half(x) * angle.sin().to(x.dtype)


def rope_permutation(head_dim: int) -> torch.Tensor:
    """The order of features that turns chapter 4's pairs ``(2i, 2i + 1)`` into the pairs ``(i, i + D/2)``.

    ``perm = [0, 2, 4, ..., D-2, 1, 3, ..., D-1]``: the even features, then the odd ones. For every x,
    ``rotate_half_rope(x[..., perm]) == apply_rotary(x)[..., perm]``. Reordering the rows of a head's
    query and key projections by ``perm`` converts weights written for one layout into the other (the
    scores ``q . k`` do not change when q and k are permuted alike).

    >>> rope_permutation(6).tolist()
    [0, 2, 4, 1, 3, 5]
    """
    check_positive_int("head_dim", head_dim)
    if head_dim % 2:
        raise ValueError(f"head_dim: rotary encoding rotates pairs of features, so D must be even, got {head_dim}")
    return torch.cat((torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)))


def repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    """Repeat each key/value head ``groups`` times: ``(N, H_kv, L, D) -> (N, H_kv * groups, L, D)``.

    Query head ``h`` then meets key/value head ``h // groups``: heads ``0..G-1`` share the first one.
    With ``groups == 1`` (multi-head attention) ``x`` itself is returned.

    >>> repeat_kv(torch.tensor([[[[1.0]], [[2.0]]]]), 2).flatten().tolist()
    [1.0, 1.0, 2.0, 2.0]
    """
    check_tensor("x", x, ndim=4, expected="(N, H_kv, L, D)")
    check_positive_int("groups", groups)
    if groups == 1:
        return x
    N, H_kv, L, D = x.shape
    return x[:, :, None].expand(N, H_kv, groups, L, D).reshape(N, H_kv * groups, L, D)


def grouped_query_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                            mask: torch.Tensor | None = None, *, is_causal: bool = False,
                            need_weights: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Attention where H query heads share H_kv key/value heads (GQA; MQA when H_kv = 1, MHA when H_kv = H).

    Each group of ``G = H / H_kv`` query heads reads the same keys and values: :func:`repeat_kv`, then
    ordinary scaled dot-product attention per query head. It equals
    ``F.scaled_dot_product_attention(query, key, value, mask, is_causal=..., enable_gqa=True)``.

    Args:
        query: ``(N, H, L, D)``.
        key: ``(N, H_kv, S, D)``, with H_kv dividing H.
        value: ``(N, H_kv, S, Dv)``.
        mask: bool (``True`` = may attend) or float, broadcastable to ``(N, H, L, S)``. Default: ``None``.
        is_causal: mask future keys (top-left aligned). Default: ``False``.
        need_weights: return the weights ``(N, H, L, S)`` (the explicit path of
            :func:`~utils.attention.scaled_dot_product_attention`); otherwise PyTorch's fused kernel.
            Default: ``False``.

    Returns:
        ``(output (N, H, L, Dv), weights or None)``.

    >>> out, w = grouped_query_attention(torch.randn(1, 6, 4, 8), torch.randn(1, 2, 4, 8),
    ...                                  torch.randn(1, 2, 4, 8), is_causal=True, need_weights=True)
    >>> out.shape, w.shape
    (torch.Size([1, 6, 4, 8]), torch.Size([1, 6, 4, 4]))
    """
    for name, x in (("query", query), ("key", key), ("value", value)):
        check_tensor(name, x, ndim=4, expected="(N, H, L, D)" if name == "query" else "(N, H_kv, S, D)")
    H, H_kv = query.shape[1], key.shape[1]
    if H % H_kv or query.shape[0] != key.shape[0] or query.shape[-1] != key.shape[-1]:
        raise ValueError(f"query, key: expected query (N, H, L, D) and key (N, H_kv, S, D) with H_kv dividing H, "
                         f"got {H} query heads and {H_kv} key/value heads: shapes {fmt_shape(query.shape)} and "
                         f"{fmt_shape(key.shape)}")
    if key.shape[:3] != value.shape[:3]:
        raise ValueError(f"key, value: expected the same (N, H_kv, S), got {fmt_shape(key.shape)} and "
                         f"{fmt_shape(value.shape)}")
    k, v = repeat_kv(key, H // H_kv), repeat_kv(value, H // H_kv)  # (N, H, S, D), (N, H, S, Dv)
    if need_weights:
        return scaled_dot_product_attention(query, k, v, mask, is_causal=is_causal)
    if is_causal and mask is not None:
        L, S = query.shape[-2], key.shape[-2]
        causal = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
        mask = mask & causal if mask.dtype == torch.bool else mask.masked_fill(~causal, float("-inf"))
        is_causal = False
    return F.scaled_dot_product_attention(query, k, v, attn_mask=mask, is_causal=is_causal), None


class SwiGLU(nn.Module):
    """The gated feed-forward block of Llama: ``down_proj(silu(gate_proj(x)) * up_proj(x))``, no biases.

    Where chapter 5's :class:`~utils.layers.FeedForward` applies one activation to one projection, SwiGLU
    multiplies the SiLU of a *gate* projection by a second, linear projection feature by feature.

    Args:
        d_model: the model dimension E.
        d_ff: the hidden width.

    >>> SwiGLU(8, 16)(torch.randn(2, 3, 8)).shape
    torch.Size([2, 3, 8])
    """

    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.d_model = check_positive_int("d_model", d_model)
        check_positive_int("d_ff", d_ff)
        self.gate_proj = nn.Linear(d_model, d_ff, bias=False)
        self.up_proj = nn.Linear(d_model, d_ff, bias=False)
        self.down_proj = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x (N, L, E)`` -> ``(N, L, E)``, each position independently."""
        check_sequence("x", x, self.d_model)
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))  # (N, L, d_ff) -> (N, L, E)
