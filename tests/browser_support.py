"""Headless Chromium for the browser tests (tests/browser/ and tests/test_html.py).

Playwright for Python drives Debian's chromium (``/usr/bin/chromium``, installed by ``.ci/run``):
Playwright's own browser download cannot work here. Each context gets a fresh profile directory, and
the flags keep Chromium from calling home (without them it floods a closed network with refused
connections).

The JupyterLab tests (tests/browser/) share the rest: opening a notebook once its kernel is really
ready (:func:`open_notebook`), running it (:data:`RUN_ALL`, :data:`CELL_ERRORS`), a few cells of
their own in the server's copy of the course (:func:`run_cells`), and reading or keeping an
explorer's figure (:func:`figure_src`, :func:`shown_pixels`, :func:`keep_screenshot`).
"""

from __future__ import annotations

import atexit
import base64
import functools
import io
import re
import shutil
from contextlib import contextmanager
from pathlib import Path

import nbformat
import numpy as np
import pytest
from PIL import Image

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
# A code line (not a comment) that calls an explorer, ``*_explorer(...)``: the cells the JupyterLab tests
# look for in a chapter, and tests/test_lab_coverage.py's check that every one of them is driven in Lab.
EXPLORER_CALL = re.compile(r"^[^#\n]*\b\w*explorer\s*\(", re.M)
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


def keep_page_screenshot(page, path: Path) -> None:
    """Save what the whole page shows at ``path`` and keep it as an artifact (a test that failed calls
    this before it re-raises; a screenshot that could not be taken is no new error)."""
    try:
        page.screenshot(path=str(path), full_page=False)
    finally:
        if path.exists():
            keep_artifact(path)


def keep_screenshot(locator, tmp_path: Path, name: str) -> None:
    """Screenshot ``locator`` into ``tmp_path`` and keep it under build/test-artifacts/ (on a failure)."""
    path = tmp_path / name
    try:
        locator.screenshot(path=str(path))
    finally:
        if path.exists():
            keep_artifact(path)


# --- JupyterLab (tests/browser/, with the ``lab`` and ``lab_page`` fixtures of its conftest) ---------

KERNEL_READY = """() => {
  const app = window.jupyterapp;
  const widget = app && app.shell.currentWidget;
  const ctx = widget && widget.sessionContext;
  const kernel = ctx && ctx.session && ctx.session.kernel;
  return !!(ctx && ctx.isReady && kernel && kernel.connectionStatus === 'connected' && kernel.status === 'idle'
            && widget.content && widget.content.widgets.length > 0);
}"""

RUN_ALL = """async (timeoutMs) => {
  // Run all, then wait until every code cell has run (or one raised where it should not) and the
  // kernel is idle, twice in a row: the command can resolve before the queue is done.
  const app = window.jupyterapp;
  const panel = app.shell.currentWidget;
  app.commands.execute('notebook:run-all-cells');
  const sleep = ms => new Promise(r => setTimeout(r, ms));
  const done = () => {
    let allRan = true, failed = false;
    panel.content.widgets.forEach(cell => {
      const json = cell.model.toJSON();
      if (json.cell_type !== 'code' || !json.source.trim()) return;
      if (json.execution_count === null) allRan = false;
      const tags = (json.metadata && json.metadata.tags) || [];
      if (!tags.includes('raises-exception')
          && (json.outputs || []).some(o => o.output_type === 'error')) failed = true;
    });
    return (allRan || failed) && panel.sessionContext.session.kernel.status === 'idle';
  };
  const deadline = Date.now() + timeoutMs;
  let stable = 0;
  await sleep(500);
  while (Date.now() < deadline) {
    stable = done() ? stable + 1 : 0;
    if (stable >= 3) return true;
    await sleep(200);
  }
  return false;
}"""

CELL_ERRORS = """() => {
  const nb = window.jupyterapp.shell.currentWidget.content;
  const found = [];
  nb.widgets.forEach((cell, index) => {
    const json = cell.model.toJSON();
    if (json.cell_type !== 'code') return;
    const tags = (json.metadata && json.metadata.tags) || [];
    for (const output of json.outputs || []) {
      if (output.output_type === 'error' && !tags.includes('raises-exception'))
        found.push(`cell ${index}: ${output.ename}: ${output.evalue}`);
    }
    if (json.execution_count === null && json.source.trim()) found.push(`cell ${index} did not run`);
  });
  return found;
}"""


def open_notebook(page, lab, rel: str) -> None:
    # A workspace of its own, so no tab of an earlier test is restored next to it.
    page.goto(lab.url(f"lab/workspaces/{Path(rel).stem}/tree/{rel}"))
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell.currentWidget", timeout=60_000)
    # A kernel-select dialog can only appear if the notebook's kernel is unknown; accept the default.
    accept = page.locator(".jp-Dialog-button.jp-mod-accept")
    if accept.count():
        accept.first.click()
    page.wait_for_function(KERNEL_READY, timeout=90_000, polling=200)


def write_and_run(page, lab, name: str, cells: list[str], timeout_ms: int = 120_000):
    """Write ``cells`` as the notebook ``name`` into the server's copy of the course, open it and run it
    all (no cell may raise); the notebook's cell locator, one cell per source."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, lab.root / name)
    open_notebook(page, lab, name)
    assert page.evaluate(RUN_ALL, timeout_ms), f"{name} did not finish"
    errors = page.evaluate(CELL_ERRORS)
    assert not errors, f"{name}: " + "; ".join(errors)
    panel = page.evaluate("() => window.jupyterapp.shell.currentWidget.id")
    located = page.locator(f"[id='{panel}'] .jp-Notebook .jp-Cell")
    assert located.count() == len(cells), f"{name}: {located.count()} cells shown of {len(cells)}"
    return located


def run_cells(page, lab, name: str, cells: list[str], timeout_ms: int = 120_000):
    """:func:`write_and_run`, then the last cell's first output once its explorer shows a figure."""
    output = write_and_run(page, lab, name, cells, timeout_ms).last.locator(".jp-OutputArea-output").first
    output.locator(".widget-output img").first.wait_for(state="visible", timeout=30_000)
    return output


def figure_src(output) -> str:
    """The ``src`` of the first figure in an explorer's ``Output`` (a ``data:image/png;base64,`` URL)."""
    return output.locator(".widget-output img").first.get_attribute("src")


def png_pixels(data: bytes) -> np.ndarray:
    """A PNG's decoded RGBA pixels, ``(height, width, 4)``."""
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGBA"))


def shown_pixels(output) -> tuple[str, np.ndarray]:
    """The explorer's figure as it is shown: its ``src`` and decoded pixels."""
    src = figure_src(output)
    head, _, data = src.partition(",")
    assert head == "data:image/png;base64", f"the figure is not an inline PNG: {src[:60]!r}"
    return src, png_pixels(base64.b64decode(data))
