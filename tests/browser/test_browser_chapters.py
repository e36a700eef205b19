"""Every solution notebook, run in a real JupyterLab in headless Chromium: its explorers render as
real widgets and respond to the slider.

For each ``solutions/NN_*.ipynb`` the test opens the notebook, waits until its kernel is really
connected and idle (``sessionContext.isReady``, ``connectionStatus == "connected"``, ``status ==
"idle"``: the status indicator can read idle before that), runs all cells, and checks:

- no cell raised, except those tagged ``raises-exception``;
- every explorer (a code cell calling ``*_explorer(...)``; each chapter has one) renders inside its
  output area as a widget with its figure (``.widget-output img``), neither "Loading widget..." nor a
  text repr such as ``IntSlider(value=3)``;
- moving a slider of the explorer (focused ``.noUi-handle`` + arrow keys) changes its figure or a
  label it drives; an explorer without a slider (chapter 5's sentence box) has a dropdown changed instead.

A PNG screenshot of each explorer is saved under the test's temp dir and copied to
``build/test-artifacts/`` when the test fails.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from browser_support import CELL_ERRORS, RUN_ALL, keep_page_screenshot, open_notebook

from utils.build import NOTEBOOK_GLOB

REPO = Path(__file__).resolve().parents[2]
SOLUTIONS = sorted((REPO / "solutions").glob(NOTEBOOK_GLOB))
EXPLORER_CALL = re.compile(r"^[^#\n]*\b\w*explorer\s*\(", re.M)
TEXT_REPR = re.compile(r"\b(?:Int|Float|Selection)?(?:Slider|Dropdown|ToggleButtons|VBox|HBox|Output)\(")
RUN_TIMEOUT_MS = 180_000

pytestmark = [pytest.mark.browser, pytest.mark.slow]

def explorer_cells(path: Path) -> list[int]:
    nb = nbformat.read(path, as_version=4)
    return [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code" and EXPLORER_CALL.search(cell.source)]


def test_every_solution_has_an_explorer():
    assert SOLUTIONS
    for path in SOLUTIONS:
        assert explorer_cells(path), f"{path.name} has no explorer cell (a call of a *_explorer function)"


def figure_and_labels(output) -> tuple[list[str], list[str]]:
    srcs = output.locator(".widget-output img").evaluate_all("imgs => imgs.map(i => i.src)")
    labels = output.locator(".widget-readout, .widget-label, .widget-html-content").evaluate_all(
        "els => els.map(e => e.innerText)"
    )
    return srcs, labels


def enabled_handles(output):
    return output.locator(".widget-slider:not(.widget-slider-disabled) .noUi-target:not([disabled]) .noUi-handle")


def wait_for_figures(page, output) -> None:
    page.wait_for_function(
        "el => [...el.querySelectorAll('.widget-output img')].every(i => i.complete && i.naturalWidth > 0)",
        arg=output.element_handle(), timeout=30_000,
    )
    page.wait_for_timeout(300)


def settle(page, output) -> tuple:
    """The figure sources and labels once they stayed the same for a second (a redraw per key press)."""
    settled, last = 0, None
    for _ in range(60):
        current = figure_and_labels(output)
        settled = settled + 1 if current == last else 0
        if settled >= 4:
            break
        last = current
        page.wait_for_timeout(250)
    return current


def move_a_slider(page, output) -> tuple[tuple, tuple]:
    """Move the first enabled slider of ``output`` (enabling one via a toggle button if all are
    disabled; choosing the next option of its first dropdown if it has no slider at all) and return
    (before, after) figure sources and labels."""
    if enabled_handles(output).count() == 0:
        toggles = output.locator(".widget-toggle-button:not(.mod-active):not([disabled])")
        for i in range(toggles.count()):
            toggles.nth(i).click()
            page.wait_for_timeout(300)
            if enabled_handles(output).count():
                break
    handles = enabled_handles(output)
    dropdowns = output.locator(".widget-dropdown select:not([disabled])")
    assert handles.count() > 0 or dropdowns.count() > 0, "the explorer has no slider or dropdown that can be moved"
    wait_for_figures(page, output)
    before = figure_and_labels(output)
    if handles.count() == 0:
        select = dropdowns.first
        options = select.locator("option").evaluate_all("os => os.map(o => o.value)")
        current = select.input_value()
        select.select_option(options[(options.index(current) + 1) % len(options)])
    else:
        handle = handles.first
        handle.scroll_into_view_if_needed()
        handle.focus()
        for _ in range(3):
            handle.press("ArrowRight")
    figure_changed = """([el, before]) => {
      const srcs = [...el.querySelectorAll('.widget-output img')].map(i => i.src);
      return srcs.length > 0 && JSON.stringify(srcs) !== JSON.stringify(before);
    }"""
    try:
        page.wait_for_function(figure_changed, arg=[output.element_handle(), before[0]], timeout=20_000)
    except Exception:
        pass  # a label may still have changed; judged below
    return before, settle(page, output)  # the figure must stay the same for a second


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_explorers_render_and_respond(lab, lab_page, path, tmp_path):
    page = lab_page
    rel = path.relative_to(REPO).as_posix()
    served = lab.root / rel  # the server's copy, taken when it started
    explorers = explorer_cells(served)
    screenshot = tmp_path / f"lab-{path.stem}.png"
    try:
        open_notebook(page, lab, rel)
        page.evaluate(RUN_ALL, RUN_TIMEOUT_MS)
        errors = page.evaluate(CELL_ERRORS)
        assert not errors, f"{rel}: " + "; ".join(errors)
        panel = page.evaluate("() => window.jupyterapp.shell.currentWidget.id")
        cells = page.locator(f"[id='{panel}'] .jp-Notebook .jp-Cell")
        assert cells.count() == len(nbformat.read(served, as_version=4).cells)
        for index in explorers:
            output = cells.nth(index).locator(".jp-OutputArea-output").first
            output.scroll_into_view_if_needed()
            try:
                output.locator(".jupyter-widgets .widget-output img").first.wait_for(state="visible", timeout=30_000)
            except Exception:
                text = output.inner_text()
                assert "Loading widget" not in text, f"cell {index}: the widget manager did not render the explorer"
                assert not TEXT_REPR.search(text), f"cell {index}: the explorer shows as a text repr: {text[:200]!r}"
                raise AssertionError(f"cell {index}: no widget with a figure in the output: {text[:200]!r}") from None
            text = output.inner_text()
            assert "Loading widget" not in text, f"cell {index}: the widget manager did not render the explorer"
            assert not TEXT_REPR.search(text), f"cell {index}: the explorer shows as a text repr: {text[:200]!r}"
            before, after = move_a_slider(page, output)
            output.screenshot(path=str(screenshot))
            assert after != before, f"cell {index}: moving the slider changed neither the figure nor a label"
            assert after[0], f"cell {index}: the explorer's figure disappeared after moving the slider"
        assert page.errors == [], f"JavaScript errors: {page.errors}"
    except BaseException:
        keep_page_screenshot(page, screenshot)
        raise
