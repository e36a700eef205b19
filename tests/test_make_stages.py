"""What each stage of ``make test`` executes, so that no notebook runs twice for the same assurance.

Read from the commands ``make -n`` would run (nothing is executed):

- nbval-solutions runs every solution strictly (English and Chinese) and measures its budgets
  (tests/test_notebook_budgets.py checks that recipe).
- Every English student notebook runs top to bottom in Binder's environment (binder-test); under
  ``make test`` that same session runs ``chapters/zh/`` with nbval-lax on its other worker, and
  ``make nbval-chapters`` alone runs all of ``chapters/``.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from env_support import CHAPTERS

from utils.build import NOTEBOOK_GLOB

REPO = Path(__file__).resolve().parent.parent


def pytest_runs(*goals: str) -> list[list[str]]:
    """The argument lists of every ``python -m pytest`` that ``make -n <goals>`` prints."""
    out = subprocess.run(["make", "-n", "--no-print-directory", *goals], cwd=REPO, capture_output=True, text=True,
                         timeout=120, check=True).stdout
    runs = []
    for line in out.splitlines():
        words = shlex.split(line) if "-m pytest" in line else []
        if words:
            runs.append(words[words.index("pytest") + 1:])
    return runs


def notebook_paths(args: list[str], flag: str) -> list[str]:
    """The folders a pytest run collects with ``flag`` (``--nbval`` or ``--nbval-lax``), else []."""
    return [a for a in args if not a.startswith("-") and (REPO / a).is_dir()] if flag in args else []


def test_make_test_runs_every_notebook_stage_once():
    runs = pytest_runs("test")
    strict = [p for args in runs for p in notebook_paths(args, "--nbval")]
    lax = [p for args in runs for p in notebook_paths(args, "--nbval-lax")]
    assert strict == ["solutions"], runs
    assert lax == ["chapters/zh"], f"under make test only the Chinese chapters run with nbval-lax: {runs}"
    binder = [args for args in runs if "tests/test_binder_env.py" in args]
    assert len(binder) == 1 and "--nbval-lax" in binder[0], "chapters/zh shares the Binder session's workers"
    assert sorted((REPO / "chapters" / "zh").glob(NOTEBOOK_GLOB)), "no Chinese chapters to run"


def test_alone_nbval_chapters_runs_every_student_notebook():
    [args] = pytest_runs("nbval-chapters")
    assert notebook_paths(args, "--nbval-lax") == ["chapters"], args
    [args] = pytest_runs("binder-test")
    assert notebook_paths(args, "--nbval-lax") == [], "alone, binder-test runs only Binder and Colab"


def test_binder_runs_every_english_chapter():
    assert CHAPTERS and {p.parent for p in CHAPTERS} == {REPO / "chapters"}, CHAPTERS
    source = (REPO / "tests" / "test_binder_env.py").read_text()
    assert '@pytest.mark.parametrize("chapter", CHAPTERS' in source


def test_every_test_stage_runs_torch_on_one_thread_per_process():
    """Two xdist workers on two cores, each with torch's default of one thread per core, spin against each
    other: the test stages export OMP_NUM_THREADS=1 (chapter 7's model tests took five times the CPU)."""
    for goal in ("test", "quick", "unit", "nbval-solutions", "binder-test", "browser"):
        out = subprocess.run(["make", "-n", "-p", "--no-print-directory", goal], cwd=REPO, capture_output=True,
                             text=True, timeout=120, check=True).stdout
        assert f"{goal}: OMP_NUM_THREADS = 1" in out, goal
    lab = subprocess.run(["make", "-n", "-p", "--no-print-directory", "lab"], cwd=REPO, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    assert "lab: OMP_NUM_THREADS" not in lab  # a learner's kernels keep torch's default
