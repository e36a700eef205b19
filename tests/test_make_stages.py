"""What each stage of ``make test`` executes, so that no notebook runs twice for the same assurance.

Read from the commands ``make -n`` would run (nothing is executed):

- nbval-solutions runs every solution strictly (English and Chinese) and measures its budgets
  (tests/test_notebook_budgets.py checks that recipe).
- Every English student notebook runs top to bottom in Binder's environment (binder-test); under
  ``make test`` that same session runs ``chapters/zh/`` with nbval-lax on its other worker, and
  ``make nbval-chapters`` alone runs all of ``chapters/``.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from env_support import CHAPTERS

from utils import prereqs
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


# --- the HTML edition's chapters, executed in the background from make test's start ---------------

def test_make_test_starts_the_html_warmer_at_the_lowest_priority_before_any_stage():
    out = subprocess.run(["make", "-n", "--no-print-directory", "test"], cwd=REPO, capture_output=True, text=True,
                         timeout=120, check=True).stdout.splitlines()
    warm = [i for i, line in enumerate(out) if "utils.html --cache-only" in line and line.startswith("nice -n 19 ")]
    pytests = [i for i, line in enumerate(out) if "-m pytest" in line]
    assert warm and pytests and warm[0] < pytests[0], out
    browser = next(i for i in pytests if "-m browser" in out[i])
    assert "utils/prereqs.py renice" in out[browser - 1], "the browser stage must lift the warmer's priority"


SPAWN = "import subprocess, sys, time; subprocess.Popen([sys.executable, *sys.argv[1:]], start_new_session=True); " \
        "time.sleep(300)"
GRANDCHILD = "import pathlib, sys, time; pathlib.Path(sys.argv[1]).write_text('up'); time.sleep(300)"


@pytest.mark.parametrize("status", [1, 0], ids=["a stage fails", "all pass"])
def test_the_warmer_and_everything_below_it_are_stopped_when_make_test_ends(status, tmp_path):
    """The warmer's stand-in starts a child in a session of its own (as a pool worker starts a kernel),
    which starts a grandchild; the grandchild says when it is up, and only then do the stages end."""
    tag, ready = f"course-warmer-{uuid.uuid4().hex}", tmp_path / "ready"
    spawn, grandchild = tmp_path / "spawn.py", tmp_path / "grandchild.py"
    spawn.write_text(SPAWN)
    grandchild.write_text(GRANDCHILD)
    warm = f"{sys.executable} {spawn} {spawn} {grandchild} {ready} {tag}"
    stages = f"sh -c 'until [ -f {ready} ]; do sleep 0.1; done; exit {status}'"
    result = subprocess.run(["make", "--no-print-directory", "-o", "setup", "-o", "test-prereqs", "test",
                             f"WARM={warm}", f"MAKE={stages}"], cwd=REPO, capture_output=True, text=True,
                            timeout=120)
    assert ready.read_text() == "up", "the warmer's grandchild never started"
    assert (result.returncode == 0) == (status == 0), result.stdout + result.stderr
    left = [p for p in Path("/proc").glob("[0-9]*/cmdline") if _reads(p, tag)]
    assert not left, f"still running after make test: {[p.read_bytes() for p in left]}"


def _reads(path: Path, tag: str) -> bool:
    try:
        return tag.encode() in path.read_bytes()
    except OSError:
        return False


def test_renice_gives_the_warmer_and_its_children_normal_priority_back():
    if os.geteuid() != 0:
        pytest.skip("raising a process's priority needs root (make test then leaves the warmer at nice 19)")
    parent = subprocess.Popen(["nice", "-n", "19", sys.executable, "-c",
                               "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
                               "'import time; time.sleep(60)']); time.sleep(60)"])
    try:
        deadline = time.monotonic() + 30
        while len(prereqs.process_tree(parent.pid)) < 2:
            assert time.monotonic() < deadline, "the warmer's child did not start"
            time.sleep(0.05)
        tree = prereqs.process_tree(parent.pid)
        assert [os.getpriority(os.PRIO_PROCESS, p) for p in tree] == [19, 19]
        assert prereqs.main(["renice", str(parent.pid)]) == 0
        assert [os.getpriority(os.PRIO_PROCESS, p) for p in tree] == [0, 0]
    finally:
        assert prereqs.stop_tree(parent.pid)
