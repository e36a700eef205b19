"""Benchmarks that report every figure as a ratio against the PyTorch built-in, measured in the same run.

Usage::

    python -m utils.benchmark attention            # N=8, L=512, E=512, H=8 (takes a minute on 2 cores)
    python -m utils.benchmark attention --quick    # tiny sizes, a few seconds
    python -m utils.benchmark memory               # peak memory vs L, 1k..16k, H=8, D=64 (about 2 minutes)
    python -m utils.benchmark grader               # utils.grading.grade vs running the notebooks (minutes)
    python -m utils.benchmark                      # every subcommand with its defaults

Method: each candidate and its baseline are timed round-robin (one call of each per repetition, so
drift on a busy machine hits both), after ``warmup`` untimed calls. A row reports the median of the
per-repetition ratios ``candidate / baseline`` and their min-max spread, plus the baseline's median time.
The thread count (``torch.set_num_threads``) is set and printed.

``memory`` runs each configuration in a fresh Python process (``subprocess``) and reads its peak
resident memory (``VmHWM`` in ``/proc/self/status``) after resetting it once the inputs exist, so a
row is the growth *above the inputs*. On a CUDA device it reports ``torch.cuda.max_memory_allocated``
instead, plus the SDPA backend that torch chose.

Adding a subcommand: write ``_add_<name>(subparsers)`` that registers a parser with
``set_defaults(run=<function taking the parsed args>)`` and append it to :data:`SUBCOMMANDS`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

__all__ = ["Timing", "time_round_robin", "attention_benchmark", "format_table", "environment_line",
           "naive_attention", "sdpa_backend", "measure_memory", "memory_benchmark", "format_memory_table",
           "grader_benchmark", "format_grader_table", "main"]


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
# memory: peak memory against L, each configuration in a fresh process
# --------------------------------------------------------------------------------------------------

MEMORY_IMPLS = ("naive", "sdpa", "tiled")
"""``naive``: softmax(Q K^T) V with the (L, L) scores; ``sdpa``: ``F.scaled_dot_product_attention``;
``tiled``: :func:`utils.tiled_attention.tiled_attention`."""

MEMORY_LENGTHS = (1024, 2048, 4096, 8192, 16384)


def naive_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """Attention that materialises the scores: ``(..., L, D), (..., S, D), (..., S, Dv) -> (..., L, Dv)``.

    >>> q = torch.randn(1, 2, 5, 4)
    >>> torch.allclose(naive_attention(q, q, q), torch.nn.functional.scaled_dot_product_attention(q, q, q), atol=1e-6)
    True
    """
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])  # (..., L, S): the O(L * S) part
    return torch.softmax(scores, dim=-1) @ value  # (..., L, S) @ (..., S, Dv) -> (..., L, Dv)


def naive_bytes(length: int, heads: int = 8, batch: int = 1, itemsize: int = 4) -> int:
    """Bytes of the two (N, H, L, L) matrices naive attention holds at once (scores and weights)."""
    return 2 * batch * heads * length * length * itemsize


def sdpa_backend(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *, is_causal: bool = False) -> str:
    """The backend ``F.scaled_dot_product_attention`` picks for these inputs: ``"FLASH_ATTENTION"``,
    ``"EFFICIENT_ATTENTION"``, ``"CUDNN_ATTENTION"``, ``"MATH"``... (``torch._fused_sdp_choice``, a private
    helper that the dispatcher itself calls; ``"unknown"`` where it is missing).

    >>> sdpa_backend(*(torch.randn(1, 2, 8, 4) for _ in range(3))) in ("FLASH_ATTENTION", "MATH", "unknown")
    True
    """
    choose = getattr(torch, "_fused_sdp_choice", None)
    if choose is None:
        return "unknown"
    try:
        from torch.nn.attention import SDPBackend

        index = choose(query, key, value, None, 0.0, is_causal)
        return next((b.name for b in SDPBackend.__members__.values() if int(b) == index), str(index))
    except Exception:  # noqa: BLE001 - best effort: the name is informative, never essential
        return "unknown"


def _proc_status_bytes(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                value, unit = line.split()[1:3]
                return int(value) * {"kB": 1024, "mB": 2**20}.get(unit, 1)
    except OSError:
        pass
    return None


def _reset_peak_rss() -> bool:
    """Reset ``VmHWM`` to the current RSS (Linux >= 4.0: write 5 to ``/proc/self/clear_refs``)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _memory_fn(impl: str, block_size: int) -> Callable:
    import torch.nn.functional as F

    if impl == "naive":
        return naive_attention
    if impl == "sdpa":
        return F.scaled_dot_product_attention
    if impl == "tiled":
        from utils.tiled_attention import tiled_attention

        return lambda q, k, v: tiled_attention(q, k, v, block_size=block_size)
    raise ValueError(f"impl must be one of {MEMORY_IMPLS}, got {impl!r}")


def measure_memory(impl: str, length: int, *, heads: int = 8, head_dim: int = 64, block_size: int = 512,
                   device: str = "cpu", threads: int | None = None, repeats: int = 1, seed: int = 0) -> dict:
    """Run one attention forward (``no_grad``, float32, N=1) and measure its peak memory *in this process*.

    Call it in a fresh process (:func:`memory_benchmark` does): the peak RSS of a process only grows.
    Inputs ``(1, H, L, D)`` are made and a tiny call warms the kernels up first; then the peak is reset and
    the growth above the inputs is read. On CUDA the peak is ``torch.cuda.max_memory_allocated`` above the
    inputs, and the SDPA backend torch picks is named.

    Returns:
        A dict with ``impl``, ``length``, ``device``, ``peak_mib`` (growth above the inputs),
        ``inputs_mib``, ``seconds`` (median of ``repeats`` calls), ``backend`` and ``method``.
    """
    if threads is not None:
        torch.set_num_threads(threads)
    fn = _memory_fn(impl, block_size)
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, heads, length, head_dim, generator=gen).to(device) for _ in range(3))  # (N, H, L, D)
    with torch.no_grad():
        fn(q[..., :8, :], k[..., :8, :], v[..., :8, :])  # warm-up: lazy kernel and allocator set-up
    inputs_mib = 3 * q.numel() * q.element_size() / 2**20
    backend = sdpa_backend(q, k, v) if impl == "sdpa" else ""
    seconds = []
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        method = "torch.cuda.max_memory_allocated"
    else:
        base = _proc_status_bytes("VmRSS") or 0
        method = "VmHWM (reset)" if _reset_peak_rss() else "VmHWM (not reset: includes start-up)"
    with torch.no_grad():
        for _ in range(repeats):
            start = time.perf_counter()
            out = fn(q, k, v)  # (N, H, L, D)
            if cuda:
                torch.cuda.synchronize()
            seconds.append(time.perf_counter() - start)
            del out
    peak = torch.cuda.max_memory_allocated() if cuda else (_proc_status_bytes("VmHWM") or 0)
    return {"impl": impl, "length": length, "device": device, "peak_mib": max(peak - base, 0) / 2**20,
            "inputs_mib": inputs_mib, "seconds": statistics.median(seconds), "backend": backend,
            "method": method, "repeats": repeats}


_CHILD = "import json, sys; from utils.benchmark import measure_memory; print(json.dumps(measure_memory(**json.loads(sys.argv[1]))))"


def measure_memory_subprocess(impl: str, length: int, *, timeout: float = 600, **kwargs) -> dict:
    """:func:`measure_memory` in a fresh ``python`` process, so every peak starts from a clean process."""
    root = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    done = subprocess.run([sys.executable, "-c", _CHILD, json.dumps({"impl": impl, "length": length, **kwargs})],
                          capture_output=True, text=True, timeout=timeout, cwd=root, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"memory measurement {impl} L={length} failed (exit {done.returncode}): "
                           f"{done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def memory_benchmark(lengths: Sequence[int] = MEMORY_LENGTHS, *, impls: Sequence[str] = MEMORY_IMPLS,
                     heads: int = 8, head_dim: int = 64, block_size: int = 512, device: str = "cpu",
                     threads: int | None = None, naive_max_bytes: int = 2 * 2**30, repeats: int = 1,
                     progress: Callable[[str], None] | None = None) -> list[dict]:
    """Peak memory of each implementation against L, one fresh subprocess per (impl, L).

    Naive attention is skipped (``skipped=True``, with its predicted size) where its two (L, L) matrices
    would exceed ``naive_max_bytes``: 16 GiB at L=16384, H=8 would swap or kill the machine.

    Returns:
        One dict per (impl, L): the fields of :func:`measure_memory` plus ``skipped``, ``predicted_mib``
        and ``mem_ratio``/``time_ratio`` against ``sdpa`` at the same L (``None`` where not measured).
    """
    threads = torch.get_num_threads() if threads is None else threads
    rows = []
    for length in lengths:
        for impl in impls:
            predicted = naive_bytes(length, heads) / 2**20 if impl == "naive" else None
            if impl == "naive" and naive_bytes(length, heads) > naive_max_bytes:
                rows.append({"impl": impl, "length": length, "device": device, "peak_mib": None,
                             "predicted_mib": predicted, "seconds": None, "backend": "", "skipped": True})
                continue
            if progress:
                progress(f"{impl} L={length}")
            row = measure_memory_subprocess(impl, length, heads=heads, head_dim=head_dim, block_size=block_size,
                                            device=device, threads=threads, repeats=repeats)
            rows.append({**row, "predicted_mib": predicted, "skipped": False})
    baseline = {r["length"]: r for r in rows if r["impl"] == "sdpa" and not r["skipped"]}
    for r in rows:
        b = baseline.get(r["length"])
        ok = b is not None and not r["skipped"]
        r["mem_ratio"] = r["peak_mib"] / max(b["peak_mib"], 1e-3) if ok else None
        r["time_ratio"] = r["seconds"] / b["seconds"] if ok else None
    return rows


def format_memory_table(rows: Sequence[dict]) -> str:
    """A plain-text table of :func:`memory_benchmark` rows.

    >>> print(format_memory_table([{"impl": "sdpa", "length": 1024, "peak_mib": 2.0, "seconds": 0.01,
    ...     "mem_ratio": 1.0, "time_ratio": 1.0, "skipped": False, "backend": "FLASH_ATTENTION"}]))
    ... # doctest: +NORMALIZE_WHITESPACE
    implementation  L     peak above inputs  vs sdpa (memory)  time      vs sdpa (time)  backend
    sdpa            1024  2.0 MiB            1.00x             10.0 ms   1.00x           FLASH_ATTENTION
    """
    header = ("implementation", "L", "peak above inputs", "vs sdpa (memory)", "time", "vs sdpa (time)", "backend")
    body = []
    for r in rows:
        if r["skipped"]:
            body.append((r["impl"], str(r["length"]), f"skipped (needs ~{r['predicted_mib'] / 1024:.1f} GiB)",
                         "-", "-", "-", ""))
            continue
        body.append((r["impl"], str(r["length"]), f"{r['peak_mib']:.1f} MiB",
                     "-" if r["mem_ratio"] is None else f"{r['mem_ratio']:.2f}x", f"{r['seconds'] * 1e3:.1f} ms",
                     "-" if r["time_ratio"] is None else f"{r['time_ratio']:.2f}x", r.get("backend", "")))
    widths = [max(len(line[i]) for line in (header, *body)) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in (header, *body))


# --------------------------------------------------------------------------------------------------
# grader: utils.grading.grade against running the same notebooks top to bottom
# --------------------------------------------------------------------------------------------------


def grader_benchmark(notebooks: Sequence[str | Path], *, students: int = 1, jobs: int | None = None,
                     seed: int = 0) -> list[dict]:
    """Time ``utils.grading.grade`` on ``students`` copies of ``notebooks`` against executing each notebook
    top to bottom with nbclient (:func:`utils.notebook_run.execute_notebook`), once per student.

    Returns two rows, ``nbclient`` (the baseline) and ``utils.grading.grade``, with ``seconds`` and
    ``ratio`` (grader / nbclient).
    """
    from utils.grading import grade
    from utils.notebook_run import execute_notebook

    paths = [Path(p).resolve() for p in notebooks]
    with tempfile.TemporaryDirectory(prefix="grader-bench-") as tmp:
        submissions = Path(tmp) / "submissions"
        for i in range(students):
            folder = submissions / f"student{i:02d}"
            folder.mkdir(parents=True)
            for p in paths:
                shutil.copy(p, folder / p.name)
        start = time.perf_counter()
        for _ in range(students):
            for p in paths:
                execute_notebook(p)
        run_s = time.perf_counter() - start
        start = time.perf_counter()
        summary = grade(submissions, Path(tmp) / "out", jobs=jobs, seed=seed, progress=False)
        grade_s = time.perf_counter() - start
    units = students * len(paths)
    return [
        {"name": "nbclient, top to bottom", "seconds": run_s, "per_notebook": run_s / units, "ratio": 1.0,
         "notebooks": units, "detail": "sequential"},
        {"name": "utils.grading.grade", "seconds": grade_s, "per_notebook": grade_s / units,
         "ratio": grade_s / run_s, "notebooks": units,
         "detail": f"jobs={jobs or 'default'}, isolation={summary.get('isolation')}, "
                   f"{sum(summary['totals'].values())}/{summary['max_total'] * students} points"},
    ]


def format_grader_table(rows: Sequence[dict]) -> str:
    """A plain-text table of :func:`grader_benchmark` rows.

    >>> print(format_grader_table([{"name": "nbclient", "seconds": 2.0, "per_notebook": 1.0, "ratio": 1.0,
    ...     "notebooks": 2, "detail": "sequential"}]))  # doctest: +NORMALIZE_WHITESPACE
    method    notebooks  total   per notebook  vs nbclient  detail
    nbclient  2          2.0 s   1.00 s        1.00x        sequential
    """
    header = ("method", "notebooks", "total", "per notebook", "vs nbclient", "detail")
    body = [(r["name"], str(r["notebooks"]), f"{r['seconds']:.1f} s", f"{r['per_notebook']:.2f} s",
             f"{r['ratio']:.2f}x", r["detail"]) for r in rows]
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


def _run_memory(args: argparse.Namespace) -> list[dict]:
    lengths = tuple(args.lengths)
    device = args.device
    threads = args.threads if args.threads is not None else torch.get_num_threads()
    if args.quick:
        lengths = (128, 256)
    impls = tuple(args.impls)
    print(f"memory: N=1, H={args.heads}, D={args.head_dim}, float32 forward under no_grad, tiled block "
          f"{args.block_size}; each row in a fresh process, peak {'CUDA allocation' if device != 'cpu' else 'RSS'} "
          f"above the inputs")
    torch.set_num_threads(threads)
    print(environment_line())
    rows = memory_benchmark(lengths, impls=impls, heads=args.heads, head_dim=args.head_dim,
                            block_size=args.block_size, device=device, threads=threads,
                            naive_max_bytes=int(args.naive_max_gib * 2**30), repeats=args.time_repeats,
                            progress=(lambda text: print(f"  running {text}", file=sys.stderr, flush=True)))
    print(format_memory_table(rows))
    if args.plot:
        import matplotlib.pyplot as plt

        from utils.plotting.at_scale import memory_scaling_figure

        path = Path(args.plot)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig = memory_scaling_figure(rows, heads=args.heads)
        fig.savefig(path, dpi=120)
        plt.close(fig)
        print(f"plot saved to {path}")
    return rows


def _add_memory(subparsers) -> None:
    default_device = "cuda" if torch.cuda.is_available() else "cpu"
    p = subparsers.add_parser("memory", help="peak memory vs L: naive vs F.scaled_dot_product_attention vs tiled")
    p.add_argument("--lengths", type=int, nargs="+", default=list(MEMORY_LENGTHS),
                   help="sequence lengths L (default 1024 ... 16384)")
    p.add_argument("--impls", nargs="+", choices=MEMORY_IMPLS, default=list(MEMORY_IMPLS))
    p.add_argument("--heads", type=int, default=8, help="H (default 8)")
    p.add_argument("--head-dim", type=int, default=64, help="D (default 64)")
    p.add_argument("--block-size", type=int, default=512, help="tiled attention's block (default 512)")
    p.add_argument("--device", default=default_device, help=f"cpu or cuda (default here: {default_device})")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's choice)")
    p.add_argument("--time-repeats", type=int, default=1,
                   help="timed calls per process, median reported (default 1: the memory is the measurement "
                        "here; `attention` reports timing medians)")
    p.add_argument("--naive-max-gib", type=float, default=2.0,
                   help="skip naive attention above this predicted size (default 2 GiB)")
    p.add_argument("--quick", action="store_true", help="L = 128 and 256 only, for tests")
    p.add_argument("--plot", default="benchmark-results/memory.png",
                   help="where to save the log-log plot; '' to skip (default benchmark-results/memory.png)")
    p.set_defaults(run=_run_memory)


def _run_grader(args: argparse.Namespace) -> list[dict] | None:
    try:
        import utils.grading  # noqa: F401
    except ImportError:
        print("grader: utils.grading is not available yet, so there is nothing to time "
              "(the grader issue adds it)")
        return None
    notebooks = args.notebooks or sorted(str(p) for p in (Path(__file__).resolve().parents[1] / "solutions").glob("*.ipynb"))
    if not notebooks:
        print("grader: no notebooks found in solutions/")
        return None
    print(f"grader: {len(notebooks)} notebook(s) x {args.students} student(s): "
          + ", ".join(Path(n).name for n in notebooks))
    print(environment_line())
    rows = grader_benchmark(notebooks, students=args.students, jobs=args.jobs)
    print(format_grader_table(rows))
    return rows


def _add_grader(subparsers) -> None:
    p = subparsers.add_parser("grader", help="utils.grading.grade vs executing the notebooks with nbclient")
    p.add_argument("notebooks", nargs="*", help="solution notebooks (default: every solutions/*.ipynb)")
    p.add_argument("--students", type=int, default=1, help="copies of the notebooks to grade (default 1)")
    p.add_argument("--jobs", type=int, default=None, help="grader parallelism (default: the grader's)")
    p.set_defaults(run=_run_grader)


SUBCOMMANDS: list[Callable] = [_add_attention, _add_memory, _add_grader]
"""Parser builders, one per subcommand."""


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
