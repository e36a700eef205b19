"""The static HTML edition (``make html``, utils/html.py) renders offline in a real browser.

The edition is built into a temp dir from the solution notebooks and ``node_modules`` (``npm ci``).
Chromium then opens the index and every chapter with all network blocked: any request that is not for
a local file fails the test (a CDN script, a badge image, a web font). On each chapter page a figure
and the explorer render: the widget embedder ran, the explorer's controls are real widgets, and the
figure inside its Output widget is an image that loaded.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from browser_support import chromium_context, keep_artifact

from utils.build import NOTEBOOK_GLOB
from utils.html import NODE_MODULES, build_html

REPO = Path(__file__).resolve().parent.parent
SOLUTIONS = sorted((REPO / "solutions").glob(NOTEBOOK_GLOB))

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def edition(tmp_path_factory):
    if not (NODE_MODULES / "@jupyter-widgets" / "html-manager").is_dir():
        pytest.fail("node_modules is missing: run `npm ci` (make html and make test do)", pytrace=False)
    out = tmp_path_factory.mktemp("html")
    build_html(out, log=lambda *_: None)
    return out


@pytest.fixture
def offline_page(tmp_path):
    """A page whose every non-file request is aborted and recorded in ``page.blocked``."""
    with chromium_context(tmp_path / "profile") as context:
        blocked: list[str] = []

        def route(route):
            if route.request.url.startswith("file:"):
                route.continue_()
            else:
                blocked.append(route.request.url)
                route.abort()

        context.route("**/*", route)
        page = context.new_page()
        page.on(
            "request",
            lambda request: (
                None if request.url.startswith(("file:", "data:", "blob:")) else blocked.append(request.url)
            ),
        )
        page.blocked = blocked
        page.errors = []
        page.on("pageerror", lambda error: page.errors.append(str(error)))
        yield page




def test_index_lists_every_chapter(edition, offline_page):
    page = offline_page
    page.goto((edition / "index.html").as_uri())
    links = page.locator("ol.chapters a")
    assert links.count() == len(SOLUTIONS)
    for i, path in enumerate(SOLUTIONS):
        assert links.nth(i).get_attribute("href") == f"{path.stem}.html"
        title = nbformat.read(path, as_version=4).cells[0].source.splitlines()[0].lstrip("# ").strip()
        assert links.nth(i).inner_text().strip() == title
    links.first.click()
    page.wait_for_url(re.compile(re.escape(SOLUTIONS[0].stem) + r"\.html$"))
    assert page.blocked == [], f"network requests attempted: {page.blocked}"


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_chapter_renders_offline(edition, offline_page, path, tmp_path):
    page = offline_page
    page.goto((edition / f"{path.stem}.html").as_uri())
    screenshot = tmp_path / f"html-{path.stem}.png"
    try:
        # A static figure: a matplotlib PNG in an output area, loaded.
        figure = page.locator(".jp-OutputArea-output img").first
        figure.wait_for(state="visible", timeout=10_000)
        assert figure.evaluate("img => img.complete && img.naturalWidth > 100")
        # The widget embedder replaced the widget views: real controls, no "Loading widget..." text.
        page.wait_for_selector(".widget-output img", timeout=20_000)
        explorer_figure = page.locator(".widget-output img").first
        explorer_figure.scroll_into_view_if_needed()
        page.wait_for_function(
            "() => [...document.querySelectorAll('.widget-output img')].some(i => i.complete && i.naturalWidth > 100)",
            timeout=10_000,
        )
        controls = page.locator(".widget-slider, .widget-dropdown, .widget-toggle-buttons")
        assert controls.count() >= 1, "the explorer's controls did not render as widgets"
        assert "Loading widget" not in page.inner_text("body")
        # MathJax (shipped locally) typeset the LaTeX.
        page.wait_for_selector(".MathJax_CHTML, mjx-container", state="attached", timeout=20_000)
        page.screenshot(path=str(screenshot))
        assert page.errors == [], f"JavaScript errors: {page.errors}"
        assert page.blocked == [], f"network requests attempted: {page.blocked}"
    except BaseException as exc:
        page.screenshot(path=str(screenshot))
        keep_artifact(screenshot)
        if page.blocked:
            raise AssertionError(f"network requests attempted (blocked): {page.blocked}") from exc
        raise
