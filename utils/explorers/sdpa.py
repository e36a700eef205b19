"""The explorers' state of chapter 2, scaled dot-product attention and masks: what each one draws,
computed by a pure function (tested by pytest); :mod:`utils.widgets.sdpa` wires them to controls and
:mod:`utils.plotting.sdpa` draws them.

* :func:`scale_explorer_state`: D, the temperature and the 1/sqrt(D) scale;
* :func:`mask_polarity_state`: the same mask handed to ``F.scaled_dot_product_attention`` (True = may
  attend) or ``nn.MultiheadAttention`` (True = blocked).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from utils.attention import scaled_dot_product_attention
from utils.i18n.messages import tr

__all__ = ["ScaleExplorerState", "scale_explorer_state", "MASK_KINDS", "MASK_APIS", "MaskPolarityState",
           "mask_polarity_state"]


@dataclass(frozen=True)
class ScaleExplorerState:
    """What the D / temperature explorer draws for one setting."""

    scores: torch.Tensor  # (L, S), as fed to the softmax
    row: torch.Tensor  # (S,) the weights of query 0
    max_weight: float
    entropy: float  # of ``row``, in nats
    max_entropy: float  # log S: a uniform row
    score_std: float
    keys: list[str]  # S labels
    dim: int  # D
    temperature: float
    scaled: bool


def scale_explorer_state(dim: int, temperature: float = 1.0, scaled: bool = True, *, length: int = 12,
                         seed: int = 0) -> ScaleExplorerState:
    """Scores and softmax weights for random unit-variance queries and keys of size ``dim``.

    Args:
        dim: D, the size of each query and key (the paper's d_k).
        temperature: the scores are divided by it before the softmax. Default: ``1.0``.
        scaled: divide the scores by ``sqrt(dim)`` too. Default: ``True``.
        length: the number of queries L and keys S. Default: ``12``.
        seed: the same seed gives the same q and k for every setting. Default: ``0``.

    Returns:
        A :class:`ScaleExplorerState`: ``scores`` (L, S), ``row`` (S,) the weights of query 0,
        ``max_weight``, ``entropy`` (nats) of that row, ``max_entropy`` (``log S``, a uniform row),
        ``score_std``, ``keys`` (labels) and the settings.

    >>> s = scale_explorer_state(512, scaled=False)
    >>> s.max_weight > 0.9, scale_explorer_state(512).max_weight < 0.9
    (True, True)
    """
    if dim < 1 or temperature <= 0:
        raise ValueError(f"dim must be >= 1 and temperature > 0, got dim={dim}, temperature={temperature}")
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(length, 1024, generator=gen)[:, :dim]  # (L, D): the same first D coords for every D
    k = torch.randn(length, 1024, generator=gen)[:, :dim]  # (S, D)
    scores = q @ k.T  # (L, S)
    if scaled:
        scores = scores / math.sqrt(dim)
    scores = scores / temperature
    row = scores[0].softmax(-1)  # (S,)
    entropy = -(row * row.clamp_min(1e-30).log()).sum().item()
    return ScaleExplorerState(
        scores=scores, row=row, max_weight=row.max().item(), entropy=entropy, max_entropy=math.log(length),
        score_std=scores.std().item(), keys=[f"k{j}" for j in range(length)], dim=dim,
        temperature=temperature, scaled=scaled,
    )


MASK_KINDS = ("padding", "causal", "both")
"""The masks the polarity explorer offers: padding, causal, or both combined with ``&``."""

MASK_APIS = {
    "sdpa": "our convention / F.scaled_dot_product_attention",
    "mha": "nn.MultiheadAttention",
}
"""The APIs the polarity explorer calls: key -> label."""

_POLARITY_WORDS = ("the", "cat", "sat", "on", "the", "mat")


@dataclass(frozen=True)
class MaskPolarityState:
    """What the mask polarity explorer draws: one real torch call, and what it did with the mask."""

    tokens: list[str]  # L labels, "<pad>" at the padding positions
    weights: torch.Tensor  # (L, S) the weights the API computed; NaN stays NaN
    expected: torch.Tensor  # (L, S) the weights our convention means (utils.attention, correct mask)
    read_as_allowed: torch.Tensor  # (L, S) bool: the keys the API let each query see
    padded_rows: torch.Tensor  # (L,) bool: the queries that are padding tokens
    fully_masked_rows: torch.Tensor  # (L,) bool: the queries the API let see no key at all
    nan_rows: torch.Tensor  # (L,) bool: rows with a NaN weight
    rows_as_meant: torch.Tensor  # (L,) bool: rows equal to ``expected`` (a NaN row never is)
    matches_intent: bool  # every row as meant
    call: str  # the call, as code
    summary: str  # one line, also shown as the explorer's caption


def _polarity_masks(kind: str, pad: int, side: str, length: int
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    real = torch.ones(length, dtype=torch.bool)  # (S,) True at a real token
    if pad:
        if side == "left":
            real[:pad] = False
        else:
            real[length - pad:] = False
    padding = real.expand(length, length)  # (L, S): the mask depends only on the key
    causal = torch.ones(length, length, dtype=torch.bool).tril()  # (L, S)
    return {"padding": padding, "causal": causal, "both": padding & causal}[kind], real, causal


def mask_polarity_state(kind: str = "both", api: str = "sdpa", inverted: bool = False, *, pad: int = 2,
                        side: str = "right", length: int = 6, d_model: int = 4, seed: int = 0
                        ) -> MaskPolarityState:
    """The weights ``F.scaled_dot_product_attention`` or ``nn.MultiheadAttention`` really compute when you
    hand them this chapter's mask (True = may attend), as it is or inverted with ``~``.

    One sentence of ``length`` tokens, the last (or first) ``pad`` of them padding, attends to itself with
    q = k = x. ``"sdpa"`` calls ``F.scaled_dot_product_attention(x, x, I, attn_mask=mask)``: with the
    identity as the values its output *is* the weights. ``"mha"`` calls a one-head
    ``nn.MultiheadAttention`` whose projections are the identity (so it scores q·k / sqrt(E) like SDPA),
    with the causal part as ``attn_mask`` and the padding part as ``key_padding_mask``; ``inverted`` inverts
    each mask passed (``~mask``), which is the conversion ``nn.MultiheadAttention`` needs. Nothing is taken
    from a table: a fully-masked row is NaN only when torch returns NaN.

    Args:
        kind: one of :data:`MASK_KINDS`. Default: ``"both"``.
        api: a key of :data:`MASK_APIS`. Default: ``"sdpa"``.
        inverted: pass ``~mask`` instead of the mask. Default: ``False``.
        pad: the number of padding tokens, ``0 <= pad < length``. Default: ``2``.
        side: ``"right"`` (padding after the words) or ``"left"``. Default: ``"right"``.
        length: L = S. Default: ``6``.
        d_model: E. Default: ``4``.
        seed: the seed of the token vectors x. Default: ``0``.

    Returns:
        A :class:`MaskPolarityState`: ``weights`` and ``expected`` (L, S), ``read_as_allowed`` (L, S),
        ``padded_rows``, ``fully_masked_rows``, ``nan_rows`` and ``rows_as_meant`` (L,), ``matches_intent``,
        ``call`` and ``summary``.

    >>> mask_polarity_state("causal", "mha").nan_rows.tolist()  # True read as blocked: the last query sees nothing
    [False, False, False, False, False, True]
    >>> mask_polarity_state("causal", "mha", inverted=True).matches_intent
    True
    """
    if kind not in MASK_KINDS:
        raise ValueError(f"kind must be one of {list(MASK_KINDS)}, got {kind!r}")
    if api not in MASK_APIS:
        raise ValueError(f"api must be one of {list(MASK_APIS)}, got {api!r}")
    if side not in ("left", "right"):
        raise ValueError(f"side must be 'left' or 'right', got {side!r}")
    if not 0 <= pad < length:
        raise ValueError(f"pad must be in 0..{length - 1} for length={length}, got {pad}")
    mask, real, causal = _polarity_masks(kind, pad, side, length)  # (L, S), (S,), (L, S); True = may attend
    x = torch.randn(1, length, d_model, generator=torch.Generator().manual_seed(seed))  # (N, L, E)
    flip = (lambda m: ~m) if inverted else (lambda m: m)
    with torch.no_grad():
        if api == "sdpa":
            passed = flip(mask)
            weights = F.scaled_dot_product_attention(x, x, torch.eye(length)[None], attn_mask=passed)[0]  # (L, S)
            allowed = passed
            code = "~mask" if inverted else "mask"
            call = f"F.scaled_dot_product_attention(q, k, v, attn_mask={code})"
        else:
            mha = nn.MultiheadAttention(d_model, 1, bias=False, batch_first=True).eval()
            mha.in_proj_weight.copy_(torch.eye(d_model).repeat(3, 1))  # W_Q = W_K = W_V = I
            mha.out_proj.weight.copy_(torch.eye(d_model))
            args, names = {}, []
            if kind in ("causal", "both"):
                args["attn_mask"] = flip(causal)  # (L, S)
                names.append(f"attn_mask={'~' if inverted else ''}causal")
            if kind in ("padding", "both"):
                args["key_padding_mask"] = flip(real)[None]  # (N, S)
                names.append(f"key_padding_mask={'~' if inverted else ''}padding")
            weights = mha(x, x, x, need_weights=True, **args)[1][0]  # (L, S)
            blocked = torch.zeros(length, length, dtype=torch.bool)
            for value in args.values():
                blocked = blocked | value  # torch: True = blocked, in either mask
            allowed = ~blocked
            call = f"nn.MultiheadAttention(...)(x, x, x, {', '.join(names)})"
        expected = scaled_dot_product_attention(x[0], x[0], torch.eye(length), mask)[1]  # (L, S)
    padded_rows = ~real
    fully_masked = ~allowed.any(-1)
    nan_rows = weights.isnan().any(-1)
    rows_as_meant = ((weights - expected).abs() <= 1e-6).all(-1)  # NaN compares False
    matches = bool(rows_as_meant.all())
    if matches:
        verdict = tr("the weights you meant")
    elif bool((rows_as_meant | nan_rows).all()):
        verdict = tr("the weights you meant, except {n} NaN rows where ours are zeros", n=int(nan_rows.sum()))
    else:
        verdict = tr("NOT the weights you meant in {n} rows", n=int((~rows_as_meant).sum()))
    summary = tr("{call}: {verdict}; queries that see no key: {blind} of {length}; NaN rows: {nan}", call=call,
                 verdict=verdict, blind=int(fully_masked.sum()), length=length, nan=int(nan_rows.sum()))
    words = iter(_POLARITY_WORDS * length)
    tokens = [next(words) if keep else "<pad>" for keep in real.tolist()]
    return MaskPolarityState(tokens, weights, expected, allowed, padded_rows, fully_masked, nan_rows,
                             rows_as_meant, matches, call, summary)
