"""Budgets for every solution notebook: it executes top to bottom in under 60 s on 2 cores (chapters 5
and 6: 90 s), and its kernel's peak RSS stays under 1 GiB (Binder gives 1-2 GB).

Each test records a ``notebook_budget`` property; the repository's ``conftest.py`` prints one report
line per notebook in the terminal summary, with or without ``-s`` and under xdist. Timings are only
meaningful when nothing else heavy runs at the same time.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from utils.build import NOTEBOOK_GLOB
from utils.notebook_run import execute_notebook

REPO = Path(__file__).resolve().parent.parent
SOLUTIONS = sorted((REPO / "solutions").glob(NOTEBOOK_GLOB))

SLOW_CHAPTERS = {5, 6}
TIME_BUDGET_S = 60.0
SLOW_TIME_BUDGET_S = 90.0
RSS_BUDGET_BYTES = 2**30


def time_budget(path: Path) -> float:
    return SLOW_TIME_BUDGET_S if int(path.name[:2]) in SLOW_CHAPTERS else TIME_BUDGET_S


def test_budgets_by_chapter():
    assert time_budget(Path("01_x.ipynb")) == 60 and time_budget(Path("05_x.ipynb")) == 90
    assert time_budget(Path("06_x.ipynb")) == 90 and RSS_BUDGET_BYTES == 1024**3


@pytest.mark.slow
@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_solution_runs_within_budget(path, record_property):
    result = execute_notebook(path)
    budget = time_budget(path)
    rss = result.peak_rss_bytes
    record_property(
        "notebook_budget",
        {"notebook": path.name, "wall_s": result.wall_s, "budget_s": budget,
         "peak_rss_mib": None if rss is None else rss / 2**20, "budget_mib": RSS_BUDGET_BYTES / 2**20},
    )
    assert rss is not None, "could not read the kernel's peak RSS from /proc (Linux only)"
    assert result.wall_s < budget, f"{path.name} ran {result.wall_s:.1f} s; the budget is {budget:.0f} s"
    assert rss < RSS_BUDGET_BYTES, f"{path.name}: kernel peak RSS {rss / 2**20:.0f} MiB; the budget is 1024 MiB"
