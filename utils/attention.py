"""Scaled dot-product attention, masks and multi-head attention: the reference core of the course.

Shape letters follow PyTorch: N batch, H heads, L target (query) length, S source (key) length,
E model dimension (``d_model``), D head dimension (``head_dim = E // H``). All tensors are batch-first.

**One mask convention in the whole package.** A boolean mask with ``True`` means *may attend*; a float
mask is *added* to the scores. A mask broadcasts to the scores ``(N, H, L, S)`` (or ``(..., L, S)``).
This is the convention of ``F.scaled_dot_product_attention``. ``nn.MultiheadAttention`` uses the opposite
one for booleans (``True`` = *blocked*): convert with :func:`to_torch_mask` and :func:`from_torch_mask`.

Masked scores are set to ``-inf`` (never ``-1e9``, which overflows float16) and a *safe* softmax gives
zero weights to a row whose keys are all masked, as ``F.scaled_dot_product_attention`` does since
torch 2.5 (it gave NaN before).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from utils._checks import (
    check_mask,
    check_module_dtype,
    check_positive_int,
    check_probability,
    check_qkv,
    check_same_dtype,
    check_sequence,
    check_tensor,
    fmt_shape,
)

__all__ = [
    "scaled_dot_product_attention",
    "causal_mask",
    "padding_mask",
    "combine_masks",
    "to_torch_mask",
    "from_torch_mask",
    "split_heads",
    "merge_heads",
    "MultiHeadAttention",
]


def _safe_softmax(scores: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dim that gives all-zero weights (and zero gradients) to all ``-inf`` rows."""
    fully_masked = scores.amax(dim=-1, keepdim=True) == float("-inf")  # (..., L, 1)
    weights = torch.softmax(scores.masked_fill(fully_masked, 0.0), dim=-1)  # (..., L, S)
    return weights.masked_fill(fully_masked, 0.0)


def scaled_dot_product_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                                 mask: torch.Tensor | None = None, *, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None,
                                 training: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Attention written out: ``softmax(Q K^T * scale + mask) V``, returning the weights too.

    Mirrors ``F.scaled_dot_product_attention`` (same argument order; ``mask`` is its ``attn_mask``)::

        scores = query @ key.transpose(-2, -1) * scale        # (..., L, S)
        scores = scores.masked_fill(~mask, -inf)              # bool mask; a float mask is added
        weights = softmax(scores, dim=-1)                     # rows sum to 1 over S
        output = dropout(weights) @ value                     # (..., L, Dv)

    Args:
        query: ``(..., L, D)``.
        key: ``(..., S, D)``.
        value: ``(..., S, Dv)``.
        mask: bool (``True`` = may attend) or float (added to the scores, same dtype as ``query``),
            broadcastable to ``(..., L, S)``. Default: ``None``.
        dropout_p: dropout probability on the weights, in ``[0, 1)``. Default: ``0.0``.
        is_causal: mask out future keys with :func:`causal_mask` ``(L, S)`` (top-left aligned, like torch).
            Unlike torch, it may be combined with ``mask``: a key must be allowed by both. Default: ``False``.
        scale: the factor on the scores. Default: ``None``, meaning ``1 / sqrt(D)``.
        training: apply dropout only when ``True`` (like ``F.dropout``). Default: ``True``.

    Returns:
        ``(output, weights)``: output ``(..., L, Dv)`` in the input's dtype and device, and the softmax
        weights ``(..., L, S)`` *before* dropout, summing to 1 over S. A row whose keys are all masked
        gets zero weights and a zero output (as F.scaled_dot_product_attention does since torch 2.5),
        never NaN. This function *is* the explicit path, so it always returns the weights (the pair of
        :class:`MultiHeadAttention` with ``need_weights=True``); for the output alone, call
        ``F.scaled_dot_product_attention``.

    >>> q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 6)
    >>> out, weights = scaled_dot_product_attention(q, k, v)
    >>> out.shape, weights.shape
    (torch.Size([2, 3, 6]), torch.Size([2, 3, 5]))
    >>> torch.allclose(weights.sum(-1), torch.ones(2, 3))
    True
    """
    scores_shape = check_qkv(query, key, value)
    check_probability("dropout_p", dropout_p)
    L, S = scores_shape[-2:]
    if mask is not None:
        check_mask(mask, scores_shape, dtype=query.dtype)
    if is_causal:
        mask = combine_masks(mask, causal_mask(L, S, device=query.device))
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale

    # Scaling q (L x D numbers) rather than the scores (L x S) is the same maths and cheaper.
    scores = (query * scale) @ key.transpose(-2, -1)  # (..., L, D) @ (..., D, S) -> (..., L, S)
    if mask is None:
        weights = torch.softmax(scores, dim=-1)  # (..., L, S); no mask, so no row can be fully masked
    else:
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, float("-inf"))  # -inf is safe in float16, -1e9 is not
        else:
            scores = scores + mask
        weights = _safe_softmax(scores)  # (..., L, S); all-masked rows -> 0, not NaN
    attended = F.dropout(weights, dropout_p) if training and dropout_p > 0 else weights
    output = attended @ value  # (..., L, S) @ (..., S, Dv) -> (..., L, Dv)
    return output, weights


def causal_mask(L: int, S: int | None = None, *, device: torch.device | str | None = None) -> torch.Tensor:
    """Boolean causal mask ``(L, S)``: query ``i`` may attend to keys ``0..i`` (top-left aligned, like torch).

    Args:
        L: target length.
        S: source length. Default: ``None``, meaning ``L``.
        device: where to create the mask. Default: ``None`` (the default device).

    >>> causal_mask(3)
    tensor([[ True, False, False],
            [ True,  True, False],
            [ True,  True,  True]])
    """
    check_positive_int("L", L)
    S = L if S is None else check_positive_int("S", S)
    return torch.ones(L, S, dtype=torch.bool, device=device).tril()  # (L, S)


def padding_mask(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    """Boolean key-padding mask ``(N, 1, 1, S)``, ``True`` at the real tokens, with ``S = max_len``.

    Args:
        lengths: ``(N,)`` integer tensor (or a list) of real lengths, each in ``[0, max_len]``.
        max_len: the padded length S.

    >>> padding_mask(torch.tensor([1, 3]), 4)[:, 0, 0]
    tensor([[ True, False, False, False],
            [ True,  True,  True, False]])
    """
    check_positive_int("max_len", max_len)
    lengths = torch.as_tensor(lengths)
    check_tensor("lengths", lengths, ndim=1, expected="(N,)")
    if lengths.is_floating_point() or lengths.dtype == torch.bool:
        raise TypeError(f"lengths: expected an integer tensor, got dtype {lengths.dtype}")
    if lengths.numel() and (lengths.max() > max_len or lengths.min() < 0):
        raise ValueError(f"lengths: every length must lie in [0, max_len={max_len}], got {lengths.tolist()} "
                         f"(shape {fmt_shape(lengths.shape)})")
    keep = torch.arange(max_len, device=lengths.device) < lengths[:, None]  # (N, S)
    return keep[:, None, None, :]  # (N, 1, 1, S)


def combine_masks(*masks: torch.Tensor | None) -> torch.Tensor | None:
    """Combine masks of the package convention into one; ``None`` entries are skipped.

    Booleans combine with AND (a key must be allowed by every mask); a float mask is added. A boolean
    combined with a float becomes float, with ``-inf`` where the boolean is ``False``.

    >>> combine_masks(causal_mask(2), torch.tensor([True, False]))
    tensor([[ True, False],
            [ True, False]])
    >>> combine_masks(None, None) is None
    True
    """
    masks = [m for m in masks if m is not None]
    if not masks:
        return None
    float_dtype = next((m.dtype for m in masks if m.is_floating_point()), None)
    combined = masks[0]
    for m in masks[1:]:
        combined = combined & m if float_dtype is None else _as_float(combined, float_dtype) + _as_float(m, float_dtype)
    return combined if float_dtype is None else _as_float(combined, float_dtype)


def _as_float(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    if mask.dtype != torch.bool:
        return mask
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, float("-inf"))


def to_torch_mask(mask: torch.Tensor) -> torch.Tensor:
    """Convert our mask to ``nn.MultiheadAttention``'s convention, where a boolean ``True`` means *blocked*.

    A boolean mask is inverted; a float mask is returned as it is (both add floats). The shape is kept:
    pass an ``(L, S)`` result as ``attn_mask``; for a :func:`padding_mask` ``(N, 1, 1, S)``, pass
    ``to_torch_mask(mask)[:, 0, 0, :]`` as ``key_padding_mask``.

    >>> to_torch_mask(causal_mask(2))
    tensor([[False,  True],
            [False, False]])
    """
    return ~mask if mask.dtype == torch.bool else mask


def from_torch_mask(attn_mask: torch.Tensor | None = None, key_padding_mask: torch.Tensor | None = None,
                    ) -> torch.Tensor | None:
    """Convert ``nn.MultiheadAttention``'s ``attn_mask (L, S)`` and ``key_padding_mask (N, S)`` to one of ours.

    Booleans are inverted (torch: ``True`` = blocked; here: ``True`` = may attend). The result broadcasts
    to ``(N, H, L, S)``.

    >>> from_torch_mask(key_padding_mask=torch.tensor([[False, True]])).shape
    torch.Size([1, 1, 1, 2])
    """
    if key_padding_mask is not None:
        check_tensor("key_padding_mask", key_padding_mask, ndim=2, expected="(N, S)")
        key_padding_mask = to_torch_mask(key_padding_mask)[:, None, None, :]  # (N, 1, 1, S)
    if attn_mask is not None:
        check_tensor("attn_mask", attn_mask, ndim=2, expected="(L, S)")
        attn_mask = to_torch_mask(attn_mask)
    return combine_masks(attn_mask, key_padding_mask)


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Split the model dimension into heads: ``(N, L, E) -> (N, H, L, D)`` with ``D = E // H``.

    >>> split_heads(torch.zeros(2, 5, 8), num_heads=4).shape
    torch.Size([2, 4, 5, 2])
    """
    check_positive_int("num_heads", num_heads)
    check_tensor("x", x, ndim=3, expected="(N, L, E)")
    N, L, E = x.shape
    if E % num_heads:
        raise ValueError(f"x: the last dimension E = {E} is not divisible by num_heads = {num_heads} "
                         f"(got shape {fmt_shape(x.shape)})")
    return x.view(N, L, num_heads, E // num_heads).transpose(1, 2)  # (N, L, H, D) -> (N, H, L, D)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """Merge the heads back: ``(N, H, L, D) -> (N, L, H * D)``; the inverse of :func:`split_heads`.

    >>> x = torch.randn(2, 5, 8)
    >>> torch.equal(merge_heads(split_heads(x, 4)), x)
    True
    """
    check_tensor("x", x, ndim=4, expected="(N, H, L, D)")
    N, H, L, D = x.shape
    return x.transpose(1, 2).reshape(N, L, H * D)  # (N, L, H, D) -> (N, L, E)


class MultiHeadAttention(nn.Module):
    r"""Multi-head attention with separate query, key, value and output projections.

    ``out = out_proj(concat_h attention(q_proj(query)_h, k_proj(key)_h, v_proj(value)_h))``

    The explicit path (:func:`scaled_dot_product_attention`) returns the weights and is what the chapters
    teach. When ``need_weights=False`` a fast path calls ``F.scaled_dot_product_attention`` (FlashAttention
    and memory-efficient kernels on GPU); the flag alone chooses the path, and the tests keep the two equal,
    fully-masked rows included (zero attention output, so ``out`` is ``out_proj``'s bias there). Either way
    ``forward`` returns a pair ``(out, weights or None)``.

    Args:
        d_model: the model dimension E.
        num_heads: the number of heads H; must divide ``d_model``.
        dropout: dropout on the attention weights, active in training mode. Default: ``0.0``.
        bias: add biases to the four projections. Default: ``True``.

    >>> mha = MultiHeadAttention(d_model=16, num_heads=4)
    >>> x = torch.randn(2, 5, 16)
    >>> out, weights = mha(x, mask=causal_mask(5))
    >>> out.shape, weights.shape
    (torch.Size([2, 5, 16]), torch.Size([2, 4, 5, 5]))
    """

    def __init__(self, d_model: int, num_heads: int, *, dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__()
        check_positive_int("d_model", d_model)
        check_positive_int("num_heads", num_heads)
        if d_model % num_heads:
            raise ValueError(f"d_model = {d_model} is not divisible by num_heads = {num_heads}; "
                             f"pick num_heads among {[h for h in range(1, d_model + 1) if d_model % h == 0]}")
        self.d_model, self.num_heads, self.head_dim = d_model, num_heads, d_model // num_heads
        self.dropout = check_probability("dropout", dropout)

        # projections: each maps E -> E, i.e. H heads of D features side by side
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query: torch.Tensor, key: torch.Tensor | None = None, value: torch.Tensor | None = None,
                *, mask: torch.Tensor | None = None, is_causal: bool = False,
                need_weights: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attend from ``query`` to ``key``/``value``.

        Args:
            query: ``(N, L, E)``.
            key: ``(N, S, E)``. Default: ``None``, meaning ``query`` (self-attention).
            value: ``(N, S, E)``. Default: ``None``, meaning ``key``.
            mask: bool (``True`` = may attend) or float, broadcastable to ``(N, H, L, S)``: e.g. ``(L, S)``,
                ``(N, 1, 1, S)`` from :func:`padding_mask`, ``(N, 1, L, S)``. A 3-D mask is refused as
                ambiguous. Default: ``None``.
            is_causal: also apply :func:`causal_mask` ``(L, S)``. Default: ``False``.
            need_weights: return the weights (explicit path); ``False`` takes the fast path. Default: ``True``,
                as in ``nn.MultiheadAttention``.

        Returns:
            Always a pair: ``(out (N, L, E), weights (N, H, L, S))``, or ``(out, None)`` when
            ``need_weights=False``.
        """
        key = query if key is None else key
        value = key if value is None else value
        N, L, E = check_sequence("query", query, self.d_model)
        check_sequence("key", key, self.d_model)
        check_sequence("value", value, self.d_model)
        check_same_dtype(query=query, key=key, value=value)
        check_module_dtype("query", query, self.q_proj.weight)
        S = key.shape[1]
        if key.shape[0] != N or value.shape[:2] != key.shape[:2]:
            raise ValueError(f"query, key and value must be (N, L, E), (N, S, E), (N, S, E): got query "
                             f"{fmt_shape(query.shape)}, key {fmt_shape(key.shape)}, value {fmt_shape(value.shape)}")
        H = self.num_heads
        if mask is not None:
            if isinstance(mask, torch.Tensor) and mask.dim() == 3:
                raise ValueError(f"mask: a 3-D mask {fmt_shape(mask.shape)} is ambiguous; use (N, 1, L, S) "
                                 f"(mask.unsqueeze(1)) or (N, H, L, S); scores are {fmt_shape((N, H, L, S))}")
            check_mask(mask, (N, H, L, S), dtype=query.dtype, letters="(N, H, L, S)")

        q = split_heads(self.q_proj(query), H)  # (N, L, E) -> (N, H, L, D)
        k = split_heads(self.k_proj(key), H)  # (N, S, E) -> (N, H, S, D)
        v = split_heads(self.v_proj(value), H)  # (N, S, E) -> (N, H, S, D)
        dropout_p = self.dropout if self.training else 0.0
        if need_weights:  # the explicit path: the weights come with the output
            heads, weights = scaled_dot_product_attention(q, k, v, mask, dropout_p=dropout_p,
                                                          is_causal=is_causal, training=self.training)
        else:
            heads, weights = self._fast_attention(q, k, v, mask, is_causal, dropout_p), None
        out = self.out_proj(merge_heads(heads))  # (N, H, L, D) -> (N, L, E)
        return out, weights

    @staticmethod
    def _fast_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                        is_causal: bool, dropout_p: float) -> torch.Tensor:
        if mask is None:
            return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=is_causal)  # (N, H, L, D)
        if is_causal:
            mask = combine_masks(mask, causal_mask(q.shape[-2], k.shape[-2], device=q.device))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)  # (N, H, L, D)
        # fully-masked rows: zero on every backend, like the explicit path
        allowed = mask if mask.dtype == torch.bool else mask != float("-inf")
        return out.masked_fill(~allowed.any(dim=-1, keepdim=True), 0.0)

    @classmethod
    def from_torch(cls, m: nn.MultiheadAttention) -> MultiHeadAttention:
        """Copy the weights of a ``batch_first=True`` ``nn.MultiheadAttention``, so that outputs match.

        Masks are *not* converted for you: torch's boolean ``attn_mask`` and ``key_padding_mask`` mean
        ``True`` = blocked. Pass ``from_torch_mask(attn_mask, key_padding_mask)`` to this module, or
        ``to_torch_mask(mask)`` to torch's.

        >>> torch_mha = nn.MultiheadAttention(8, 2, batch_first=True)
        >>> mha = MultiHeadAttention.from_torch(torch_mha)
        >>> x = torch.randn(1, 3, 8)
        >>> torch.allclose(mha(x)[0], torch_mha(x, x, x)[0], atol=1e-6)
        True
        """
        if not isinstance(m, nn.MultiheadAttention):
            raise TypeError(f"m: expected nn.MultiheadAttention, got {type(m).__name__}")
        if not m.batch_first:
            raise ValueError("m: only batch_first=True modules are supported (this package is batch-first); "
                             "build it with nn.MultiheadAttention(..., batch_first=True)")
        if m.bias_k is not None or m.add_zero_attn or not m._qkv_same_embed_dim:
            raise ValueError("m: add_bias_kv, add_zero_attn and kdim/vdim != embed_dim are not supported")
        has_bias = m.in_proj_bias is not None
        weight = m.in_proj_weight
        new = cls(m.embed_dim, m.num_heads, dropout=m.dropout, bias=has_bias).to(weight.device, weight.dtype)
        with torch.no_grad():
            for i, proj in enumerate((new.q_proj, new.k_proj, new.v_proj)):
                rows = slice(i * m.embed_dim, (i + 1) * m.embed_dim)
                proj.weight.copy_(weight[rows])
                if has_bias:
                    proj.bias.copy_(m.in_proj_bias[rows])
            new.out_proj.weight.copy_(m.out_proj.weight)
            if has_bias:
                new.out_proj.bias.copy_(m.out_proj.bias)
        return new.train(m.training)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, num_heads={self.num_heads}, head_dim={self.head_dim}, dropout={self.dropout}"

