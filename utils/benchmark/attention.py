"""``python -m utils.benchmark attention``: the reference multi-head attention against ``nn.MultiheadAttention``.

Rows for the fast path and the explicit path, forward and forward+backward, and one row for the encoder
layer against ``nn.TransformerEncoderLayer``; every figure is a ratio measured in the same run.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from torch import nn

from utils.attention import MultiHeadAttention
from utils.benchmark.common import environment_line, ratio_row, save_plot, text_table, time_round_robin
from utils.i18n.messages import tr
from utils.layers import TransformerEncoderLayer
from utils.plotting.multihead import speed_ratio_figure

__all__ = ["QUICK", "attention_benchmark", "format_attention_table", "read_ratio", "add_attention_command"]

QUICK = {"batch": 2, "length": 32, "d_model": 32, "num_heads": 4, "repeats": 5, "warmup": 1}
"""Sizes of ``attention --quick``."""


def _forward(module: nn.Module, x: torch.Tensor, call: Callable) -> Callable[[], object]:
    def run() -> object:
        with torch.no_grad():
            return call(module, x)

    module.eval()
    return run


def _forward_backward(module: nn.Module, x: torch.Tensor, call: Callable) -> Callable[[], object]:
    x = x.detach().requires_grad_(True)
    grad = torch.randn_like(x)

    def run() -> object:
        for p in module.parameters():
            p.grad = None
        x.grad = None
        out = call(module, x)
        out.backward(grad)
        return out

    module.train()
    return run


def attention_benchmark(*, batch: int = 8, length: int = 512, d_model: int = 512, num_heads: int = 8,
                        repeats: int = 5, warmup: int = 1, threads: int | None = None,
                        encoder: bool = True, seed: int = 0) -> list[dict]:
    """Reference :class:`~utils.attention.MultiHeadAttention` against ``nn.MultiheadAttention``.

    Rows: the fast path (``need_weights=False``) and the explicit path (``need_weights=True``, per-head
    weights), each in "forward" (eval mode, ``no_grad``) and "forward+backward" (train mode, dropout 0).
    The baseline is ``nn.MultiheadAttention(..., batch_first=True)`` with ``need_weights=False`` (its
    fastest setting), holding the same weights. With ``encoder=True`` a last row compares
    :class:`~utils.layers.TransformerEncoderLayer` with ``nn.TransformerEncoderLayer`` (eval, ``no_grad``).

    ``threads`` sets ``torch.set_num_threads`` for the measurement only; the previous value is restored.

    Returns:
        A list of dicts with ``name``, ``mode``, ``baseline``, ``ratio`` (median of candidate / baseline),
        ``ratio_min``, ``ratio_max``, ``baseline_ms`` and ``repeats``.

    >>> rows = attention_benchmark(batch=1, length=8, d_model=8, num_heads=2, repeats=5, encoder=False)
    >>> [r["name"] for r in rows][:2], all(r["ratio"] > 0 for r in rows)
    (['fast path', 'explicit path'], True)
    """
    previous_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        return _attention_rows(batch, length, d_model, num_heads, repeats, warmup, encoder, seed)
    finally:
        torch.set_num_threads(previous_threads)


def _attention_rows(batch: int, length: int, d_model: int, num_heads: int, repeats: int, warmup: int,
                    encoder: bool, seed: int) -> list[dict]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, length, d_model, generator=gen)  # (N, L, E)
    torch.manual_seed(seed)
    builtin = nn.MultiheadAttention(d_model, num_heads, dropout=0.0, batch_first=True)
    ours = MultiHeadAttention.from_torch(builtin)

    def call_builtin(m: nn.Module, t: torch.Tensor) -> torch.Tensor:
        return m(t, t, t, need_weights=False)[0]

    def call_fast(m: nn.Module, t: torch.Tensor) -> torch.Tensor:
        return m(t, need_weights=False)[0]

    def call_explicit(m: nn.Module, t: torch.Tensor) -> torch.Tensor:
        return m(t, need_weights=True)[0]

    rows = []
    baseline = "nn.MultiheadAttention"
    for mode, wrap in (("forward", _forward), ("forward+backward", _forward_backward)):
        timings = time_round_robin(
            {
                "builtin": wrap(builtin, x, call_builtin),
                "fast": wrap(ours, x, call_fast),
                "explicit": wrap(ours, x, call_explicit),
            },
            repeats=repeats, warmup=warmup,
        )
        rows.append(ratio_row("fast path", mode, baseline, timings["fast"], timings["builtin"]))
        rows.append(ratio_row("explicit path", mode, baseline, timings["explicit"], timings["builtin"]))
    if encoder:
        rows.append(_encoder_row(x, d_model, num_heads, repeats, warmup, seed))
    return rows


def _encoder_row(x: torch.Tensor, d_model: int, num_heads: int, repeats: int, warmup: int, seed: int) -> dict:
    torch.manual_seed(seed)
    builtin = nn.TransformerEncoderLayer(d_model, num_heads, dim_feedforward=4 * d_model, dropout=0.0,
                                         batch_first=True)
    ours = TransformerEncoderLayer.from_torch(builtin)

    def call(m: nn.Module, t: torch.Tensor) -> torch.Tensor:
        return m(t)

    timings = time_round_robin({"builtin": _forward(builtin, x, call), "ours": _forward(ours, x, call)},
                               repeats=repeats, warmup=warmup)
    return ratio_row("encoder layer", "forward", "nn.TransformerEncoderLayer", timings["ours"], timings["builtin"])


def read_ratio(row: dict) -> str:
    """What one row says: ``"faster"`` or ``"slower"`` than the built-in only when the whole min-max
    spread of the ratio lies below or above 1; otherwise ``"no clear difference"``.

    >>> (read_ratio({"ratio": 0.8, "ratio_min": 0.7, "ratio_max": 0.9}),
    ...  read_ratio({"ratio": 0.9, "ratio_min": 0.4, "ratio_max": 4.0}))
    ('faster', 'no clear difference')
    """
    if row["ratio_max"] < 1.0:
        return "faster"
    if row["ratio_min"] > 1.0:
        return "slower"
    return "no clear difference"


def format_attention_table(rows: Sequence[dict]) -> str:
    """A plain-text table of benchmark rows: ratio to the built-in with its min-max spread, and what the
    spread allows one to say (:func:`read_ratio`).

    >>> print(format_attention_table([{"name": "fast path", "mode": "forward", "baseline": "nn.MultiheadAttention",
    ...     "ratio": 0.95, "ratio_min": 0.9, "ratio_max": 1.0, "baseline_ms": 12.0, "repeats": 5}]))
    ... # doctest: +NORMALIZE_WHITESPACE
    implementation  mode     vs built-in            ratio (median)  spread (min-max)  built-in median  reps  reading
    fast path       forward  nn.MultiheadAttention  0.95x           0.90-1.00         12.00 ms         5
    no clear difference
    """
    header = (tr("implementation"), tr("mode"), tr("vs built-in"), tr("ratio (median)"), tr("spread (min-max)"),
              tr("built-in median"), tr("reps"), tr("reading"))
    words = {"fast path": tr("fast path"), "explicit path": tr("explicit path"), "encoder layer": tr("encoder layer"),
             "forward": tr("forward"), "forward+backward": tr("forward+backward"), "faster": tr("faster"),
             "slower": tr("slower"), "no clear difference": tr("no clear difference")}  # the rows keep the English
    body = [
        (words.get(r["name"], r["name"]), words.get(r["mode"], r["mode"]), r["baseline"], f"{r['ratio']:.2f}x",
         f"{r['ratio_min']:.2f}-{r['ratio_max']:.2f}", f"{r['baseline_ms']:.2f} ms", str(r["repeats"]),
         words[read_ratio(r)])
        for r in rows
    ]
    return text_table(header, body)


def _run_attention(args: argparse.Namespace) -> list[dict]:
    sizes = dict(batch=args.batch, length=args.length, d_model=args.d_model, num_heads=args.heads,
                 repeats=args.repeats, warmup=args.warmup)
    if args.quick:
        sizes.update(QUICK)
    threads = args.threads if args.threads is not None else (1 if args.quick else None)
    if threads is not None:  # one thread for tiny sizes: no gain from more, and less noise on a busy machine
        torch.set_num_threads(threads)
    rows = attention_benchmark(**sizes, encoder=not args.no_encoder)
    print(f"attention: N={sizes['batch']}, L={sizes['length']}, E={sizes['d_model']}, H={sizes['num_heads']}, "
          f"float32, {sizes['repeats']} repetitions after {sizes['warmup']} warm-up")
    print(environment_line())
    print(format_attention_table(rows))
    if args.plot:
        save_plot(speed_ratio_figure(rows), Path(args.plot))
    return rows


def add_attention_command(subparsers: argparse._SubParsersAction) -> None:
    """Register ``attention``: :func:`attention_benchmark` from the command line."""
    p = subparsers.add_parser("attention", help="MultiHeadAttention (fast and explicit) vs nn.MultiheadAttention")
    p.add_argument("--batch", type=int, default=8, help="N (default 8)")
    p.add_argument("--length", type=int, default=512, help="L (default 512)")
    p.add_argument("--d-model", type=int, default=512, help="E (default 512)")
    p.add_argument("--heads", type=int, default=8, help="H (default 8)")
    p.add_argument("--repeats", type=int, default=5, help="timed repetitions, >= 5 (default 5)")
    p.add_argument("--warmup", type=int, default=1, help="untimed warm-up rounds (default 1)")
    p.add_argument("--threads", type=int, default=None,
                   help="torch.set_num_threads (default: torch's choice; 1 with --quick)")
    p.add_argument("--quick", action="store_true", help=f"tiny sizes for tests: {QUICK}")
    p.add_argument("--no-encoder", action="store_true", help="skip the encoder-layer row")
    p.add_argument("--plot", default="benchmark-results/attention.png",
                   help="where to save the ratio plot; '' to skip (default benchmark-results/attention.png)")
    p.set_defaults(run=_run_attention)
