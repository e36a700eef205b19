"""Input validation shared by ``utils.attention``, ``utils.tiled_attention``, ``utils.positional`` and
``utils.layers``.

Every check raises ``TypeError`` for a wrong type and ``ValueError`` for a wrong value, and the message
names the argument and shows the shape (or value) it got next to the one it expected. One helper per
kind of check, so that the modules never repeat a check or let a cryptic PyTorch error
("mat1 and mat2 shapes cannot be multiplied") reach a learner.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = [
    "check_tensor",
    "check_floating",
    "check_same_dtype",
    "check_module_dtype",
    "check_sequence",
    "check_positive_int",
    "check_probability",
    "check_mask",
    "check_qkv",
    "fmt_shape",
]


def fmt_shape(shape: Sequence[int] | torch.Size) -> str:
    """Format a shape as ``(2, 3, 4)``.

    >>> fmt_shape(torch.Size([2, 3]))
    '(2, 3)'
    """
    return str(tuple(int(s) for s in shape))


def check_tensor(name: str, x: object, *, ndim: int | None = None, min_ndim: int | None = None,
                 expected: str = "") -> torch.Tensor:
    """Check that ``x`` is a tensor with ``ndim`` (or at least ``min_ndim``) dimensions.

    Args:
        name: the argument's name, used in the message.
        x: the value to check.
        ndim: the exact rank wanted. Default: ``None`` (any).
        min_ndim: the least rank wanted. Default: ``None`` (any).
        expected: the expected shape in letters, e.g. ``"(N, L, E)"``, shown in the message.

    >>> check_tensor("query", torch.zeros(2, 3), ndim=3, expected="(N, L, E)")
    Traceback (most recent call last):
        ...
    ValueError: query: expected a 3-D tensor (N, L, E), got shape (2, 3)
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor {expected}, got {type(x).__name__}".replace("  ", " "))
    hint = f" {expected}" if expected else ""
    if ndim is not None and x.dim() != ndim:
        raise ValueError(f"{name}: expected a {ndim}-D tensor{hint}, got shape {fmt_shape(x.shape)}")
    if min_ndim is not None and x.dim() < min_ndim:
        raise ValueError(f"{name}: expected at least {min_ndim} dimensions{hint}, got shape {fmt_shape(x.shape)}")
    return x


def check_floating(name: str, x: torch.Tensor) -> None:
    """Check that ``x`` holds floating-point numbers (attention needs them)."""
    if not x.is_floating_point():
        raise TypeError(f"{name}: expected a floating-point tensor, got dtype {x.dtype} "
                        f"with shape {fmt_shape(x.shape)}")


def check_same_dtype(**tensors: torch.Tensor) -> None:
    """Check that all tensors share one dtype and one device, e.g. no float16 mixed with float32.

    >>> check_same_dtype(query=torch.zeros(2, dtype=torch.float16),  # doctest: +NORMALIZE_WHITESPACE
    ...                  key=torch.zeros(2))
    Traceback (most recent call last):
        ...
    ValueError: query and key must share a dtype: got query torch.float16 (shape (2,)), key torch.float32 (shape (2,));
        cast one with .to(...)
    """
    items = list(tensors.items())
    for attr in ("dtype", "device"):
        if len({getattr(t, attr) for _, t in items}) > 1:
            names = ", ".join(n for n, _ in items[:-1]) + f" and {items[-1][0]}"
            got = ", ".join(f"{n} {getattr(t, attr)} (shape {fmt_shape(t.shape)})" for n, t in items)
            raise ValueError(f"{names} must share a {attr}: got {got}; cast one with .to(...)")


def check_module_dtype(name: str, x: torch.Tensor, param: torch.Tensor) -> None:
    """Check that an input matches the dtype and device of a module's parameters."""
    if x.dtype != param.dtype or x.device != param.device:
        raise ValueError(
            f"{name}: got dtype {x.dtype} on {x.device}, but the module's parameters are {param.dtype} on "
            f"{param.device}; call module.to(...) or cast the input so that they match")


def check_sequence(name: str, x: object, d_model: int) -> tuple[int, int, int]:
    """Check a batch-first sequence ``(N, L, E)`` with ``E == d_model``; return ``(N, L, E)``.

    >>> check_sequence("x", torch.zeros(2, 5, 8), d_model=16)
    Traceback (most recent call last):
        ...
    ValueError: x: expected shape (N, L, E) with E = d_model = 16, got (2, 5, 8)
    """
    check_tensor(name, x, ndim=3, expected="(N, L, E)")
    check_floating(name, x)
    if x.shape[-1] != d_model:
        raise ValueError(f"{name}: expected shape (N, L, E) with E = d_model = {d_model}, got {fmt_shape(x.shape)}")
    return tuple(x.shape)


def check_positive_int(name: str, value: object) -> int:
    """Check that ``value`` is a positive ``int`` (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name}: expected a positive int, got {value!r} ({type(value).__name__})")
    if value <= 0:
        raise ValueError(f"{name}: expected a positive int, got {value}")
    return value


def check_probability(name: str, p: object) -> float:
    """Check that a dropout probability lies in ``[0, 1)``.

    >>> check_probability("dropout_p", 1.0)
    Traceback (most recent call last):
        ...
    ValueError: dropout_p: expected a probability in [0, 1), got 1.0
    """
    if isinstance(p, bool) or not isinstance(p, (int, float)):
        raise TypeError(f"{name}: expected a float in [0, 1), got {type(p).__name__}")
    if not 0.0 <= p < 1.0:
        raise ValueError(f"{name}: expected a probability in [0, 1), got {p}")
    return float(p)


def check_mask(mask: object, target: Sequence[int], *, dtype: torch.dtype, name: str = "mask",
               letters: str = "(..., L, S)") -> torch.Tensor:
    """Check a mask in the package convention against the attention scores it will meet.

    A boolean mask (``True`` = may attend) or a float mask (added to the scores, same dtype as the
    scores) is accepted; it must broadcast to ``target`` without enlarging it.

    Args:
        mask: the mask to check.
        target: the shape of the scores, e.g. ``(N, H, L, S)``.
        dtype: the dtype of the scores; a float mask must have it.
        name: the argument's name. Default: ``"mask"``.
        letters: ``target`` in letters, for the message. Default: ``"(..., L, S)"``.

    >>> check_mask(torch.ones(3, 4, dtype=torch.bool), (2, 3, 5), dtype=torch.float32)
    Traceback (most recent call last):
        ...
    ValueError: mask: shape (3, 4) does not broadcast to the attention scores (2, 3, 5) (..., L, S)
    """
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"{name}: expected a bool or float torch.Tensor, got {type(mask).__name__}")
    if mask.dtype != torch.bool and not mask.is_floating_point():
        raise TypeError(
            f"{name}: expected a bool mask (True = may attend) or a float mask (added to the scores), "
            f"got dtype {mask.dtype} with shape {fmt_shape(mask.shape)}; use mask.bool() if 1 means attend")
    if mask.is_floating_point() and mask.dtype != dtype:
        raise ValueError(f"{name}: a float mask must have the scores' dtype {dtype}, got {mask.dtype} "
                         f"(shape {fmt_shape(mask.shape)}); use a bool mask or mask.to({dtype})")
    target = tuple(int(s) for s in target)
    try:
        ok = tuple(torch.broadcast_shapes(mask.shape, target)) == target
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(f"{name}: shape {fmt_shape(mask.shape)} does not broadcast to the attention scores "
                         f"{fmt_shape(target)} {letters}")
    return mask


def check_qkv(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> tuple[int, ...]:
    """Validate ``(..., L, D)``, ``(..., S, D)``, ``(..., S, Dv)``; return the scores' shape ``(..., L, S)``."""
    for name, x in (("query", query), ("key", key), ("value", value)):
        check_tensor(name, x, min_ndim=2, expected="(..., L, D)" if name == "query" else "(..., S, D)")
        check_floating(name, x)
    check_same_dtype(query=query, key=key, value=value)
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(f"query and key must have the same last dimension D: got query {fmt_shape(query.shape)} "
                         f"(..., L, D) and key {fmt_shape(key.shape)} (..., S, D)")
    if key.shape[:-1] != value.shape[:-1]:
        raise ValueError(f"key and value must agree on all but the last dimension (same S): got key "
                         f"{fmt_shape(key.shape)} (..., S, D) and value {fmt_shape(value.shape)} (..., S, Dv)")
    try:
        batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2])
    except RuntimeError:
        raise ValueError(f"query and key batch dimensions do not broadcast: got query {fmt_shape(query.shape)} "
                         f"and key {fmt_shape(key.shape)}") from None
    return (*batch, query.shape[-2], key.shape[-2])
