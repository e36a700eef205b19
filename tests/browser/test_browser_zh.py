"""The Chinese edition in a real JupyterLab, started the way ``make lab-zh`` starts it.

``python -m utils.lab --lang zh`` runs with its own work folder (filled from ``solutions/zh/``, so that
every cell runs without an exercise stub raising; ``make lab-zh`` copies ``chapters/zh/`` the same
way), its token from ``COURSE_LAB_TOKEN``, and Jupyter's directories isolated as in conftest.py. The
test opens chapter 1 in headless Chromium and checks that:

- JupyterLab's own interface is Chinese (the menu bar reads 文件, 编辑, ...: the language pack is active);
- the hanzi really render: two different menu labels give different pixels (a missing CJK font
  draws every character as the same empty box, "tofu");
- the notebook runs top to bottom without an error, and its explorer responds to the slider;
- the explorer's labels contain Chinese (the widgets translate them with ``tr()``).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from browser_support import CELL_ERRORS, RUN_ALL, keep_artifact, open_notebook, png_pixels
from test_browser_chapters import EXPLORER_CALL, figure_and_labels, move_a_slider

from conftest import SETTINGS, STARTUP_TIMEOUT_S, Lab, free_port

REPO = Path(__file__).resolve().parents[2]
CHAPTER = "01_queries_keys_values.ipynb"
HANZI = re.compile(r"[\u4e00-\u9fff]")
RUN_TIMEOUT_MS = 180_000

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def lab_zh(tmp_path_factory):
    """``python -m utils.lab --lang zh`` on a free port, serving its own Chinese work folder."""
    top = tmp_path_factory.mktemp("lab-zh")
    dirs = {name: top / name for name in ("config", "runtime", "data", "settings", "workspaces", "ipython")}
    for folder in dirs.values():
        folder.mkdir()
    for rel, values in SETTINGS.items():
        target = dirs["settings"] / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(values))
    work, token, port = top / "work" / "zh", secrets.token_hex(16), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER")}
    env.update(
        COURSE_LAB_TOKEN=token, JUPYTER_CONFIG_DIR=str(dirs["config"]), JUPYTER_RUNTIME_DIR=str(dirs["runtime"]),
        JUPYTER_DATA_DIR=str(dirs["data"]), JUPYTERLAB_SETTINGS_DIR=str(dirs["settings"]),
        JUPYTERLAB_WORKSPACES_DIR=str(dirs["workspaces"]), IPYTHONDIR=str(dirs["ipython"]),
        PYTHONHASHSEED="0", MPLBACKEND="module://matplotlib_inline.backend_inline",
        # the kernels import this checkout's utils (the work folder is outside it), ahead of any other path
        PYTHONPATH=os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
    )
    command = [sys.executable, "-m", "utils.lab", "--lang", "zh", "--port", str(port), "--work", str(work),
               "--chapters", str(REPO / "solutions" / "zh"), "--no-browser", "--LabApp.expose_app_in_browser=True"]
    log = top / "lab.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    server = Lab(work, port, token, process, log)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if process.poll() is not None:
                pytest.fail(f"utils.lab --lang zh exited with {process.returncode}:\n{log.read_text()[-3000:]}",
                            pytrace=False)
            try:
                server.api("status")
                break
            except (urllib.error.URLError, ConnectionError, OSError):
                if time.monotonic() > deadline:
                    pytest.fail(f"no answer in {STARTUP_TIMEOUT_S} s:\n{log.read_text()[-3000:]}", pytrace=False)
                time.sleep(0.5)
        yield server
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)  # the wrapper passes it on; the server stops its kernels
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)


def label_pixels(locator, tmp_path: Path, name: str) -> np.ndarray:
    path = tmp_path / name
    locator.screenshot(path=str(path))
    keep_artifact(path)
    return png_pixels(path.read_bytes())


def test_chinese_chapter_runs_in_a_chinese_jupyterlab(lab_zh, browser_context, tmp_path):
    page = browser_context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    screenshot = tmp_path / "lab-zh-01.png"
    try:
        open_notebook(page, lab_zh, CHAPTER)
        menus = page.locator(".lm-MenuBar-itemLabel")
        labels = menus.evaluate_all("els => els.map(e => e.innerText)")
        assert "文件" in labels and "编辑" in labels, f"the menu bar is not Chinese: {labels}"

        # Tofu check: with no CJK font every hanzi is the same box, so 文件 and 编辑 would look alike.
        file_menu = label_pixels(menus.nth(labels.index("文件")), tmp_path, "lab-zh-menu-file.png")
        edit_menu = label_pixels(menus.nth(labels.index("编辑")), tmp_path, "lab-zh-menu-edit.png")
        assert file_menu.shape != edit_menu.shape or not np.array_equal(file_menu, edit_menu), (
            "文件 and 编辑 render identically: Chromium has no CJK font (apt-get install fonts-noto-cjk)"
        )
        ink = (file_menu[..., :3].astype(int).sum(-1) < 384).mean()
        assert ink > 0.02, f"the 文件 label shows almost no ink ({ink:.3f}): nothing drawn"

        heading = page.locator(".jp-MarkdownCell h1").first
        assert HANZI.search(heading.inner_text()), f"chapter 1's heading is not Chinese: {heading.inner_text()!r}"

        assert page.evaluate(RUN_ALL, RUN_TIMEOUT_MS), "the notebook did not finish"
        cell_errors = page.evaluate(CELL_ERRORS)
        assert not cell_errors, "; ".join(cell_errors)

        panel = page.evaluate("() => window.jupyterapp.shell.currentWidget.id")
        cells = page.locator(f"[id='{panel}'] .jp-Notebook .jp-Cell")
        sources = page.evaluate("""() => window.jupyterapp.shell.currentWidget.content.widgets
            .map(c => c.model.toJSON()).map(j => j.cell_type === 'code' ? j.source : '')""")
        explorer = next(i for i, source in enumerate(sources) if EXPLORER_CALL.search(source))
        output = cells.nth(explorer).locator(".jp-OutputArea-output").first
        output.scroll_into_view_if_needed()
        output.locator(".jupyter-widgets .widget-output img").first.wait_for(state="visible", timeout=30_000)
        before, after = move_a_slider(page, output)
        output.screenshot(path=str(screenshot))
        keep_artifact(screenshot)
        assert after != before, "moving the slider changed neither the figure nor a label"
        assert after[0], "the explorer's figure disappeared after moving the slider"
        assert errors == [], f"JavaScript errors: {errors}"
        texts = figure_and_labels(output)[1]
    except BaseException:
        try:
            page.screenshot(path=str(screenshot), full_page=False)
        finally:
            if screenshot.exists():
                keep_artifact(screenshot)
        raise
    finally:
        page.close()
    assert any(HANZI.search(text) for text in texts), f"the explorer's labels are English: {texts[:6]}"
