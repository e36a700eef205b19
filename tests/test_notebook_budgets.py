"""The notebook budgets: every solution notebook (English and ``solutions/zh/``) runs top to bottom in
under 60 s on 2 cores (chapters 5 and 6: 90 s), with a kernel peak RSS under 1 GiB (Binder gives 1-2 GB).

They are measured during the strict nbval run over ``solutions/`` (``make nbval-solutions`` loads the
plugin ``tests/nbval_budgets.py``), so no notebook executes a second time for its budget. These tests
check the plugin: its budgets and verdicts, and, on a notebook of two cells run by nbval in a fresh
pytest, that it measures the kernel, writes the JSON and fails the run when a notebook is over budget.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbval_budgets import RSS_BUDGET_BYTES, join_cells, judge, kernel_cpu_s, report_lines, time_budget

REPO = Path(__file__).resolve().parent.parent


def test_budgets_by_chapter():
    assert time_budget(Path("01_x.ipynb")) == 60 and time_budget("solutions/zh/05_x.ipynb") == 90
    assert time_budget(Path("06_x.ipynb")) == 90 and RSS_BUDGET_BYTES == 1024**3
    assert time_budget("04_x.ipynb", override=1.0) == 1.0


def test_the_makefile_budgets_the_strict_solution_run():
    """The budgets are checked where every solution runs, English and Chinese: nbval-solutions."""
    make = (REPO / "Makefile").read_text()
    recipe = make.split("\nnbval-solutions:", 1)[1].split("\n\n", 1)[0]
    assert "-p tests.nbval_budgets" in recipe and "--nbval solutions" in recipe, recipe


def _cell(notebook, start, end, rss, cpu=None):
    return {"notebook": notebook, "start": start, "end": end, "peak_rss_bytes": rss, "kernel_cpu_s": cpu}


def test_cells_join_into_one_row_per_notebook():
    cells = [_cell("solutions/01_a.ipynb", 10.0, 11.0, 100, 2.0), _cell("solutions/zh/01_a.ipynb", 5.0, 6.0, None),
             _cell("solutions/01_a.ipynb", 11.0, 30.5, 300, 9.5), _cell("solutions/01_a.ipynb", 30.5, 31.0, 200, 9.0)]
    rows = join_cells(cells)
    assert list(rows) == ["solutions/01_a.ipynb", "solutions/zh/01_a.ipynb"]
    assert rows["solutions/01_a.ipynb"] == {"wall_s": 21.0, "peak_rss_bytes": 300, "kernel_cpu_s": 9.5, "cells": 3}
    assert rows["solutions/zh/01_a.ipynb"] == {"wall_s": 1.0, "peak_rss_bytes": None, "kernel_cpu_s": None, "cells": 1}


def test_kernel_cpu_seconds_are_read_from_proc():
    assert kernel_cpu_s(os.getpid()) > 0 and kernel_cpu_s(None) is None


@pytest.mark.parametrize(
    ("notebook", "wall_s", "cpu_s", "rss", "problem"),
    [
        ("solutions/01_a.ipynb", 59.0, 20.0, 2**29, None),
        ("solutions/zh/02_b.ipynb", 200.0, 60.0, 2**29, "used 60.0 CPU-s; the budget is 60 s"),
        ("solutions/05_c.ipynb", 89.0, 89.0, 2**29, None),
        ("solutions/zh/06_d.ipynb", 91.0, 91.0, 2**29, "used 91.0 CPU-s; the budget is 90 s"),
        ("solutions/02_g.ipynb", 290.0, 30.0, 2**29, None),  # a busy machine: 10x the wall time, within budget
        ("solutions/02_h.ipynb", 299.0, None, 2**29, None),  # no CPU time: the wall time, 5x the budget
        ("solutions/02_i.ipynb", 300.0, None, 2**29, "ran 300.0 s (its CPU time unknown); the budget is 60 s"),
        ("solutions/03_e.ipynb", 1.0, 0.5, 2**30, "kernel peak RSS 1024 MiB; the budget is 1024 MiB"),
        ("solutions/04_f.ipynb", 1.0, 0.5, None, "could not read the kernel's peak RSS"),
    ],
)
def test_judge_names_what_is_over_budget(notebook, wall_s, cpu_s, rss, problem):
    judged = judge({notebook: {"wall_s": wall_s, "kernel_cpu_s": cpu_s, "peak_rss_bytes": rss, "cells": 3}})
    problems = judged[notebook]["problems"]
    assert (problems == []) if problem is None else (len(problems) == 1 and problem in problems[0])
    (line,) = report_lines(judged)
    assert line.startswith("ok  " if problem is None else "FAIL") and notebook in line


def _two_cell_notebook(path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import time\nblock = bytearray(64 * 2**20)  # 64 MiB, touched"),
                nbformat.v4.new_code_cell("start = time.process_time()\nwhile time.process_time() - start < 1.2:\n"
                                          "    pass  # 1.2 CPU-s, over the test's 1 s budget\n"
                                          "print(len(block) // 2**20)")]
    nb.cells[0].execution_count, nb.cells[1].execution_count = 1, 2
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="64\n")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def _nbval(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "budgets.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.nbval_budgets", "--nbval",
         "01_tiny.ipynb", "--notebook-budgets-json", str(out), *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    return run, json.loads(out.read_text()) if out.exists() else {}


@pytest.mark.slow
def test_nbval_run_measures_the_kernel_and_fails_over_budget(tmp_path):
    """One nbval run (a second costs ~9 CPU s): within the per-chapter budget is judged by ``judge`` above,
    and by the real nbval-solutions stage passing."""
    _two_cell_notebook(tmp_path / "01_tiny.ipynb")
    run, judged = _nbval(tmp_path, "--notebook-time-budget", "1")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "2 passed" in run.stdout, "the cells pass: only the budget fails the run"
    row = judged["01_tiny.ipynb"]
    assert row["cells"] == 2 and row["budget_s"] == 1, row
    assert row["wall_s"] >= 1.2, row  # the busy loop, without the kernel's start
    assert 64 * 2**20 < row["peak_rss_bytes"] < RSS_BUDGET_BYTES, row  # the kernel's, with its 64 MiB
    assert row["kernel_cpu_s"] >= 1.2, row  # the kernel's start and the busy loop
    assert row["problems"] == [f"used {row['kernel_cpu_s']:.1f} CPU-s; the budget is 1 s"], row
    assert "FAIL 01_tiny.ipynb" in run.stdout and "over budget, failing the run: 01_tiny.ipynb" in run.stdout
