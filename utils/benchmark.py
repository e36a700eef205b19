"""Benchmarks that report every figure as a ratio against the PyTorch built-in, measured in the same run.

Usage::

    python -m utils.benchmark attention            # N=8, L=512, E=512, H=8 (takes a minute on 2 cores)
    python -m utils.benchmark attention --quick    # tiny sizes, a few seconds
    python -m utils.benchmark                      # every subcommand with its defaults

Method: each candidate and its baseline are timed round-robin (one call of each per repetition, so
drift on a busy machine hits both), after ``warmup`` untimed calls. A row reports the median of the
per-repetition ratios ``candidate / baseline`` and their min-max spread, plus the baseline's median time.
The thread count (``torch.set_num_threads``) is set and printed.

Adding a subcommand: write ``_add_<name>(subparsers)`` that registers a parser with
``set_defaults(run=<function taking the parsed args>)`` and append it to :data:`SUBCOMMANDS`.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

__all__ = ["Timing", "time_round_robin", "attention_benchmark", "format_table", "environment_line", "main"]


@dataclass(frozen=True)
class Timing:
    """Seconds per call of each repetition, for one candidate."""

    name: str
    seconds: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


def time_round_robin(candidates: dict[str, Callable[[], object]], *, repeats: int = 5,
                     warmup: int = 1) -> dict[str, Timing]:
    """Time each zero-argument callable ``repeats`` times, interleaved, after ``warmup`` untimed rounds.

    >>> t = time_round_robin({"a": lambda: sum(range(100))}, repeats=5)
    >>> len(t["a"].seconds), t["a"].median > 0
    (5, True)
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    for _ in range(warmup):
        for fn in candidates.values():
            fn()
    seconds: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(repeats):
        for name, fn in candidates.items():
            start = time.perf_counter()
            fn()
            seconds[name].append(max(time.perf_counter() - start, 1e-9))
    return {name: Timing(name, tuple(values)) for name, values in seconds.items()}


def _ratio_row(name: str, mode: str, baseline_name: str, candidate: Timing, baseline: Timing) -> dict:
    ratios = [c / b for c, b in zip(candidate.seconds, baseline.seconds)]
    return {
        "name": name,
        "mode": mode,
        "baseline": baseline_name,
        "ratio": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "baseline_ms": baseline.median * 1e3,
        "repeats": len(ratios),
    }


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
    from utils.attention import MultiHeadAttention

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
        rows.append(_ratio_row("fast path", mode, baseline, timings["fast"], timings["builtin"]))
        rows.append(_ratio_row("explicit path", mode, baseline, timings["explicit"], timings["builtin"]))
    if encoder:
        rows.append(_encoder_row(x, d_model, num_heads, repeats, warmup, seed))
    return rows


def _encoder_row(x: torch.Tensor, d_model: int, num_heads: int, repeats: int, warmup: int, seed: int) -> dict:
    from utils.layers import TransformerEncoderLayer

    torch.manual_seed(seed)
    builtin = nn.TransformerEncoderLayer(d_model, num_heads, dim_feedforward=4 * d_model, dropout=0.0,
                                         batch_first=True)
    ours = TransformerEncoderLayer.from_torch(builtin)

    def call(m: nn.Module, t: torch.Tensor) -> torch.Tensor:
        return m(t)

    timings = time_round_robin({"builtin": _forward(builtin, x, call), "ours": _forward(ours, x, call)},
                               repeats=repeats, warmup=warmup)
    return _ratio_row("encoder layer", "forward", "nn.TransformerEncoderLayer", timings["ours"], timings["builtin"])


def environment_line() -> str:
    """One line naming torch, the thread count and the CPU, printed above every table."""
    return (f"torch {torch.__version__}, {torch.get_num_threads()} threads "
            f"(torch.set_num_threads), CPU: {_cpu_name()}")


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def format_table(rows: Sequence[dict]) -> str:
    """A plain-text table of benchmark rows: ratio to the built-in with its min-max spread.

    >>> print(format_table([{"name": "fast path", "mode": "forward", "baseline": "nn.MultiheadAttention",
    ...     "ratio": 0.95, "ratio_min": 0.9, "ratio_max": 1.0, "baseline_ms": 12.0, "repeats": 5}]))
    ... # doctest: +NORMALIZE_WHITESPACE
    implementation  mode     vs built-in            ratio (median)  spread (min-max)  built-in median  reps
    fast path       forward  nn.MultiheadAttention  0.95x           0.90-1.00         12.00 ms         5
    """
    header = ("implementation", "mode", "vs built-in", "ratio (median)", "spread (min-max)", "built-in median", "reps")
    body = [
        (r["name"], r["mode"], r["baseline"], f"{r['ratio']:.2f}x", f"{r['ratio_min']:.2f}-{r['ratio_max']:.2f}",
         f"{r['baseline_ms']:.2f} ms", str(r["repeats"]))
        for r in rows
    ]
    widths = [max(len(line[i]) for line in (header, *body)) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in (header, *body))


# --------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------

QUICK = {"batch": 2, "length": 32, "d_model": 32, "num_heads": 4, "repeats": 5, "warmup": 1}


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
    print(format_table(rows))
    if args.plot:
        _save_plot(rows, Path(args.plot))
    return rows


def _save_plot(rows: Sequence[dict], path: Path) -> None:
    import matplotlib.pyplot as plt

    from utils.plotting.multihead import speed_ratio_figure

    path.parent.mkdir(parents=True, exist_ok=True)
    fig = speed_ratio_figure(rows)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"plot saved to {path}")


def _add_attention(subparsers) -> None:
    p = subparsers.add_parser("attention", help="MultiHeadAttention (fast and explicit) vs nn.MultiheadAttention")
    p.add_argument("--batch", type=int, default=8, help="N (default 8)")
    p.add_argument("--length", type=int, default=512, help="L (default 512)")
    p.add_argument("--d-model", type=int, default=512, help="E (default 512)")
    p.add_argument("--heads", type=int, default=8, help="H (default 8)")
    p.add_argument("--repeats", type=int, default=5, help="timed repetitions, >= 5 (default 5)")
    p.add_argument("--warmup", type=int, default=1, help="untimed warm-up rounds (default 1)")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's choice; 1 with --quick)")
    p.add_argument("--quick", action="store_true", help=f"tiny sizes for tests: {QUICK}")
    p.add_argument("--no-encoder", action="store_true", help="skip the encoder-layer row")
    p.add_argument("--plot", default="benchmark-results/attention.png",
                   help="where to save the ratio plot; '' to skip (default benchmark-results/attention.png)")
    p.set_defaults(run=_run_attention)


SUBCOMMANDS: list[Callable] = [_add_attention]
"""Parser builders, one per subcommand; colleagues append ``_add_memory`` and ``_add_grader``."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m utils.benchmark", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", metavar="{" + ",".join(_names()) + "}")
    for add in SUBCOMMANDS:
        add(subparsers)
    return parser


def _names() -> list[str]:
    return [add.__name__.removeprefix("_add_") for add in SUBCOMMANDS]


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand, or all of them with their defaults when none is given."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        for name in _names():
            sub = parser.parse_args([name])
            sub.run(sub)
        return 0
    if getattr(args, "repeats", 5) < 5 and not getattr(args, "quick", False):
        parser.error("--repeats must be at least 5 (medians of fewer runs are too noisy to report)")
    args.run(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
