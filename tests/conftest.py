"""Shared fixtures for the unit tests of ``utils``."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import file_seconds
import pytest
import torch

# pytest-xdist runs one worker per core: torch's own threads on top would oversubscribe the cores
# (each check then spins instead of computing). A test that needs more threads sets them itself.
torch.set_num_threads(1)

# assert_close tolerances suited to each dtype: (atol, rtol)
TOLERANCES = {
    torch.float64: {"atol": 1e-10, "rtol": 1e-8},
    torch.float32: {"atol": 2e-5, "rtol": 1e-4},
    torch.float16: {"atol": 2e-3, "rtol": 2e-3},
    torch.bfloat16: {"atol": 2e-2, "rtol": 2e-2},
}


def _module_scoped(item: pytest.Item) -> bool:
    """Uses a module-scoped fixture (a graded batch, a built environment: built once per worker that runs
    its file)."""
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs.values() if info is not None else ()
    return any(d and d[-1].scope == "module" for d in defs)


def pytest_collection_modifyitems(config, items):
    """The longest files first (the seconds in ``tests/file_seconds.json``; a file not recorded there
    counts as a minute when it holds a slow test, 20 s when it uses a module-scoped fixture, else 0); each
    file's tests kept together and in order, equal files in the order they were collected.

    ``make unit`` hands out whole files (``--dist loadfile --no-loadscope-reorder``), so that a
    module-scoped fixture is built on one worker only; the long files go out first and the light ones
    fill the workers' tails, instead of two long files meeting at the end while the other worker idles.
    (``--dist loadgroup`` with ``xdist_group`` marks would keep only marked groups together, and with
    pytest 9.2 and pytest-xdist 3.8 it ignores the marks: pytest-xdist#1386.)"""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    heavy = {item.path for item in items if _module_scoped(item)}
    order = {path: i for i, path in enumerate(dict.fromkeys(item.path for item in items))}
    seconds = file_seconds.recorded()
    root = Path(str(config.rootpath))

    def expected(path) -> float:
        rel = Path(path).relative_to(root).as_posix() if Path(path).is_relative_to(root) else str(path)
        return file_seconds.expected_seconds(rel, path in slow, path in heavy, seconds)

    took = {path: expected(path) for path in order}
    items.sort(key=lambda item: (-took[item.path], order[item.path]))


@pytest.fixture
def tol():
    """``tol(dtype, scale=1.0)`` -> keyword arguments for ``torch.testing.assert_close``."""

    def _tol(dtype: torch.dtype, scale: float = 1.0) -> dict[str, float]:
        return {key: value * scale for key, value in TOLERANCES[dtype].items()}

    return _tol


@pytest.fixture(autouse=True)
def _seed():
    """Seed torch before every test, so that results do not depend on the order tests run in."""
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _close_figures():
    """Close every matplotlib figure a test left open (figure functions return them, never show them)."""
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


@pytest.fixture(scope="session")
def course_wheel(tmp_path_factory) -> Path:
    """The course package built as a wheel from a copy of ``utils/``, ``pyproject.toml`` and the README, as
    ``pip install`` of the course builds it (Colab, a pip-installed grader): what its package data ships."""
    repo = Path(__file__).resolve().parent.parent
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "src"
    shutil.copytree(repo / "utils", source / "utils", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(repo / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp / "dist"), str(source)], check=True, capture_output=True, timeout=300)
    [wheel] = (tmp / "dist").glob("*.whl")
    return wheel
