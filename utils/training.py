"""A small, seeded training loop and the measurements chapter 5 makes on a trained model.

* :func:`train` — Adam, optional linear warm-up, a tqdm progress bar, deterministic on the CPU; its loop,
  :func:`adam_loop`, also trains chapter 6's decoder.
* :func:`accuracy` — accuracy on the labelled positions of held-out data.
* :func:`grad_norms_per_layer` — the gradient norm of each encoder layer's parameters on one batch.
* :func:`largest_rise` — how far a loss curve climbs back above its best value (a spike).
* :func:`heads_switched_off` — a context manager that silences chosen attention heads;
  :func:`head_ablation` switches off one head at a time, :func:`ablation_study` the groups of
  :func:`ablation_configurations` (overall and per pronoun); :func:`accuracy_by_pronoun` splits accuracy by
  pronoun; :func:`referent_attention` measures how much the pronoun attends to its referent in each head.

Head redundancy is measured with chapter 3's :func:`utils.heads.head_similarity`.

Shape letters: N batch, L length, C classes, H heads.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from utils._checks import check_positive_int
from utils.attention import padding_mask
from utils.tasks import IGNORE, VOCAB, PronounData

__all__ = ["History", "train", "adam_loop", "accuracy", "predict", "grad_norms_per_layer", "head_ablation",
           "batch_loss", "heads_switched_off", "all_heads", "largest_rise", "head_name",
           "ablation_configurations", "ablation_study", "accuracy_by_pronoun", "referent_attention"]


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

    def step_loss(gen: torch.Generator) -> torch.Tensor:
        return batch_loss(model, data[torch.randint(len(data), (batch_size,), generator=gen)])

    def evaluate(step: int, history: History) -> None:
        if eval_data is not None and ((step + 1) % eval_every == 0 or step + 1 == steps):
            history.eval_steps.append(step + 1)
            history.eval_accuracy.append(accuracy(model, eval_data))

    return adam_loop(model, step_loss, steps=steps, lr=lr, warmup=warmup, seed=seed, after_step=evaluate,
                     progress=progress, desc=desc, postfix_every=20)


def adam_loop(model: nn.Module, step_loss: Callable[[torch.Generator], torch.Tensor], *, steps: int, lr: float,
              warmup: int = 0, seed: int = 0, after_step: Callable[[int, History], None] | None = None,
              progress: bool = True, desc: str = "training", postfix_every: int = 20) -> History:
    """The seeded Adam loop that :func:`train` and :func:`utils.decoder.train_decoder` share.

    Each step calls ``step_loss(gen)``, which draws its batch from ``gen`` (a generator seeded with
    ``seed``) and returns the scalar loss, then takes one Adam step (after a linear warm-up of ``warmup``
    steps, if any) and calls ``after_step(step, history)``. A loss that is NaN or infinite is recorded and
    stops training. The model is put in train mode for the loop and left in eval mode.

    Args:
        model: the module whose parameters Adam updates.
        step_loss: maps the batch generator to this step's loss, a scalar tensor.
        steps: the number of optimiser steps, a positive int.
        lr: the peak learning rate.
        warmup: steps of linear warm-up from 0 to ``lr``; ``0`` means none. Default: ``0``.
        seed: seed of ``gen``. Default: ``0``.
        after_step: called after each optimiser step, e.g. to evaluate. Default: ``None``.
        progress: show a tqdm progress bar. Default: ``True``.
        desc: the progress bar's label. Default: ``"training"``.
        postfix_every: show the loss on the bar every this many steps. Default: ``20``.

    Returns:
        A :class:`History` with one loss per step taken.

    >>> model = nn.Linear(2, 1)
    >>> history = adam_loop(model, lambda gen: model(torch.randn(4, 2, generator=gen)).pow(2).mean(), steps=3,
    ...                     lr=1e-2, progress=False)
    >>> len(history.loss), model.training
    (3, False)
    """
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
        loss = step_loss(gen)
        history.loss.append(loss.item())
        if not math.isfinite(history.loss[-1]):
            break
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        schedule.step()
        if after_step is not None:
            after_step(step, history)
        if progress and step % postfix_every == 0:
            bar.set_postfix(loss=f"{history.loss[-1]:.3f}")
    model.eval()
    return history


def largest_rise(losses: Sequence[float], *, after: int = 0) -> float:
    """How far the loss climbs back above its best value so far, at most, from step ``after`` on (a spike).

    Args:
        losses: one loss per step, as in :attr:`History.loss`.
        after: the first step (0-based) to look at. Default: ``0``.

    Returns:
        ``max over t > after of losses[t] - min(losses[after:t])``, or ``0.0`` for a loss that never rises.

    >>> largest_rise([3.0, 1.0, 2.5, 0.5, 0.7])
    1.5
    """
    rise, best = 0.0, math.inf
    for value in losses[after:]:
        rise, best = max(rise, value - best), min(best, value)
    return rise


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


@contextmanager
def heads_switched_off(model: nn.Module, heads: Iterable[tuple[int, int]]) -> Iterator[nn.Module]:
    """Switch off attention heads while the ``with`` block runs; the model is restored afterwards.

    A head is switched off by zeroing its D columns of the layer's output projection ``out_proj``, so
    that its output never reaches the residual stream (the other heads are untouched).

    Args:
        model: a model with a ``layers`` ``ModuleList`` of encoder layers (``self_attn`` in each).
        heads: ``(layer, head)`` pairs, both 0-based.

    >>> from utils.layers import TinyEncoderClassifier
    >>> model = TinyEncoderClassifier(10, 8, 2, 1, 16, 3)
    >>> with heads_switched_off(model, [(0, 1)]):
    ...     bool(model.layers[0].self_attn.out_proj.weight[:, 4:].eq(0).all())
    True
    >>> bool(model.layers[0].self_attn.out_proj.weight[:, 4:].eq(0).all())
    False
    """
    saved = []
    try:
        with torch.no_grad():
            for layer, head in heads:
                attn = model.layers[layer].self_attn
                D = attn.head_dim
                columns = attn.out_proj.weight[:, head * D:(head + 1) * D]  # (E, D): a view
                saved.append((columns, columns.clone()))
                columns.zero_()
        yield model
    finally:
        with torch.no_grad():
            for columns, values in reversed(saved):
                columns.copy_(values)


def all_heads(model: nn.Module) -> list[tuple[int, int]]:
    """Every ``(layer, head)`` pair of ``model``, 0-based, layer by layer."""
    return [(i, h) for i, layer in enumerate(model.layers) for h in range(layer.self_attn.num_heads)]


def accuracy_by_pronoun(model: nn.Module, data: PronounData) -> dict[str, float]:
    """:func:`accuracy` on the sentences of each pronoun of ``data`` (``"he"``, ``"she"``, ...)."""
    rows = torch.arange(len(data))
    pronouns = data.tokens[rows, data.pronoun_pos]  # (N,) token ids
    result = {}
    for token in sorted(set(pronouns.tolist())):
        result[VOCAB[token]] = accuracy(model, data[torch.nonzero(pronouns == token).flatten()])
    return result


@torch.no_grad()
def head_ablation(model: nn.Module, data: PronounData) -> torch.Tensor:
    """Accuracy on ``data`` with one head switched off at a time: ``(num_layers, H)``.

    See :func:`heads_switched_off`. A large drop means that the head does work the others do not; a
    small one means that it does not, *or* that the other heads can do its work.
    """
    H = model.layers[0].self_attn.num_heads
    rows = []
    for i in range(len(model.layers)):
        row = []
        for h in range(H):
            with heads_switched_off(model, [(i, h)]):
                row.append(accuracy(model, data))
        rows.append(row)
    return torch.tensor(rows)  # (num_layers, H)


def head_name(layer: int, head: int) -> str:
    """``"L1H2"`` for ``layer=0, head=1`` (0-based in, 1-based out, as in the figures' titles)."""
    return f"L{layer + 1}H{head + 1}"


def ablation_configurations(model: nn.Module) -> dict[str, list[tuple[int, int]]]:
    """The head ablations chapter 5 measures: label -> the ``(layer, head)`` pairs to switch off.

    In order: all heads on; each head off alone; each layer's heads off together; every head but one
    off ("only L2H1 on"); all heads off.

    >>> from utils.layers import TinyEncoderClassifier
    >>> list(ablation_configurations(TinyEncoderClassifier(10, 8, 2, 1, 16, 3)))
    ['all on', 'L1H1 off', 'L1H2 off', 'layer 1 off', 'only L1H1 on', 'only L1H2 on', 'all off']
    """
    heads = all_heads(model)
    configurations: dict[str, list[tuple[int, int]]] = {"all on": []}
    configurations |= {f"{head_name(*h)} off": [h] for h in heads}
    configurations |= {f"layer {i + 1} off": [h for h in heads if h[0] == i] for i in range(len(model.layers))}
    configurations |= {f"only {head_name(*h)} on": [g for g in heads if g != h] for h in heads}
    configurations["all off"] = heads
    return configurations


def ablation_study(model: nn.Module, data: PronounData,
                   configurations: dict[str, list[tuple[int, int]]]) -> tuple[torch.Tensor, list[str]]:
    """Accuracy, overall and per pronoun, with each configuration's heads switched off.

    Args:
        model: a model with ``layers`` (see :func:`heads_switched_off`).
        data: held-out sentences.
        configurations: label -> ``(layer, head)`` pairs, e.g. from :func:`ablation_configurations`.

    Returns:
        ``(table, columns)``: ``table`` ``(R, 1 + P)``, one row per configuration in order; column 0 is the
        accuracy on all of ``data``, then one column per pronoun; ``columns`` names them (``"all"``, ``"he"``…).
    """
    rows, columns = [], ["all"]
    for off in configurations.values():
        with heads_switched_off(model, off):
            by_pronoun = accuracy_by_pronoun(model, data)
            rows.append([accuracy(model, data), *by_pronoun.values()])
        columns = ["all", *by_pronoun]
    return torch.tensor(rows), columns


@torch.no_grad()
def referent_attention(model: nn.Module, data: PronounData) -> tuple[torch.Tensor, torch.Tensor]:
    """How much attention the pronoun gives to its referent, and to the other noun, in every head.

    Returns:
        ``(to_referent, to_other)``, each ``(num_layers, H)``: the weight in the pronoun's row, averaged
        over the sentences of ``data``, on the referent's key and on the other noun's key.
    """
    was_training = model.training
    model.eval()
    try:
        _, maps = model(data.tokens, mask=_mask(data), need_weights=True)
    finally:
        model.train(was_training)
    rows = torch.arange(len(data))
    # the advanced indices (sentence, pronoun row, key) pick one weight per sentence and head: (N, H)
    to_referent = torch.stack([m[rows, :, data.pronoun_pos, data.referent_pos].mean(dim=0) for m in maps])
    to_other = torch.stack([m[rows, :, data.pronoun_pos, data.other_pos].mean(dim=0) for m in maps])
    return to_referent, to_other
