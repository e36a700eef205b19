"""Position encodings: sinusoidal (fixed), learned, and rotary (RoPE).

Shape letters: N batch, L sequence length, E model dimension (``d_model``), D head dimension.
Every encoding is indexed by the *position* axis L, never by the batch axis N.
"""

from __future__ import annotations

import torch
from torch import nn

from utils._checks import check_positive_int, check_probability, check_sequence, check_tensor, fmt_shape

__all__ = [
    "sinusoidal_encoding",
    "PositionalEncoding",
    "LearnedPositionalEncoding",
    "rotary_angles",
    "apply_rotary",
]


def sinusoidal_encoding(length: int, d_model: int, *, base: float = 10000.0, dtype: torch.dtype | None = None,
                        device: torch.device | str | None = None) -> torch.Tensor:
    r"""The fixed sinusoidal table of "Attention Is All You Need".

    ``PE[p, 2i] = sin(p / base^(2i / d_model))`` and ``PE[p, 2i + 1] = cos(p / base^(2i / d_model))``.
    With an odd ``d_model`` the last column is a sine.

    Args:
        length: the number of positions L.
        d_model: the model dimension E (odd works).
        base: the wavelength base. Default: ``10000.0``.
        dtype: the table's dtype. Default: ``None`` (torch's default dtype).
        device: the table's device. Default: ``None`` (the default device).

    Returns:
        ``(L, E)``. It is computed in float64 on the CPU, then cast, so large positions stay accurate.

    >>> pe = sinusoidal_encoding(4, 5)
    >>> pe.shape, pe[0].tolist()
    (torch.Size([4, 5]), [0.0, 1.0, 0.0, 1.0, 0.0])
    """
    check_positive_int("length", length)
    check_positive_int("d_model", d_model)
    position = torch.arange(length, dtype=torch.float64)[:, None]  # (L, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (ceil(E / 2),)
    angle = position / base ** (two_i / d_model)  # (L, ceil(E / 2))
    pe = torch.zeros(length, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return pe.to(device=device, dtype=dtype or torch.get_default_dtype())


class PositionalEncoding(nn.Module):
    """Add the sinusoidal encoding of positions ``0..L-1`` to a batch-first ``(N, L, E)`` input, then dropout.

    The table for ``max_len`` positions is a non-persistent buffer (it is not in the ``state_dict``). A longer
    input is still encoded correctly: the table is computed on the fly for that call (and not kept).
    The encoding is cast to the input's dtype and device, so a float16 input stays float16.

    Args:
        d_model: the model dimension E.
        dropout: dropout after the addition. Default: ``0.0``.
        max_len: positions precomputed in the buffer. Default: ``5000``.

    >>> pe = PositionalEncoding(8)
    >>> x = torch.zeros(2, 3, 8)
    >>> torch.equal(pe(x)[1], sinusoidal_encoding(3, 8))
    True
    """

    pe: torch.Tensor

    def __init__(self, d_model: int, *, dropout: float = 0.0, max_len: int = 5000) -> None:
        super().__init__()
        self.d_model = check_positive_int("d_model", d_model)
        self.max_len = check_positive_int("max_len", max_len)
        self.dropout = nn.Dropout(check_probability("dropout", dropout))
        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model), persistent=False)  # (max_len, E)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Add the encoding of positions ``0..L-1`` to every sequence of the batch, then apply dropout.

        Args:
            x: ``(N, L, E)``, any length L (beyond ``max_len`` the table is computed for this call).

        Returns:
            ``(N, L, E)``, same dtype and device as ``x``.

        Shape:
            N batch, L sequence length, E ``d_model``; the table ``(L, E)`` broadcasts over N.
        """
        N, L, E = check_sequence("x", x, self.d_model)
        table = self.pe if L <= self.max_len else sinusoidal_encoding(L, E)
        pe = table[:L].to(device=x.device, dtype=x.dtype)  # (L, E): indexed by position, never by N
        return self.dropout(x + pe)  # (N, L, E) + (L, E) broadcasts over N

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, max_len={self.max_len}"


class LearnedPositionalEncoding(nn.Module):
    """Add a learned vector per position (as in BERT and GPT) to a batch-first ``(N, L, E)`` input.

    Inputs longer than ``max_len`` raise ``ValueError``: there is no learned vector for those positions.

    Args:
        max_len: the number of positions that have a vector.
        d_model: the model dimension E.

    >>> pe = LearnedPositionalEncoding(max_len=10, d_model=8)
    >>> pe(torch.zeros(2, 3, 8)).shape
    torch.Size([2, 3, 8])
    """

    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.max_len = check_positive_int("max_len", max_len)
        self.d_model = check_positive_int("d_model", d_model)
        self.weight = nn.Parameter(torch.randn(max_len, d_model) * 0.02)  # (max_len, E); small, like GPT-2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Add the learned vectors of positions ``0..L-1`` to every sequence of the batch.

        Args:
            x: ``(N, L, E)`` with ``L <= max_len``.

        Returns:
            ``(N, L, E)``.

        Shape:
            N batch, L sequence length, E ``d_model``; ``weight[:L]`` ``(L, E)`` broadcasts over N.
        """
        N, L, E = check_sequence("x", x, self.d_model)
        if L > self.max_len:
            raise ValueError(f"x: sequence length L = {L} exceeds max_len = {self.max_len} "
                             f"(got shape {fmt_shape(x.shape)}); build the module with a larger max_len")
        return x + self.weight[:L]  # (N, L, E) + (L, E)

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, d_model={self.d_model}"


def rotary_angles(positions: torch.Tensor, head_dim: int, *, base: float = 10000.0) -> torch.Tensor:
    """The rotary angles ``positions[..., p] * base^(-2i / head_dim)`` for each pair ``i`` of features.

    Args:
        positions: ``(..., L)`` integer or float positions.
        head_dim: the even feature dimension D being rotated.
        base: the wavelength base. Default: ``10000.0``.

    Returns:
        ``(..., L, D / 2)``, in float64 for float64 positions, else float32.

    >>> rotary_angles(torch.arange(3), 4).shape
    torch.Size([3, 2])
    """
    check_positive_int("head_dim", head_dim)
    if head_dim % 2:
        raise ValueError(f"head_dim: rotary encoding rotates pairs of features, so D must be even, got {head_dim}")
    dtype = torch.float64 if positions.dtype == torch.float64 else torch.float32
    inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=dtype, device=positions.device) / head_dim)  # (D/2,)
    return positions.to(dtype)[..., None] * inv_freq  # (..., L, 1) * (D/2,) -> (..., L, D/2)


def apply_rotary(x: torch.Tensor, positions: torch.Tensor | None = None, *, base: float = 10000.0) -> torch.Tensor:
    r"""Rotary position embedding (RoPE): rotate each feature pair ``(2i, 2i+1)`` by ``position * theta_i``.

    Applied to queries and keys, it makes ``q_m . k_n`` depend on the positions only through ``m - n``.

    Args:
        x: ``(..., L, D)`` with even D, e.g. queries ``(N, H, L, D)``.
        positions: ``(L,)`` or broadcastable ``(..., L)`` positions. Default: ``None``, meaning ``0..L-1``.
        base: the wavelength base. Default: ``10000.0``.

    Returns:
        ``(..., L, D)``, same dtype and device as ``x``; the norm of every pair is kept.

    >>> q = torch.randn(1, 2, 5, 4)
    >>> torch.allclose(apply_rotary(q).norm(dim=-1), q.norm(dim=-1), atol=1e-5)
    True
    """
    check_tensor("x", x, min_ndim=2, expected="(..., L, D)")
    L, D = x.shape[-2:]
    if D % 2:
        raise ValueError(f"x: rotary encoding needs an even last dimension D, got shape {fmt_shape(x.shape)}")
    if positions is None:
        positions = torch.arange(L, device=x.device)
    check_tensor("positions", positions, min_ndim=1, expected="(..., L)")
    if positions.shape[-1] != L:
        raise ValueError(f"positions: expected (..., L) with L = {L}, got {fmt_shape(positions.shape)} "
                         f"for x {fmt_shape(x.shape)}")
    angle = rotary_angles(positions, D, base=base)  # (..., L, D/2)
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    x_even, x_odd = x.unflatten(-1, (D // 2, 2)).unbind(-1)  # two of (..., L, D/2)
    rotated = torch.stack((x_even * cos - x_odd * sin, x_even * sin + x_odd * cos), dim=-1)  # (..., L, D/2, 2)
    return rotated.flatten(-2)  # (..., L, D)
