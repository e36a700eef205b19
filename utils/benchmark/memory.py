"""``python -m utils.benchmark memory``: peak memory against L for naive, SDPA and tiled attention.

Each configuration runs in a fresh Python process (:func:`measure_memory_subprocess`), because the peak
RSS of a process only grows. The process resets its peak (``VmHWM``) once the inputs exist, so a row is
the growth *above the inputs*; on CUDA it is ``torch.cuda.max_memory_allocated`` above the inputs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
import torch.nn.functional as F

from utils._proc import peak_rss_bytes, status_bytes
from utils.at_scale import naive_attention, naive_bytes, sdpa_backend
from utils.benchmark.common import environment_line, save_plot, text_table
from utils.tiled_attention import tiled_attention

__all__ = ["MEMORY_IMPLS", "MEMORY_LENGTHS", "measure_memory", "measure_memory_subprocess", "memory_benchmark",
           "memory_growth", "format_memory_table", "add_memory_command"]

MEMORY_IMPLS = ("naive", "sdpa", "tiled")
"""``naive``: softmax(Q K^T) V with the (L, L) scores; ``sdpa``: ``F.scaled_dot_product_attention``;
``tiled``: :func:`utils.tiled_attention.tiled_attention`."""

MEMORY_LENGTHS = (1024, 2048, 4096, 8192, 16384)


def _reset_peak_rss() -> bool:
    """Reset ``VmHWM`` to the current RSS (Linux >= 4.0: write 5 to ``/proc/self/clear_refs``)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _memory_fn(impl: str, block_size: int) -> Callable:
    if impl == "naive":
        return naive_attention
    if impl == "sdpa":
        return F.scaled_dot_product_attention
    if impl == "tiled":
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
        base = status_bytes("VmRSS") or 0
        method = "VmHWM (reset)" if _reset_peak_rss() else "VmHWM (not reset: includes start-up)"
    with torch.no_grad():
        for _ in range(repeats):
            start = time.perf_counter()
            out = fn(q, k, v)  # (N, H, L, D)
            if cuda:
                torch.cuda.synchronize()
            seconds.append(time.perf_counter() - start)
            del out
    peak = torch.cuda.max_memory_allocated() if cuda else (peak_rss_bytes() or 0)
    return {"impl": impl, "length": length, "device": device, "peak_mib": max(peak - base, 0) / 2**20,
            "inputs_mib": inputs_mib, "seconds": statistics.median(seconds), "backend": backend,
            "method": method, "repeats": repeats}


_CHILD = ("import json, sys; from utils.benchmark.memory import measure_memory; "
          "print(json.dumps(measure_memory(**json.loads(sys.argv[1]))))")


def measure_memory_subprocess(impl: str, length: int, *, timeout: float = 600, **kwargs) -> dict:
    """:func:`measure_memory` in a fresh ``python`` process, so every peak starts from a clean process."""
    root = str(Path(__file__).resolve().parents[2])
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


def memory_growth(rows: Sequence[dict]) -> dict[str, float]:
    """How much each implementation's peak grew over the last step of L: the peak at the largest measured
    L divided by the peak at the measured L before it (4 for O(L²) and 2 for O(L) when L doubles).

    >>> memory_growth([{"impl": "naive", "length": n, "peak_mib": n * n / 1e4, "skipped": False} for n in (8, 16, 32)])
    {'naive': 4.0}
    """
    growth = {}
    for impl in dict.fromkeys(r["impl"] for r in rows):
        measured = sorted((r["length"], r["peak_mib"]) for r in rows if r["impl"] == impl and not r["skipped"])
        if len(measured) >= 2:
            growth[impl] = measured[-1][1] / max(measured[-2][1], 1e-3)
    return growth


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
    return text_table(header, body)


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
        # imported here, not at the top: the measuring child process imports this module and stays lean
        from utils.plotting.at_scale import memory_scaling_figure

        save_plot(memory_scaling_figure(rows, heads=args.heads), Path(args.plot))
    return rows


def add_memory_command(subparsers: argparse._SubParsersAction) -> None:
    """Register ``memory``: :func:`memory_benchmark` from the command line."""
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
