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

import os
import secrets
import sys
from pathlib import Path

import numpy as np
import pytest
from browser_support import CELL_ERRORS, RUN_ALL, keep_artifact, keep_page_screenshot, open_notebook, png_pixels
from i18n_support import HAN
from test_browser_chapters import EXPLORER_CALL, figure_and_labels, move_a_slider

from conftest import free_port, isolated_jupyter_env, running_lab

REPO = Path(__file__).resolve().parents[2]
CHAPTER = "01_queries_keys_values.ipynb"
RUN_TIMEOUT_MS = 180_000

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def lab_zh(tmp_path_factory):
    """``python -m utils.lab --lang zh`` on a free port, serving its own Chinese work folder."""
    top = tmp_path_factory.mktemp("lab-zh")
    work, token, port = top / "work" / "zh", secrets.token_hex(16), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER")}
    env.update(
        isolated_jupyter_env(top), COURSE_LAB_TOKEN=token,
        # the kernels import this checkout's utils (the work folder is outside it), ahead of any other path
        PYTHONPATH=os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
    )
    command = [sys.executable, "-m", "utils.lab", "--lang", "zh", "--port", str(port), "--work", str(work),
               "--chapters", str(REPO / "solutions" / "zh"), "--no-browser", "--LabApp.expose_app_in_browser=True"]
    with running_lab(command, cwd=REPO, env=env, root=work, port=port, token=token, log=top / "lab.log",
                     what="utils.lab --lang zh", group=True) as server:
        yield server


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
        assert HAN.search(heading.inner_text()), f"chapter 1's heading is not Chinese: {heading.inner_text()!r}"

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
        keep_page_screenshot(page, screenshot)
        raise
    finally:
        page.close()
    assert any(HAN.search(text) for text in texts), f"the explorer's labels are English: {texts[:6]}"
