"""What every benchmark shares: round-robin timing, ratio rows, the environment line and the table."""

from __future__ import annotations

import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from utils._text import text_table

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["Timing", "time_round_robin", "ratio_row", "environment_line", "text_table", "save_plot"]


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


def ratio_row(name: str, mode: str, baseline_name: str, candidate: Timing, baseline: Timing) -> dict:
    """One table row: the median and min-max of the per-repetition ratios ``candidate / baseline``."""
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


def save_plot(fig: Figure, path: Path) -> None:
    """Save a benchmark's figure as a PNG (creating its folder), close it, and say where it went."""
    import matplotlib.pyplot as plt  # here, not at the top: the memory benchmark's child process stays lean

    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"plot saved to {path}")
