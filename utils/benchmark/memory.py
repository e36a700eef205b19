"""``python -m utils.benchmark memory``: peak memory against L for naive, SDPA and tiled attention.

Each configuration runs in a process of its own (:func:`measure_memory_subprocess`, forked from a server
that has imported torch once), because the peak RSS of a process only grows. The process resets its
peak (``VmHWM``) once the inputs exist, so a row is the growth *above the inputs*; on CUDA it is
``torch.cuda.max_memory_allocated`` above the inputs.

``--mode backward`` runs a forward and a backward (``out.backward(grad_out)``) instead, and a row is the
growth above the inputs (with ``grad_out``) *and their three gradients*: what the backward needs beyond
the gradients it must return. It compares SDPA's fused backward, tiled attention's recomputing backward
(FlashAttention-2) and autograd through the tiled loop (``tiled_autograd``, ``O(L * S)``).
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from utils._proc import peak_rss_bytes, status_bytes
from utils.at_scale import naive_attention, naive_bytes, sdpa_backend
from utils.benchmark.common import environment_line, save_plot, text_table
from utils.i18n.messages import tr
from utils.tiled_attention import tiled_attention

__all__ = ["MEMORY_IMPLS", "BACKWARD_IMPLS", "MEMORY_MODES", "MEMORY_LENGTHS", "measure_memory",
           "measure_memory_subprocess", "memory_benchmark",
           "memory_growth", "format_memory_table", "add_memory_command"]

MEMORY_IMPLS = ("naive", "sdpa", "tiled")
"""``naive``: softmax(Q K^T) V with the (L, L) scores; ``sdpa``: ``F.scaled_dot_product_attention``;
``tiled``: :func:`utils.tiled_attention.tiled_attention`. Also accepted: ``tiled_autograd``, the same
function with ``backward="autograd"`` (its forward is the same; only the backward differs)."""

BACKWARD_IMPLS = ("sdpa", "tiled", "tiled_autograd")
"""The defaults of ``--mode backward``: SDPA's fused backward, the recomputing backward, autograd's."""

MEMORY_MODES = ("forward", "backward")
"""``forward``: one call under ``no_grad``; ``backward``: a forward and ``out.backward(grad_out)``."""

_QUADRATIC = {"naive": 1.0, "tiled_autograd": 1.0}
"""Implementations whose memory is O(L²): their predicted size, in units of :func:`naive_bytes`, decides
whether they are skipped (autograd through the loop keeps about one (L, S) scores and one weights)."""

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
    if impl == "tiled_autograd":
        return lambda q, k, v: tiled_attention(q, k, v, block_size=block_size, backward="autograd")
    raise ValueError(f"impl must be one of {MEMORY_IMPLS + ('tiled_autograd',)}, got {impl!r}")


def measure_memory(impl: str, length: int, *, heads: int = 8, head_dim: int = 64, block_size: int = 512,
                   device: str = "cpu", threads: int | None = None, repeats: int = 1, seed: int = 0,
                   mode: str = "forward", paired: int = 0) -> dict:
    """Run one attention forward (``no_grad``, float32, N=1), or a forward and a backward (``mode="backward"``),
    and measure its peak memory *in this process*.

    Call it in a fresh process (:func:`memory_benchmark` does): the peak RSS of a process only grows.
    Inputs ``(1, H, L, D)`` are made (and, for the backward, ``grad_out``) and a tiny call warms the kernels
    up first; then the peak is reset and the growth above the inputs is read. In backward mode the three
    gradients (``3 * L * D`` floats per head, which every implementation must return) are subtracted too.
    On CUDA the peak is ``torch.cuda.max_memory_allocated`` above the inputs, and the SDPA backend torch
    picks is named.

    Returns:
        A dict with ``impl``, ``length``, ``device``, ``mode``, ``peak_mib`` (growth above the inputs, and in
        backward mode above their gradients), ``inputs_mib``, ``gradients_mib``, ``seconds`` (median of
        ``repeats`` calls: forward, plus backward in backward mode), ``forward_seconds``,
        ``backward_seconds`` (``None`` in forward mode), ``backend`` and ``method``. With ``paired`` > 0
        (and an implementation other than SDPA), ``paired`` more rounds then time this implementation and
        SDPA interleaved in the same process, and the row gets ``time_ratio``, ``forward_ratio`` and (in
        backward mode) ``backward_ratio``: medians of the per-round ratios, with ``_min``/``_max`` spreads.
    """
    if mode not in MEMORY_MODES:
        raise ValueError(f"mode must be one of {MEMORY_MODES}, got {mode!r}")
    if threads is not None:
        torch.set_num_threads(threads)
    fn = _memory_fn(impl, block_size)
    train = mode == "backward"
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, heads, length, head_dim, generator=gen).to(device) for _ in range(3))  # (N, H, L, D)
    grad_out = torch.randn(1, heads, length, head_dim, generator=gen).to(device) if train else None  # (N, H, L, D)
    grad_context = nullcontext if train else torch.no_grad
    with grad_context():  # warm-up: lazy kernel and allocator set-up
        small = [t[..., :8, :].detach().requires_grad_(train) for t in (q, k, v)]
        out = fn(*small)
        if train:
            out.backward(torch.ones_like(out))
    del small, out
    for t in (q, k, v):
        t.requires_grad_(train)
    tensor_bytes = q.numel() * q.element_size()
    inputs_mib = (4 if train else 3) * tensor_bytes / 2**20
    gradients_bytes = 3 * tensor_bytes if train else 0
    backend = sdpa_backend(q, k, v) if impl == "sdpa" else ""
    forward_seconds, backward_seconds = [], []
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        method = "torch.cuda.max_memory_allocated"
    else:
        base = status_bytes("VmRSS") or 0
        method = "VmHWM (reset)" if _reset_peak_rss() else "VmHWM (not reset: includes start-up)"
    with grad_context():
        for _ in range(repeats):
            forward, backward = _timed_call(fn, (q, k, v), grad_out, cuda)
            forward_seconds.append(forward)
            backward_seconds.append(backward or 0.0)
    peak = torch.cuda.max_memory_allocated() if cuda else (peak_rss_bytes() or 0)
    row = {"impl": impl, "length": length, "device": device, "mode": mode,
           "peak_mib": max(peak - base - gradients_bytes, 0) / 2**20, "inputs_mib": inputs_mib,
           "gradients_mib": gradients_bytes / 2**20,
           "seconds": statistics.median(f + b for f, b in zip(forward_seconds, backward_seconds)),
           "forward_seconds": statistics.median(forward_seconds),
           "backward_seconds": statistics.median(backward_seconds) if train else None,
           "backend": backend, "method": method, "repeats": repeats, "paired": 0}
    if paired and impl != "sdpa":  # the memory is read: now time against SDPA, interleaved, in this process
        row.update(_paired_ratios(fn, (q, k, v), grad_out, cuda, paired, grad_context))
    return row


def _timed_call(fn: Callable, qkv: tuple, grad_out: torch.Tensor | None, cuda: bool) -> tuple[float, float | None]:
    """Seconds of one forward and, when ``grad_out`` is given, of its backward (gradients then dropped)."""
    start = time.perf_counter()
    out = fn(*qkv)  # (N, H, L, D)
    if cuda:
        torch.cuda.synchronize()
    forward = time.perf_counter() - start
    if grad_out is None:
        return forward, None
    start = time.perf_counter()
    out.backward(grad_out)
    if cuda:
        torch.cuda.synchronize()
    for t in qkv:
        t.grad = None
    return forward, time.perf_counter() - start


def _paired_ratios(fn: Callable, qkv: tuple, grad_out: torch.Tensor | None, cuda: bool, rounds: int,
                   grad_context: Callable) -> dict:
    """``rounds`` rounds of (this implementation, SDPA), interleaved, after one untimed SDPA call: the
    median and min-max of the per-round time ratios, so that load on a shared machine hits both sides."""
    ratios: dict[str, list[float]] = {"time": [], "forward": [], "backward": []}
    with grad_context():
        _timed_call(F.scaled_dot_product_attention, qkv, grad_out, cuda)
        for _ in range(rounds):
            ours = _timed_call(fn, qkv, grad_out, cuda)
            theirs = _timed_call(F.scaled_dot_product_attention, qkv, grad_out, cuda)
            ratios["forward"].append(ours[0] / theirs[0])
            if grad_out is not None:
                ratios["backward"].append(ours[1] / theirs[1])
                ratios["time"].append(sum(ours) / sum(theirs))
            else:
                ratios["time"].append(ours[0] / theirs[0])
    row = {"paired": rounds}
    for name, values in ratios.items():
        if values:
            row.update({f"{name}_ratio": statistics.median(values), f"{name}_ratio_min": min(values),
                        f"{name}_ratio_max": max(values)})
    return row


def _context() -> Any:
    """``multiprocessing``'s forkserver, with this module (and so torch) imported into the server once."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    return context


def _measure_in_child(conn: Any, kwargs: dict) -> None:
    try:
        conn.send(("ok", measure_memory(**kwargs)))
    except BaseException as exc:  # noqa: BLE001  (the parent reports it)
        conn.send(("error", "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-2000:]))
    finally:
        conn.close()


def measure_memory_subprocess(impl: str, length: int, *, timeout: float = 600, **kwargs) -> dict:
    """:func:`measure_memory` in a process of its own, so every peak starts from a clean process.

    The process is forked from a server that imported torch once (``multiprocessing``'s forkserver; it
    has run no torch op, so no thread pool or allocator state is inherited): each configuration pays
    milliseconds to start instead of torch's 2-3 s import, and its peak is read as in a fresh process.
    """
    receive, send = _context().Pipe(duplex=False)
    child = _context().Process(target=_measure_in_child, args=(send, {"impl": impl, "length": length, **kwargs}),
                               daemon=True)
    child.start()
    send.close()
    try:
        if not receive.poll(timeout):
            raise RuntimeError(f"memory measurement {impl} L={length} did not finish within {timeout:g} s")
        status, payload = receive.recv()
    except EOFError:  # it died without a word: killed (out of memory?) or crashed
        child.join(5)
        raise RuntimeError(f"memory measurement {impl} L={length} failed (exit {child.exitcode})") from None
    finally:
        if child.is_alive() and not receive.poll(0):
            child.kill()
        child.join(5)
        receive.close()
    if status != "ok":
        raise RuntimeError(f"memory measurement {impl} L={length} failed: {payload.strip()}")
    return payload


def memory_benchmark(lengths: Sequence[int] = MEMORY_LENGTHS, *, impls: Sequence[str] | None = None,
                     heads: int = 8, head_dim: int = 64, block_size: int = 512, device: str = "cpu",
                     threads: int | None = None, naive_max_bytes: int = 2 * 2**30, repeats: int = 1,
                     mode: str = "forward", paired: int = 0,
                     progress: Callable[[str], None] | None = None) -> list[dict]:
    """Peak memory of each implementation against L, one process of its own per (impl, L).

    Naive attention and autograd through the tiled loop hold O(L²) memory: they are skipped
    (``skipped=True``, with their predicted size) where their two (L, L) matrices would exceed
    ``naive_max_bytes``: 16 GiB at L=16384, H=8 would swap or kill the machine.

    Args:
        impls: Default: :data:`MEMORY_IMPLS` in forward mode, :data:`BACKWARD_IMPLS` in backward mode.
        mode: ``"forward"`` or ``"backward"`` (forward and backward), see :func:`measure_memory`.
            Default: ``"forward"``.
        paired: rounds of interleaved timing against SDPA in each row's own process (see
            :func:`measure_memory`); ``0`` compares with the SDPA row's own process instead, which a busy
            machine skews. Default: ``0``.

    Returns:
        One dict per (impl, L): the fields of :func:`measure_memory` plus ``skipped``, ``predicted_mib``
        and ``mem_ratio``/``time_ratio`` against ``sdpa`` at the same L (``None`` where not measured);
        in backward mode also ``forward_ratio`` and ``backward_ratio``.
    """
    if mode not in MEMORY_MODES:
        raise ValueError(f"mode must be one of {MEMORY_MODES}, got {mode!r}")
    impls = (BACKWARD_IMPLS if mode == "backward" else MEMORY_IMPLS) if impls is None else tuple(impls)
    threads = torch.get_num_threads() if threads is None else threads
    rows = []
    for length in lengths:
        for impl in impls:
            predicted = _QUADRATIC[impl] * naive_bytes(length, heads) / 2**20 if impl in _QUADRATIC else None
            if impl in _QUADRATIC and predicted * 2**20 > naive_max_bytes:
                rows.append({"impl": impl, "length": length, "device": device, "mode": mode, "peak_mib": None,
                             "predicted_mib": predicted, "seconds": None, "backend": "", "skipped": True})
                continue
            if progress:
                progress(f"{impl} L={length}")
            row = measure_memory_subprocess(impl, length, heads=heads, head_dim=head_dim, block_size=block_size,
                                            device=device, threads=threads, repeats=repeats, mode=mode,
                                            paired=paired)
            rows.append({**row, "predicted_mib": predicted, "skipped": False})
    baseline = {r["length"]: r for r in rows if r["impl"] == "sdpa" and not r["skipped"]}
    for r in rows:
        b = baseline.get(r["length"])
        ok = b is not None and not r["skipped"]
        r["mem_ratio"] = r["peak_mib"] / max(b["peak_mib"], 1e-3) if ok else None
        if r.get("paired"):
            continue  # its time ratios were measured against SDPA in its own process
        r["time_ratio"] = r["seconds"] / b["seconds"] if ok else None
        if mode == "backward":
            for part in ("forward", "backward"):
                r[f"{part}_ratio"] = r[f"{part}_seconds"] / b[f"{part}_seconds"] if ok else None
    return rows


def memory_growth(rows: Sequence[dict], *, span: str = "last") -> dict[str, float]:
    """How much each implementation's peak grew with L: the peak at the largest measured L divided by the
    peak at the measured L before it (``span="last"``: 4 for O(L²) and 2 for O(L) when L doubles), or at
    the smallest measured L (``span="all"``: one ratio over the whole range, steadier than one step).

    >>> rows = [{"impl": "naive", "length": n, "peak_mib": n * n / 1e4, "skipped": False} for n in (8, 16, 32)]
    >>> memory_growth(rows), memory_growth(rows, span="all")
    ({'naive': 4.0}, {'naive': 16.0})
    """
    if span not in ("last", "all"):
        raise ValueError(f"span must be 'last' or 'all', got {span!r}")
    growth = {}
    for impl in dict.fromkeys(r["impl"] for r in rows):
        measured = sorted((r["length"], r["peak_mib"]) for r in rows if r["impl"] == impl and not r["skipped"])
        if len(measured) >= 2:
            growth[impl] = measured[-1][1] / max(measured[0 if span == "all" else -2][1], 1e-3)
    return growth


def format_memory_table(rows: Sequence[dict]) -> str:
    """A plain-text table of :func:`memory_benchmark` rows (backward-mode rows get forward and backward times).

    >>> print(format_memory_table([{"impl": "sdpa", "length": 1024, "peak_mib": 2.0, "seconds": 0.01,
    ...     "mem_ratio": 1.0, "time_ratio": 1.0, "skipped": False, "backend": "FLASH_ATTENTION"}]))
    ... # doctest: +NORMALIZE_WHITESPACE
    implementation  L     peak above inputs  vs sdpa (memory)  time      vs sdpa (time)  backend
    sdpa            1024  2.0 MiB            1.00x             10.0 ms   1.00x           FLASH_ATTENTION
    """
    def ratio(row: dict, name: str) -> str:
        value = row.get(name)
        if value is None:
            return "-"
        spread = f" ({row[name + '_min']:.2f}-{row[name + '_max']:.2f})" if name + "_min" in row else ""
        return f"{value:.2f}x{spread}"

    backward = any(r.get("mode") == "backward" for r in rows)
    if backward:
        header = (tr("implementation"), "L", tr("peak above inputs and gradients"), tr("vs sdpa (memory)"),
                  tr("forward"), tr("vs sdpa"), tr("backward"), tr("vs sdpa"), tr("backend"))
    else:
        header = (tr("implementation"), "L", tr("peak above inputs"), tr("vs sdpa (memory)"), tr("time"),
                  tr("vs sdpa (time)"), tr("backend"))
    names = {"naive": tr("naive"), "tiled": tr("tiled"), "tiled_autograd": tr("tiled_autograd")}  # sdpa stays
    body = []
    for r in rows:
        r = {**r, "impl": names.get(r["impl"], r["impl"])}
        if r["skipped"]:
            skipped = tr("skipped (needs ~{gib:.1f} GiB)", gib=r["predicted_mib"] / 1024)
            body.append((r["impl"], str(r["length"]), skipped, *["-"] * (len(header) - 4), ""))
        elif backward:
            body.append((r["impl"], str(r["length"]), f"{r['peak_mib']:.1f} MiB", ratio(r, "mem_ratio"),
                         f"{r['forward_seconds'] * 1e3:.1f} ms", ratio(r, "forward_ratio"),
                         f"{r['backward_seconds'] * 1e3:.1f} ms", ratio(r, "backward_ratio"), r.get("backend", "")))
        else:
            body.append((r["impl"], str(r["length"]), f"{r['peak_mib']:.1f} MiB", ratio(r, "mem_ratio"),
                         f"{r['seconds'] * 1e3:.1f} ms", ratio(r, "time_ratio"), r.get("backend", "")))
    return text_table(header, body)


def _run_memory(args: argparse.Namespace) -> list[dict]:
    lengths = tuple(args.lengths)
    device = args.device
    threads = args.threads if args.threads is not None else torch.get_num_threads()
    if args.quick:
        lengths = (128, 256)
    backward = args.mode == "backward"
    impls = tuple(args.impls) if args.impls else (BACKWARD_IMPLS if backward else MEMORY_IMPLS)
    what = "forward and backward, peak" if backward else "forward under no_grad, peak"
    above = "above the inputs (with grad_out) and their gradients" if backward else "above the inputs"
    print(f"memory: N=1, H={args.heads}, D={args.head_dim}, float32 {what} "
          f"{'CUDA allocation' if device != 'cpu' else 'RSS'} {above}; tiled block {args.block_size}; "
          f"each row in a fresh process")
    torch.set_num_threads(threads)
    print(environment_line())
    rows = memory_benchmark(lengths, impls=impls, heads=args.heads, head_dim=args.head_dim,
                            block_size=args.block_size, device=device, threads=threads,
                            naive_max_bytes=int(args.naive_max_gib * 2**30), repeats=args.time_repeats,
                            mode=args.mode, paired=args.paired,
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
    p.add_argument("--mode", choices=MEMORY_MODES, default="forward",
                   help="forward (no_grad) or backward (forward and backward, above the gradients too); "
                        "default forward")
    p.add_argument("--lengths", type=int, nargs="+", default=list(MEMORY_LENGTHS),
                   help="sequence lengths L (default 1024 ... 16384)")
    p.add_argument("--impls", nargs="+", choices=MEMORY_IMPLS + ("tiled_autograd",), default=None,
                   help=f"default: {' '.join(MEMORY_IMPLS)} (forward), {' '.join(BACKWARD_IMPLS)} (backward)")
    p.add_argument("--heads", type=int, default=8, help="H (default 8)")
    p.add_argument("--head-dim", type=int, default=64, help="D (default 64)")
    p.add_argument("--block-size", type=int, default=512, help="tiled attention's block (default 512)")
    p.add_argument("--device", default=default_device, help=f"cpu or cuda (default here: {default_device})")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's choice)")
    p.add_argument("--time-repeats", type=int, default=1,
                   help="timed calls per process, median reported (default 1: the memory is the measurement "
                        "here; `attention` reports timing medians)")
    p.add_argument("--paired", type=int, default=3,
                   help="rounds of (implementation, SDPA) timed interleaved in each row's process after its "
                        "memory is read; the ratios are their medians, spread shown (default 3; 0: compare "
                        "with the SDPA row's own process)")
    p.add_argument("--naive-max-gib", type=float, default=2.0,
                   help="skip naive attention and tiled_autograd (both O(L²)) above this predicted size "
                        "(default 2 GiB)")
    p.add_argument("--quick", action="store_true", help="L = 128 and 256 only, for tests")
    p.add_argument("--plot", default="benchmark-results/memory.png",
                   help="where to save the log-log plot of the forward mode; '' to skip "
                        "(default benchmark-results/memory.png)")
    p.set_defaults(run=_run_memory)
