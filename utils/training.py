"""A small, seeded training loop and the measurements chapter 5 makes on a trained model.

* :func:`train` — Adam, optional linear warm-up, a tqdm progress bar, deterministic on the CPU.
* :func:`accuracy` — accuracy on the labelled positions of held-out data.
* :func:`grad_norms_per_layer` — the gradient norm of each encoder layer's parameters on one batch.
* :func:`head_ablation` — accuracy with each attention head switched off in turn.

Head redundancy is measured with chapter 3's :func:`utils.heads.head_similarity`.

Shape letters: N batch, L length, C classes, H heads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from utils._checks import check_positive_int
from utils.attention import padding_mask
from utils.tasks import IGNORE, PronounData

__all__ = ["History", "train", "accuracy", "predict", "grad_norms_per_layer", "head_ablation", "batch_loss"]


@dataclass
class History:
    """What :func:`train` recorded: the loss of every step, and held-out accuracy every ``eval_every`` steps."""

    loss: list[float] = field(default_factory=list)
    eval_steps: list[int] = field(default_factory=list)
    eval_accuracy: list[float] = field(default_factory=list)


def _mask(data: PronounData) -> torch.Tensor:
    return padding_mask(data.lengths, data.tokens.shape[1])  # (N, 1, 1, L): padding is never attended to


def batch_loss(model: nn.Module, data: PronounData) -> torch.Tensor:
    """Cross-entropy over the labelled positions of ``data`` (positions labelled ``IGNORE`` do not count)."""
    logits, _ = model(data.tokens, mask=_mask(data))  # (N, L, C)
    return F.cross_entropy(logits.flatten(0, 1), data.labels.flatten(), ignore_index=IGNORE)


@torch.no_grad()
def predict(model: nn.Module, data: PronounData) -> torch.Tensor:
    """The predicted class at every position, ``(N, L)``, in eval mode."""
    was_training = model.training
    model.eval()
    try:
        return model(data.tokens, mask=_mask(data))[0].argmax(dim=-1)  # (N, L)
    finally:
        model.train(was_training)


def accuracy(model: nn.Module, data: PronounData) -> float:
    """The fraction of labelled positions where the model predicts the label.

    >>> from utils.layers import TinyEncoderClassifier
    >>> from utils.tasks import NOUNS, VOCAB, pronoun_task
    >>> model = TinyEncoderClassifier(len(VOCAB), 16, 2, 1, 32, len(NOUNS))
    >>> 0.0 <= accuracy(model, pronoun_task(8)) <= 1.0
    True
    """
    keep = data.labels != IGNORE
    return float((predict(model, data)[keep] == data.labels[keep]).float().mean())


def train(model: nn.Module, data: PronounData, *, steps: int, batch_size: int = 64, lr: float = 1e-3,
          warmup: int = 0, seed: int = 0, eval_data: PronounData | None = None, eval_every: int = 50,
          progress: bool = True, desc: str = "training") -> History:
    """Train ``model`` in place with Adam on random mini-batches of ``data``; return the :class:`History`.

    Deterministic: the batches come from a generator seeded with ``seed``, and the model's dropout (if any)
    from torch's global generator, which the caller seeds. A loss that becomes NaN or infinite is recorded
    and training stops there (that *is* the result when a learning rate is too high). The model is left in
    eval mode.

    Shape letters: N sentences, B = ``batch_size``, L the padded length, C classes.

    Args:
        model: maps ``tokens`` ``(B, L)`` (and ``mask=`` ``(B, 1, 1, L)``, True = a real token) to logits
            ``(B, L, C)`` and the attention maps, as :class:`~utils.layers.TinyEncoderClassifier` does.
        data: the N training sentences: ``tokens`` and ``labels`` ``(N, L)``, ``lengths`` ``(N,)``.
        steps: the number of optimiser steps, a positive int.
        batch_size: B, sentences drawn (with replacement) per step, a positive int. Default: ``64``.
        lr: the peak learning rate of Adam. Default: ``1e-3``.
        warmup: steps of linear warm-up from 0 to ``lr``, a non-negative int; ``0`` means none.
            Default: ``0``.
        seed: seed of the batch order, an int. Default: ``0``.
        eval_data: held-out data to measure accuracy on every ``eval_every`` steps and after the last
            step. Default: ``None`` (no evaluation).
        eval_every: see ``eval_data``, a positive int. Default: ``50``.
        progress: show a tqdm progress bar. Default: ``True``.
        desc: the progress bar's label. Default: ``"training"``.

    Returns:
        A :class:`History`: ``loss``, one float per step taken (fewer than ``steps`` when the loss became
        NaN or infinite); ``eval_steps`` and ``eval_accuracy``, one entry per evaluation.

    Raises:
        TypeError: when ``steps``, ``batch_size``, ``warmup``, ``seed`` or ``eval_every`` is not an int.
        ValueError: when ``steps``, ``batch_size`` or ``eval_every`` is not positive, or ``warmup`` is negative.

    >>> from utils.layers import TinyEncoderClassifier
    >>> from utils.tasks import NOUNS, VOCAB, pronoun_task
    >>> _ = torch.manual_seed(0)
    >>> model = TinyEncoderClassifier(len(VOCAB), 16, 2, 1, 32, len(NOUNS))
    >>> history = train(model, pronoun_task(32), steps=3, batch_size=8, progress=False)
    >>> len(history.loss), history.eval_steps
    (3, [])
    """
    check_positive_int("steps", steps)
    check_positive_int("batch_size", batch_size)
    check_positive_int("eval_every", eval_every)
    for name, value in (("warmup", warmup), ("seed", seed)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name}: expected an int, got {value!r} ({type(value).__name__})")
    if warmup < 0:
        raise ValueError(f"warmup: expected a non-negative int, got {warmup}")
    gen = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / warmup) if warmup else 1.0)
    history = History()
    bar = range(steps)
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(bar, desc=desc, leave=True)
    model.train()
    for step in bar:
        batch = data[torch.randint(len(data), (batch_size,), generator=gen)]
        loss = batch_loss(model, batch)
        history.loss.append(loss.item())
        if not math.isfinite(history.loss[-1]):
            break
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        schedule.step()
        if eval_data is not None and ((step + 1) % eval_every == 0 or step + 1 == steps):
            history.eval_steps.append(step + 1)
            history.eval_accuracy.append(accuracy(model, eval_data))
        if progress and step % 20 == 0:
            bar.set_postfix(loss=f"{history.loss[-1]:.3f}")
    model.eval()
    return history


def grad_norms_per_layer(model: nn.Module, data: PronounData) -> torch.Tensor:
    """The gradient norm of each encoder layer's parameters after one backward pass on ``data``.

    ``model`` must have a ``layers`` ``ModuleList`` (as ``utils.layers.TinyEncoderClassifier``). Dropout is
    switched off (eval mode) so that the measurement is deterministic; the gradients are cleared afterwards.

    Returns:
        ``(num_layers,)`` float tensor: ``sqrt(sum of squared gradients)`` over each layer's parameters.
    """
    was_training = model.training
    model.eval()
    model.zero_grad(set_to_none=True)
    batch_loss(model, data).backward()
    norms = torch.stack([
        torch.sqrt(sum((p.grad.detach() ** 2).sum() for p in layer.parameters() if p.grad is not None))
        for layer in model.layers])  # (num_layers,)
    model.zero_grad(set_to_none=True)
    model.train(was_training)
    return norms


@torch.no_grad()
def head_ablation(model: nn.Module, data: PronounData) -> torch.Tensor:
    """Accuracy on ``data`` with one head switched off at a time: ``(num_layers, H)``.

    A head is switched off by zeroing its D columns in the layer's output projection, so that its output
    never reaches the residual stream; the model is restored afterwards. A large drop means that the head
    does work the others do not.
    """
    rows = []
    for layer in model.layers:
        attn = layer.self_attn
        D = attn.head_dim
        row = []
        for h in range(attn.num_heads):
            saved = attn.out_proj.weight[:, h * D:(h + 1) * D].clone()
            attn.out_proj.weight[:, h * D:(h + 1) * D] = 0.0
            try:
                row.append(accuracy(model, data))
            finally:
                attn.out_proj.weight[:, h * D:(h + 1) * D] = saved
        rows.append(row)
    return torch.tensor(rows)  # (num_layers, H)

