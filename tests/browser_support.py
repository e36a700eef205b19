"""Headless Chromium for the browser tests (tests/browser/ and tests/test_html.py).

Playwright for Python drives Debian's chromium (``/usr/bin/chromium``, installed by ``.ci/run``):
Playwright's own browser download cannot work here. Each context gets a fresh profile directory, and
the flags keep Chromium from calling home (without them it floods a closed network with refused
connections).
"""

from __future__ import annotations

import atexit
import functools
import shutil
from contextlib import contextmanager
from pathlib import Path

import pytest

from utils.prereqs import chromium_path

CHROMIUM = chromium_path()
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "build" / "test-artifacts"


def require_chromium() -> None:
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"{CHROMIUM} is missing: `apt-get install chromium` (.ci/run does)", pytrace=False)


@functools.cache
def _playwright():
    """One Playwright driver per test process: its sync API runs an event loop, and a second
    ``sync_playwright()`` started while the first is alive (the JupyterLab tests keep theirs for the
    session) fails with "using Playwright Sync API inside the asyncio loop"."""
    from playwright.sync_api import sync_playwright

    driver = sync_playwright().start()
    atexit.register(driver.stop)
    return driver


@contextmanager
def chromium_context(profile_dir: Path, **context_options):
    """A Playwright browser context on Debian's Chromium with a fresh ``--user-data-dir``."""
    require_chromium()
    context = _playwright().chromium.launch_persistent_context(
        str(profile_dir),
        executable_path=CHROMIUM,
        headless=True,
        args=CHROMIUM_ARGS,
        viewport={"width": 1280, "height": 900},
        **context_options,
    )
    try:
        yield context
    finally:
        context.close()


def keep_artifact(path: Path, name: str | None = None) -> Path:
    """Copy a screenshot (or any file) to build/test-artifacts/ so it survives the test's tmp dir."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    target = ARTIFACTS / (name or path.name)
    shutil.copy2(path, target)
    return target
