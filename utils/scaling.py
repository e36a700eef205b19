"""Chapter 2's scale experiment: why attention divides the scores by ``sqrt(D)`` (the paper's ``d_k``).

Each measurement returns plain numbers that :mod:`utils.plotting.sdpa` draws.

* :func:`dot_product_variance`: ``var(q . k)`` grows like D; scaled it stays at 1.
* :func:`softmax_saturation`: unscaled, the softmax becomes one-hot and its gradient vanishes.
* :func:`train_with_and_without_scale`: one attention head trained with and without the scale, over seeds.

Shape letters: N batch, L queries, S keys, E input features, D the size of each query and key (the paper's
``d_k``), C classes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["dot_product_variance", "softmax_saturation", "train_with_and_without_scale", "mean_loss"]


def dot_product_variance(dims: Sequence[int], *, num_samples: int = 4000, seed: int = 0) -> dict[str, list[float]]:
    """Measure the variance of ``q . k`` for unit-variance ``q, k`` of each dimension D in ``dims``.

    Args:
        dims: the dimensions D to try, e.g. ``[4, 16, 64, 256, 1024]``.
        num_samples: pairs (q, k) drawn per dimension. Default: ``4000``.
        seed: seed of the generator. Default: ``0``.

    Returns:
        ``{"dims": D values, "raw": var(q . k), "scaled": var(q . k / sqrt(D))}``.

    >>> out = dot_product_variance([4, 64], num_samples=2000)
    >>> [round(v / d) for v, d in zip(out["raw"], out["dims"])]
    [1, 1]
    """
    gen = torch.Generator().manual_seed(seed)
    raw, scaled = [], []
    for dim in dims:
        q = torch.randn(num_samples, dim, generator=gen)  # (samples, D)
        k = torch.randn(num_samples, dim, generator=gen)  # (samples, D)
        dots = (q * k).sum(-1)  # (samples,)
        raw.append(dots.var().item())
        scaled.append((dots / math.sqrt(dim)).var().item())
    return {"dims": list(dims), "raw": raw, "scaled": scaled}


def softmax_saturation(dims: Sequence[int], *, length: int = 16, num_rows: int = 512,
                       seed: int = 0) -> dict[str, list[float]]:
    """Measure how saturated the softmax of one attention row is, with and without the ``1/sqrt(D)``.

    For each D, draws ``num_rows`` rows of scores ``q . k_j`` over ``length`` keys (unit-variance q, k),
    applies the softmax to the scores as they are and divided by ``sqrt(D)``, and records the mean
    largest weight and the mean norm of the gradient of ``sum(weights * g)`` with respect to the softmax
    input, for a random upstream gradient ``g``. A saturated softmax has a largest weight near 1 and a
    gradient near 0.

    Returns:
        ``{"dims", "max_weight_scaled", "max_weight_raw", "grad_norm_scaled", "grad_norm_raw"}``.

    >>> out = softmax_saturation([4, 1024], num_rows=64)
    >>> out["max_weight_raw"][1] > 0.9 > out["max_weight_scaled"][1]
    True
    """
    gen = torch.Generator().manual_seed(seed)
    out: dict[str, list[float]] = {"dims": list(dims), "max_weight_scaled": [], "max_weight_raw": [],
                                   "grad_norm_scaled": [], "grad_norm_raw": []}
    for dim in dims:
        q = torch.randn(num_rows, 1, dim, generator=gen)  # (rows, 1, D)
        k = torch.randn(num_rows, length, dim, generator=gen)  # (rows, S, D)
        upstream = torch.randn(num_rows, 1, length, generator=gen)  # (rows, 1, S)
        raw = q @ k.transpose(-2, -1)  # (rows, 1, S)
        for name, logits in (("scaled", raw / math.sqrt(dim)), ("raw", raw)):
            logits = logits.clone().requires_grad_(True)
            weights = logits.softmax(-1)  # (rows, 1, S)
            (grad,) = torch.autograd.grad((weights * upstream).sum(), logits)
            out[f"max_weight_{name}"].append(weights.amax(-1).mean().item())
            out[f"grad_norm_{name}"].append(grad.norm(dim=-1).mean().item())
    return out


class _Lookup(nn.Module):
    """One attention head that must learn to look up the label of the key nearest to its query."""

    def __init__(self, d_in: int, dim: int, num_classes: int, scaled: bool) -> None:
        super().__init__()
        self.to_query = nn.Linear(d_in, dim)
        self.to_key = nn.Linear(d_in, dim)
        self.value = nn.Embedding(num_classes, num_classes)
        for layer in (self.to_query, self.to_key):  # unit-variance q and k, as in the analysis
            nn.init.normal_(layer.weight, std=1 / math.sqrt(d_in))
            nn.init.zeros_(layer.bias)
        self.scale = 1 / math.sqrt(dim) if scaled else 1.0

    def forward(self, query: torch.Tensor, items: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        scores = self.to_query(query) @ self.to_key(items).transpose(-2, -1) * self.scale  # (N, 1, S)
        return (scores.softmax(-1) @ self.value(labels))[:, 0]  # (N, 1, S) @ (N, S, C) -> (N, C)


def _lookup_batch(gen: torch.Generator, batch: int, length: int, d_in: int, num_classes: int):
    items = torch.randn(batch, length, d_in, generator=gen)  # (N, S, E)
    labels = torch.randint(0, num_classes, (batch, length), generator=gen)  # (N, S)
    target = torch.randint(0, length, (batch,), generator=gen)  # (N,)
    rows = torch.arange(batch)
    query = items[rows, target] + 0.5 * torch.randn(batch, d_in, generator=gen)  # (N, E): a noisy copy
    return query[:, None, :], items, labels, labels[rows, target]


def train_with_and_without_scale(*, dim: int = 256, steps: int = 200, seeds: Sequence[int] = (0, 1, 2),
                                 lr: float = 1e-2, d_in: int = 16, length: int = 8, num_classes: int = 8,
                                 batch: int = 64) -> dict[str, list[list[float]]]:
    """Train the same one-head lookup model with and without ``1/sqrt(dim)``, once per seed; return the losses.

    The task: ``length`` random items (E = ``d_in``), each with a label; the query is a noisy copy of one
    item; the model must output that item's label. For each seed both runs start from the same weights
    and see the same batches (Adam, learning rate ``lr``). The caller's global RNG is left as it was. One run
    takes about a second on one CPU core.

    The unscaled run is chaotic: its softmax is saturated, so rounding differences between CPU kernels
    (MKL, AVX2 or AVX-512 code paths) grow into visibly different losses after some tens of steps. The
    scaled run, and the start of the unscaled one, agree across machines.

    Args:
        dim: D, the size of each query and key. Default: ``256``.
        steps: Adam steps per run. Default: ``200``.
        seeds: one pair of runs per seed. Default: ``(0, 1, 2)``.

    Returns:
        ``{"scaled": curves, "unscaled": curves}``: one list of per-step cross-entropy losses per seed.
    """
    curves: dict[str, list[list[float]]] = {"scaled": [], "unscaled": []}
    threads = torch.get_num_threads()
    # tiny matrices: one thread is fastest, never fights a busy machine, and is the same everywhere
    torch.set_num_threads(1)
    try:
        for seed in seeds:
            for name, scaled in (("scaled", True), ("unscaled", False)):
                curves[name].append(_train_lookup(scaled, dim=dim, steps=steps, lr=lr, seed=seed, d_in=d_in,
                                                  length=length, num_classes=num_classes, batch=batch))
    finally:
        torch.set_num_threads(threads)
    return curves


def mean_loss(losses: Sequence[float], start: int, stop: int) -> float:
    """The mean of ``losses[start:stop]``: a training loss smoothed over a window of steps.

    >>> mean_loss([3.0, 2.0, 1.0, 0.0], 1, 3)
    1.5
    """
    window = losses[start:stop]
    if not window:
        raise ValueError(f"empty window [{start}:{stop}] of {len(losses)} losses")
    return sum(window) / len(window)


def _train_lookup(scaled: bool, *, dim: int, steps: int, lr: float, seed: int, d_in: int, length: int,
                  num_classes: int, batch: int) -> list[float]:
    with torch.random.fork_rng(devices=[]):  # seed the weights without moving the caller's global RNG
        torch.manual_seed(seed)
        model = _Lookup(d_in, dim, num_classes, scaled)
    gen = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        query, items, labels, target = _lookup_batch(gen, batch, length, d_in, num_classes)
        loss = F.cross_entropy(model(query, items, labels), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses
