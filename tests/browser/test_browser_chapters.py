"""Every chapter's explorer in a real JupyterLab in headless Chromium: each renders as a real widget and
responds to its slider.

One notebook, :data:`EXPLORERS_NOTEBOOK`, is written into the server's copy of the course (as
``browser_support.write_and_run`` does), opened once and run once for the whole module (one kernel start):
a setup cell (torch on one thread, seeded), then one cell per explorer that no focused Lab test drives
(``EXPLORERS``: the cells of tests/explorer_cells.py, which the unit tests build too; chapter 1's
``qkv_explorer``, 2's ``scale_explorer``, 3's ``head_explorer``, 4's ``positional_explorer``, 5's
``attention_explorer`` over a seeded, untrained ``TinyEncoderClassifier``, 6's ``window_explorer``).
The other three have focused Lab tests of their own: test_browser_new_explorers.py
(``mask_polarity_explorer``, ``sentence_explorer``) and test_browser_kv_cache.py (``kv_cache_explorer``).
tests/test_lab_coverage.py, in the unit stage, fails when a chapter calls an explorer that none of these
drives. For each explorer (one test each) it checks:

- no cell raised, and the notebook shows every cell;
- the explorer renders inside its output area as a widget with its figure (``.widget-output img``),
  neither "Loading widget..." nor a text repr such as ``IntSlider(value=3)``;
- moving a slider of the explorer (focused ``.noUi-handle`` + arrow keys; a toggle button first when
  every slider is disabled) changes its figure or a label it drives (the slider's own readout does not
  count: it changes with nothing wired), and the figure stays; an explorer without a slider has a
  dropdown changed instead;
- no JavaScript error on the page.

A PNG screenshot of the explorer is saved under the test's temp dir, and the page is copied to
``build/test-artifacts/`` when a test fails.

``test_every_solution_has_an_explorer`` checks that each English chapter still has an explorer cell.

Whole chapters no longer run here. They did: Run All of each ``solutions/NN_*.ipynb``, about ten minutes
of a loaded machine (chapter 6 trains a decoder, chapter 5 a classifier) only to reach these cells; the
explorers notebook takes under a minute. Whole chapters run top to bottom elsewhere: strictly in a
kernel (nbval on ``solutions/`` and ``solutions/zh/``), in Binder's environment (tests/test_binder_env.py,
every ``chapters/`` notebook), and once in a real JupyterLab (test_browser_zh.py: the Chinese chapter 1,
Run All, its explorer moved with :func:`move_a_slider`).
What this file adds is the widget front end of every explorer, which only a browser shows.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from browser_support import EXPLORER_CALL, keep_page_screenshot, write_and_run
from explorer_cells import CELLS as EXPLORERS
from explorer_cells import SETUP

from utils.build import NOTEBOOK_GLOB

REPO = Path(__file__).resolve().parents[2]
SOLUTIONS = sorted((REPO / "solutions").glob(NOTEBOOK_GLOB))
TEXT_REPR = re.compile(r"\b(?:Int|Float|Selection)?(?:Slider|Dropdown|ToggleButtons|VBox|HBox|Output)\(")
RUN_TIMEOUT_MS = 180_000
EXPLORERS_NOTEBOOK = "browser_chapter_explorers.ipynb"
pytestmark = [pytest.mark.browser, pytest.mark.slow]

def explorer_cells(path: Path) -> list[int]:
    nb = nbformat.read(path, as_version=4)
    return [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code" and EXPLORER_CALL.search(cell.source)]


def test_every_solution_has_an_explorer():
    assert SOLUTIONS
    for path in SOLUTIONS:
        assert explorer_cells(path), f"{path.name} has no explorer cell (a call of a *_explorer function)"


def figure_and_labels(output) -> tuple[list[str], list[str]]:
    """The sources of the explorer's figures and the texts of its labels and captions. A slider's own
    readout is left out: moving the slider changes it even when nothing is wired to the slider."""
    srcs = output.locator(".widget-output img").evaluate_all("imgs => imgs.map(i => i.src)")
    labels = output.locator(".widget-label, .widget-html-content").evaluate_all(
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



def check_renders(output, what: str) -> None:
    """The explorer in ``output`` is a widget with a figure: no "Loading widget...", no text repr."""
    output.scroll_into_view_if_needed()
    try:
        output.locator(".jupyter-widgets .widget-output img").first.wait_for(state="visible", timeout=30_000)
        shown = True
    except Exception:  # Playwright's timeout: the assertions below say what shows instead
        shown = False
    text = output.inner_text()
    assert "Loading widget" not in text, f"{what}: the widget manager did not render the explorer"
    assert not TEXT_REPR.search(text), f"{what}: the explorer shows as a text repr: {text[:200]!r}"
    assert shown, f"{what}: no widget with a figure in the output: {text[:200]!r}"


@pytest.fixture(scope="module")
def explorers_page(lab, browser_context, tmp_path_factory):
    """The explorers notebook, opened and run once for the module: ``(page, cells)``, ``cells`` the
    notebook's cell locator (cell 0 the setup, then :data:`EXPLORERS` in order)."""
    page = browser_context.new_page()
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    try:
        try:
            cells = write_and_run(page, lab, EXPLORERS_NOTEBOOK, [SETUP, *EXPLORERS.values()], RUN_TIMEOUT_MS)
        except BaseException:
            keep_page_screenshot(page, tmp_path_factory.mktemp("explorers") / "lab-explorers-run.png")
            raise
        yield page, cells
    finally:
        page.close()
        lab.shutdown_sessions()


@pytest.mark.parametrize("name", EXPLORERS)
def test_explorer_renders_and_responds(explorers_page, name, tmp_path):
    page, cells = explorers_page
    index = 1 + list(EXPLORERS).index(name)
    output = cells.nth(index).locator(".jp-OutputArea-output").first
    screenshot = tmp_path / f"lab-{name}.png"
    try:
        check_renders(output, name)
        before, after = move_a_slider(page, output)
        output.screenshot(path=str(screenshot))
        assert after != before, f"{name}: moving the slider changed neither the figure nor a label"
        assert after[0], f"{name}: the explorer's figure disappeared after moving the slider"
        assert page.errors == [], f"JavaScript errors: {page.errors}"
    except BaseException:
        try:
            output.scroll_into_view_if_needed(timeout=5_000)  # the page's screenshot shows the explorer
        finally:
            keep_page_screenshot(page, screenshot)
        raise
