"""A pytest plugin: the time and memory budgets of every notebook that ``--nbval`` runs.

``make nbval-solutions`` loads it (``-p tests.nbval_budgets``), so the strict nbval run over
``solutions/`` (English and ``solutions/zh/``) is also the budget run: no notebook executes a second
time for its budget. Budgets (CONTRIBUTING, "Determinism and nbval"): a notebook runs top to bottom in
under 60 s on 2 cores (chapters 5 and 6: 90 s), with a kernel peak RSS under 1 GiB (Binder gives 1-2 GB).

- The time budget is judged on the kernel's CPU seconds (user plus system, ``/proc/<pid>/stat``, its
  start included), not on wall time: a notebook does not get slower because the machine is busy (a
  laptop running a browser, two test workers, CI). The wall time, from the start of its first cell to
  the end of its last, is printed beside it; only where the CPU time cannot be read is the wall time
  judged, against :data:`WALL_MARGIN` times the budget. Its peak RSS is the kernel process's ``VmHWM``
  from ``/proc``, read after each cell (the high-water mark only grows, so the last reading is the
  notebook's peak).
- Each cell's report carries its measurement in ``user_properties``, so the numbers reach the
  controller under pytest-xdist. There they are joined per notebook, written to
  ``build/notebook-budgets.json`` (``--notebook-budgets-json``), printed one line per notebook, and an
  over-budget notebook, or one whose kernel memory could not be read, fails the session, naming it.
- ``--notebook-time-budget SECONDS`` replaces every time budget (the plugin's own test uses 1 s).

Wall times are only meaningful when nothing else heavy runs at the same time; CPU times are.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from utils._proc import peak_rss_bytes

SLOW_CHAPTERS = {5, 6}
TIME_BUDGET_S = 60.0
SLOW_TIME_BUDGET_S = 90.0
RSS_BUDGET_BYTES = 2**30
MODEL_CHAPTERS = {7: (120.0, int(1.5 * 2**30))}
"""Chapters that run a real trained model (chapter 7: SmolLM2-135M, 540 MB of float32 weights), with their own
(CPU seconds, peak RSS bytes) budgets, as issue 38 states them."""
WALL_MARGIN = 5.0
"""Where the kernel's CPU time cannot be read, its wall time may be this many times the budget (a machine
five times slower than the one the budgets were set on)."""
PROPERTY = "nbval_cell_budget"
DEFAULT_JSON = "build/notebook-budgets.json"


def time_budget(path: str | Path, override: float | None = None) -> float:
    """Seconds the notebook at ``path`` may run: by its chapter number (``NN_`` prefix), or ``override``."""
    if override is not None:
        return override
    chapter = _chapter(path)
    if chapter in MODEL_CHAPTERS:
        return MODEL_CHAPTERS[chapter][0]
    return SLOW_TIME_BUDGET_S if chapter in SLOW_CHAPTERS else TIME_BUDGET_S


def rss_budget(path: str | Path) -> int:
    """Bytes of peak RSS the kernel of the notebook at ``path`` may reach, by its chapter number."""
    chapter = _chapter(path)
    return MODEL_CHAPTERS[chapter][1] if chapter in MODEL_CHAPTERS else RSS_BUDGET_BYTES


def _chapter(path: str | Path) -> int:
    name = Path(path).name
    return int(name[:2]) if name[:2].isdigit() else 0


def join_cells(cells: list[dict]) -> dict[str, dict]:
    """Per-cell measurements (``notebook``, ``start``, ``end``, ``peak_rss_bytes``) -> one row per notebook:
    ``wall_s`` from the first cell's start to the last cell's end, ``peak_rss_bytes`` the largest reading
    (None when no cell could read it), ``kernel_cpu_s`` the kernel's CPU seconds by the last cell (its
    start included), ``cells`` the number of cells measured."""
    rows: dict[str, dict] = {}
    for cell in cells:
        row = rows.setdefault(cell["notebook"], {"start": cell["start"], "end": cell["end"], "rss": [], "cpu": [],
                                                 "cells": 0})
        row["start"], row["end"] = min(row["start"], cell["start"]), max(row["end"], cell["end"])
        row["cells"] += 1
        if cell["peak_rss_bytes"] is not None:
            row["rss"].append(cell["peak_rss_bytes"])
        if cell.get("kernel_cpu_s") is not None:
            row["cpu"].append(cell["kernel_cpu_s"])
    return {
        notebook: {"wall_s": row["end"] - row["start"], "peak_rss_bytes": max(row["rss"], default=None),
                   "kernel_cpu_s": max(row["cpu"], default=None), "cells": row["cells"]}
        for notebook, row in sorted(rows.items())
    }


def judge(rows: dict[str, dict], time_override: float | None = None) -> dict[str, dict]:
    """``rows`` from :func:`join_cells`, each with its budgets and ``problems`` (empty: within budget)."""
    judged = {}
    for notebook, row in rows.items():
        budget_s = time_budget(notebook, time_override)
        budget_bytes = rss_budget(notebook)
        rss = row["peak_rss_bytes"]
        problems = []
        cpu = row.get("kernel_cpu_s")
        if cpu is not None and cpu >= budget_s:
            problems.append(f"used {cpu:.1f} CPU-s; the budget is {budget_s:g} s")
        elif cpu is None and row["wall_s"] >= budget_s * WALL_MARGIN:
            problems.append(f"ran {row['wall_s']:.1f} s (its CPU time unknown); the budget is {budget_s:g} s, "
                            f"{WALL_MARGIN:g} times that in wall time")
        if rss is None:
            problems.append("could not read the kernel's peak RSS from /proc (Linux only)")
        elif rss >= budget_bytes:
            problems.append(f"kernel peak RSS {rss / 2**20:.0f} MiB; the budget is {budget_bytes / 2**20:.0f} MiB")
        judged[notebook] = {**row, "budget_s": budget_s, "budget_bytes": budget_bytes, "problems": problems}
    return judged


def report_lines(judged: dict[str, dict]) -> list[str]:
    """One line per notebook: ``ok``/``FAIL``, CPU time, wall time and peak RSS against their budgets, the
    problems."""
    lines = []
    for notebook, row in judged.items():
        rss = "n/a" if row["peak_rss_bytes"] is None else f"{row['peak_rss_bytes'] / 2**20:.0f} MiB"
        cpu = "n/a" if row.get("kernel_cpu_s") is None else f"{row['kernel_cpu_s']:.1f} s"
        line = (f"{'FAIL' if row['problems'] else 'ok  '} {notebook}: kernel CPU {cpu} (budget "
                f"{row['budget_s']:g} s), wall {row['wall_s']:.1f} s, kernel peak RSS {rss} (budget "
                f"{row['budget_bytes'] / 2**20:.0f} MiB)")
        lines.append(line + "".join(f"; {problem}" for problem in row["problems"]))
    return lines


def kernel_cpu_s(pid: int | None) -> float | None:
    """User plus system CPU seconds of process ``pid`` so far (``/proc/<pid>/stat``), or None: what the
    time budget is judged on (a loaded machine stretches the wall time, not this)."""
    import os

    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime: fields 14, 15


def _kernel_pid(item) -> int | None:
    """The pid of the kernel nbval runs ``item``'s notebook in (jupyter_client's provisioner, or older)."""
    km = getattr(getattr(item.parent, "kernel", None), "km", None)
    process = getattr(getattr(km, "provisioner", None), "process", None) or getattr(km, "kernel", None)
    return getattr(process, "pid", None)


def _is_nbval_cell(item) -> bool:
    return type(item).__name__ == "IPyNbCell" and item.path.suffix == ".ipynb"


def pytest_addoption(parser):
    group = parser.getgroup("notebook budgets")
    group.addoption("--notebook-budgets-json", default=DEFAULT_JSON,
                    help=f"where to write each notebook's wall time and kernel peak RSS (default {DEFAULT_JSON})")
    group.addoption("--notebook-time-budget", type=float, default=None,
                    help="seconds every notebook may run, replacing the per-chapter budgets")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    if not _is_nbval_cell(item):
        yield
        return
    start = time.time()  # wall clock, not perf_counter: comparable across processes
    yield  # a failing cell is measured too (nbval's own failure fails the run anyway)
    pid = _kernel_pid(item)
    root = item.config.rootpath
    notebook = item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) else str(item.path)
    item.user_properties.append((PROPERTY, {
        "notebook": notebook, "start": start, "end": time.time(),
        "peak_rss_bytes": peak_rss_bytes(pid) if pid is not None else None, "kernel_cpu_s": kernel_cpu_s(pid),
    }))


_CELLS: list[dict] = []


def pytest_configure(config):
    _CELLS.clear()


def pytest_runtest_logreport(report):
    """Gather the cells' measurements (on the controller under xdist: its reports carry them)."""
    if report.when == "call":
        cells = [value for key, value in getattr(report, "user_properties", ()) if key == PROPERTY]
        if cells:
            _CELLS.extend(cells)


def pytest_sessionfinish(session, exitstatus):
    """Join, write, judge; an over-budget notebook fails the session (before the summary is printed)."""
    config = session.config
    if hasattr(config, "workerinput") or not _CELLS:  # an xdist worker: the controller judges
        return
    judged = judge(join_cells(_CELLS), config.getoption("--notebook-time-budget"))
    out = Path(config.getoption("--notebook-budgets-json"))
    out = out if out.is_absolute() else config.rootpath / out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(judged, indent=1) + "\n")
    config._notebook_budgets = (judged, out)
    if any(row["problems"] for row in judged.values()) and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not getattr(config, "_notebook_budgets", None):
        return
    judged, out = config._notebook_budgets
    terminalreporter.section("notebook budgets")
    for line in report_lines(judged):
        terminalreporter.write_line(line, red=line.startswith("FAIL"))
    failed = [notebook for notebook, row in judged.items() if row["problems"]]
    if failed:
        terminalreporter.write_line(f"over budget, failing the run: {', '.join(failed)}", red=True)
    terminalreporter.write_line(f"written to {out}")
