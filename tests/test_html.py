"""The static HTML edition (``make html``, utils/html.py and utils/htmlbook/).

Unit tests (no browser): the README's chapter table is the index's one source and agrees with the
notebooks; the explorer block and the book's parts are well formed.

Browser tests (``-m browser``): the edition is built from the solution notebooks and ``node_modules``
(``npm ci``) into a temp dir; executed chapters and their grids come from the committed ``html-cache/``.
Chromium then opens it with all network blocked (any request that is not for a local file fails the
test). On each chapter page: the figures, MathJax and the quiz widgets render, the setup cell is
folded, the sidebar lists the chapters and this chapter's sections, previous and next link the
neighbours, the explorer is labelled "precomputed", and the page opens within the budget. Moving a
slider and changing a dropdown shows the figure the explorer's state and figure functions give for
the new values (decoded pixels compared); with scripts off the saved figure still shows. Screenshots
at desktop and phone width are kept in build/test-artifacts/.
"""

from __future__ import annotations

import io
import json
import math
import re
from pathlib import Path
from urllib.parse import unquote, urlparse

import nbformat
import numpy as np
import pytest
from browser_support import chromium_context, keep_artifact
from PIL import Image

from utils.build import NOTEBOOK_GLOB
from utils.html import OPEN_BUDGET_S, SIZE_BUDGET_BYTES, build_html
from utils.htmlbook.assets import ASSETS, CJK_FONT_FACE, NODE_MODULES, cjk_font
from utils.htmlbook.book import (
    chapter_table,
    index_page,
    inline_markdown,
    localized_rows,
    pager,
    sections_of,
    sidebar,
)
from utils.htmlbook.chrome import CHROME, EDITION_LANGUAGES, page_href
from utils.htmlbook.explorers import WIDGET_STATE, WIDGET_VIEW, explorer_html, prune_widget_state
from utils.plotting.common import figure_png
from utils.widgets.grid import GRID_TIME_BUDGET_S, MAX_GRID_STATES

REPO = Path(__file__).resolve().parent.parent
SOLUTIONS = sorted((REPO / "solutions").glob(NOTEBOOK_GLOB))
SOLUTIONS_ZH = sorted((REPO / "solutions" / "zh").glob(NOTEBOOK_GLOB))
ROWS = chapter_table(REPO / "README.md")
# Under pytest-xdist `make browser` runs -n 2 --dist loadfile: the tests of this file share one worker,
# so the edition is built once (xdist_group marks no longer group with pytest 9.2, pytest-xdist#1386).


def pixels(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGBA"))


# --- one source for the chapter table ------------------------------------------------------------------

def test_the_readme_table_lists_every_notebook_with_the_time_its_header_states():
    assert [row.stem for row in ROWS] == [path.stem for path in SOLUTIONS]
    for row, path in zip(ROWS, SOLUTIONS):
        header = nbformat.read(path, as_version=4).cells[0].source
        title = header.splitlines()[0]
        # the README may mark a chapter "Bonus: ", and then capitalises the next word differently
        want = f"# Chapter {row.number} · {row.title.removeprefix('Bonus: ')}"
        assert title.lower() == want.lower(), (row, title)
        assert re.search(rf"^{re.escape(row.time)} · ", header, re.M), f"{path.name}: not {row.time!r}"


def test_the_index_page_carries_the_readme_table():
    page = index_page(ROWS)
    for row in ROWS:
        assert (f'<a href="{row.stem}.html">{row.title}</a></td><td class="book-time">{row.time}</td>'
                f"<td>{inline_markdown(row.goal)}</td>") in page


def test_inline_markdown_escapes_and_keeps_code():
    assert inline_markdown("a `<b>` c") == "a <code>&lt;b&gt;</code> c"


def test_sidebar_pager_and_sections():
    sections = sections_of('<h2 id="1.-One">1. One<a class="anchor-link" href="#1.-One">¶</a></h2>'
                           '<h2 id="Two">Two &amp; more</h2>')
    assert [(s.anchor, s.text) for s in sections] == [("1.-One", "1. One"), ("Two", "Two & more")]
    nav = sidebar(ROWS, ROWS[1].stem, sections)
    assert nav.count('<a href="0') == len(ROWS) and 'href="#Two">Two &amp; more' in nav
    assert f'<a href="{ROWS[1].stem}.html" aria-current="page">' in nav
    first, middle, last = pager(ROWS, ROWS[0].stem, "top"), pager(ROWS, ROWS[2].stem, "top"), pager(
        ROWS, ROWS[-1].stem, "bottom")
    assert 'href="index.html"' in first and f'href="{ROWS[1].stem}.html"' in first
    assert f'href="{ROWS[1].stem}.html"' in middle and f'href="{ROWS[3].stem}.html"' in middle
    assert "book-next" not in last


# --- two languages, a switch on every page ----------------------------------------------------------

def test_every_chapter_has_its_chinese_notebook_and_a_chinese_table_row():
    assert [p.stem for p in SOLUTIONS_ZH] == [p.stem for p in SOLUTIONS]
    rows = localized_rows(ROWS, [nbformat.read(p, as_version=4) for p in SOLUTIONS_ZH])
    assert [r.stem for r in rows] == [r.stem for r in ROWS] and [r.number for r in rows] == [r.number for r in ROWS]
    for row in rows:
        assert re.search(r"[\u4e00-\u9fff]", row.title) and ("分钟" in row.time or "小时" in row.time), row


def test_the_switch_links_the_same_page_in_the_other_language():
    assert page_href("03_x", "zh", "en") == "zh/03_x.html" and page_href("03_x", "en", "zh") == "../03_x.html"
    for lang, other, href in (("en", "zh", f"zh/{ROWS[1].stem}.html"), ("zh", "en", f"../{ROWS[1].stem}.html")):
        top = pager(ROWS, ROWS[1].stem, "top", lang)
        link = re.search(r'<div class="book-lang"><a class="book-lang-link" href="([^"]+)" hreflang="([^"]+)"', top)
        assert link and link.groups() == (href, CHROME[other].html_lang), top
        assert "book-lang" not in pager(ROWS, ROWS[1].stem, "bottom", lang)
    assert 'href="zh/index.html"' in index_page(ROWS) and 'href="../index.html"' in index_page(ROWS, "zh", "../static")


def test_chinese_chrome():
    page = index_page(ROWS, "zh", "../static")
    assert page.startswith('<!DOCTYPE html>\n<html lang="zh-CN">') and "<summary>目录</summary>" in page
    assert '<link rel="stylesheet" href="../static/book.css">' in page and ">预先计算<" in page
    nav = sidebar(ROWS, ROWS[0].stem, lang="zh")
    assert 'aria-label="章节"' in nav and "一步一步学注意力" in nav and "Contents" not in nav
    assert "← 目录" in pager(ROWS, ROWS[0].stem, "top", "zh")
    block = explorer_html(manifest(), "e", "x", lang="zh")
    assert ">预先计算<" in block and "滑块只停在已渲染的取值上" in block and ">precomputed<" not in block


def fake_node_modules(folder: Path) -> Path:
    """Empty stand-ins for what copy_assets takes from npm (the pages are read as text here)."""
    for source in ASSETS:
        target = folder / source
        if "." in Path(source).name:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("")
        else:
            target.mkdir(parents=True, exist_ok=True)
            (target / "x.js").write_text("")
    return folder


def tiny_course(root: Path) -> Path:
    """A README with a two-chapter table and both chapters in English and Chinese."""
    (root / "solutions" / "zh").mkdir(parents=True)
    (root / "utils").mkdir()
    (root / "README.md").write_text("# x\n\n## Chapters\n| # | chapter | time | goal |\n|---|---|---|---|\n"
                                    "| 1 | [One](solutions/01_one.ipynb) | ~5 min | count |\n"
                                    "| 2 | [Two](solutions/02_two.ipynb) | ~6 min | add |\n")
    for number, (en, zh) in enumerate([("One", "一"), ("Two", "二")], start=1):
        stem = f"0{number}_{en.lower()}"
        zh_header = f"# 第 {number} 章 · 第{zh}章\n\n约 {4 + number} 分钟 · 走"
        for folder, header in ((root / "solutions", f"# Chapter {number} · {en}\n\n~{4 + number} min · go"),
                               (root / "solutions" / "zh", zh_header)):
            nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(header),
                                                 nbformat.v4.new_markdown_cell("## A section"),
                                                 nbformat.v4.new_code_cell("print(1 + 1)")])
            nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
            nbformat.write(nb, folder / f"{stem}.ipynb")
    return root


def test_both_languages_are_built_and_every_page_switches_to_its_twin(tmp_path):
    root = tiny_course(tmp_path / "course")
    out = tmp_path / "html"
    pages = build_html(out, root=root, node_modules=fake_node_modules(tmp_path / "npm"), cache=tmp_path / "cache",
                       jobs=1, log=lambda *_: None)
    names = ["01_one.html", "02_two.html", "index.html"]
    assert [p.relative_to(out).as_posix() for p in pages] == names + [f"zh/{n}" for n in names]
    for page in pages:
        text = page.read_text(encoding="utf-8")
        lang = "zh" if page.parent.name == "zh" else "en"
        other = EDITION_LANGUAGES[1 - EDITION_LANGUAGES.index(lang)]
        assert text.count('class="book-lang-link"') == 1, f"{page}: no language switch"
        href = re.search(r'class="book-lang-link" href="([^"]+)"', text)[1]
        assert (page.parent / href).resolve() == (out / ("zh" if other == "zh" else "") / page.name).resolve()
        assert (page.parent / href).is_file()
        assert re.search(rf'<html lang="{CHROME[lang].html_lang}"', text), page
        assert f"<summary>{CHROME[lang].contents}</summary>" in text
        for css in re.findall(r'href="([^"]+\.css)"', text):
            assert (page.parent / css).is_file(), f"{page}: {css} does not resolve"
        chapters = re.findall(r'<ol class="book-chapters">(.*?)</ol></details>', text, re.S)[0]
        assert re.findall(r'<a href="([^"#]+)"', chapters) == ["01_one.html", "02_two.html"]
    zh_page = (out / "zh" / "01_one.html").read_text(encoding="utf-8")
    assert "第一章" in zh_page and "环境设置" not in zh_page  # no setup cell in the tiny course
    assert 'href="../static/book.css"' in zh_page and "← 目录" in zh_page
    assert "第二章" in (out / "zh" / "index.html").read_text(encoding="utf-8")
    assert (out / "static" / "fonts.css").is_file() and not (out / "zh" / "static").exists()


def test_the_pages_declare_the_course_cjk_font_offline():
    font = cjk_font()
    if font is None:
        pytest.skip("utils.plotting.fonts (the course's CJK font) is not in this tree yet")
    from utils.htmlbook.assets import fonts_css

    css = fonts_css(font.name)
    assert f'font-family: "{CJK_FONT_FACE}"; src: url("fonts/{font.name}")' in css
    assert f', "{CJK_FONT_FACE}"; --jp-ui-font-family' in css  # after the Latin fonts


def manifest(note=None, free_text=False):
    return {
        "controls": [
            {"name": "n", "kind": "slider", "description": "n", "values": [1, 2], "labels": ["1", "2"],
             "initial": 1, "track": [0, 1, 1], "positions": [0.0, 1.0], "free_text": False},
            {"name": "s", "kind": "select", "description": "sentence", "values": ["a b", "c d"],
             "labels": ["a b", "c d"], "initial": 0, "track": None, "positions": None, "free_text": free_text},
        ],
        "states": [[0, 0, None, []], [1, 0, None, []], [2, 1, None, [1]], [3, 1, None, []]],
        "images": ["a.webp", "b.webp", "c.webp", "d.webp"], "captions": [["<b>x</b>"], ["y"]],
        "renders": 4, "render_s": 0.1, "note": note,
    }


def test_the_explorer_block_shows_the_saved_state_and_is_inert_without_its_script():
    block = explorer_html(manifest(), "explorers/ch", "explorer-1")
    assert 'data-initial-state="2"' in block and 'src="explorers/ch/c.webp"' in block  # n = 2, sentence "a b"
    assert block.count(" disabled") == 2 and "<noscript>" in block and ">precomputed<" in block
    assert '<div class="explorer-caption">y</div>' in block
    grid = json.loads(re.search(r'class="explorer-grid">(.*?)</script>', block)[1])
    assert grid["images"][3] == "explorers/ch/d.webp" and grid["states"][2][3] == [1]
    assert "explorer-note" not in block


def test_a_text_box_offered_as_choices_says_so_with_links_to_a_kernel():
    links = [("Colab", "https://colab.example/nb"), ("Binder", "https://binder.example/nb")]
    block = explorer_html(manifest("Typing your own needs a kernel.", free_text=True), "e", "x", links)
    assert re.search(r'<p class="explorer-note">Typing your own needs a kernel\. <a href="https://colab\.example/nb">'
                     r'Colab</a> · <a href="https://binder\.example/nb">Binder</a></p>', block)


def test_prune_widget_state_keeps_only_what_remaining_views_reach():
    state = {"box": {"state": {"children": ["IPY_MODEL_slider"]}}, "slider": {"state": {}},
             "quiz": {"state": {"children": ["IPY_MODEL_button"]}}, "button": {"state": {}}}
    nb = nbformat.v4.new_notebook(metadata={"widgets": {WIDGET_STATE: {"state": state}}})
    nb.cells.append(nbformat.v4.new_code_cell(outputs=[nbformat.v4.new_output(
        "display_data", data={WIDGET_VIEW: {"model_id": "quiz"}})]))
    assert prune_widget_state(nb) == 2 and sorted(nb.metadata.widgets[WIDGET_STATE].state) == ["button", "quiz"]


# --- the edition in Chromium ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def edition(tmp_path_factory):
    if not (NODE_MODULES / "@jupyter-widgets" / "html-manager").is_dir():
        pytest.fail("node_modules is missing: run `npm ci` (make html and make test do)", pytrace=False)
    out = tmp_path_factory.mktemp("html")
    build_html(out, log=lambda *_: None)
    return out


def _superseded(request) -> bool:
    """A local file whose load the page cancelled because it asked for another first (a slider moved on
    before its image arrived: ``net::ERR_ABORTED``). The file is there; a missing one fails otherwise."""
    path = Path(unquote(urlparse(request.url).path)) if request.url.startswith("file:") else None
    return bool(path and path.is_file() and (request.failure or "").endswith("ERR_ABORTED"))


@pytest.fixture
def offline_context(tmp_path):
    """Open pages with every non-file request aborted and recorded: ``open(context_options)`` gives a
    page with ``blocked`` and ``errors`` lists."""
    contexts = []

    def open_page(**options):
        manager = chromium_context(tmp_path / f"profile{len(contexts)}", **options)
        context = manager.__enter__()
        contexts.append(manager)
        blocked: list[str] = []

        def route(route):
            if route.request.url.startswith("file:"):
                route.continue_()
            else:
                blocked.append(route.request.url)
                route.abort()

        context.route("**/*", route)
        page = context.new_page()
        page.on("request", lambda r: None if r.url.startswith(("file:", "data:", "blob:")) else blocked.append(r.url))
        page.on("requestfailed", lambda r: None if _superseded(r) else blocked.append(f"failed: {r.url}"))
        page.blocked, page.errors = blocked, []
        page.on("pageerror", lambda error: page.errors.append(str(error)))
        return page

    yield open_page
    for manager in reversed(contexts):
        manager.__exit__(None, None, None)


# MathJax 2 typesets after the page's load event, and asks for its web fonts only when it lays them out:
# its "End" startup hook runs once the first typesetting is done (at once if it is done already).
MATHJAX_DONE = """() => { window.courseMathDone = !window.MathJax || !MathJax.Hub;
    if (!window.courseMathDone) MathJax.Hub.Register.StartupHook("End", () => { window.courseMathDone = true; }); }"""


def settle(page, timeout: int = 30_000) -> None:
    """Wait until a page of the edition has loaded what it loads by itself after its load event: MathJax
    done typesetting, the fonts that asks for, no request left. A test that measures the page, or leaves
    it, waits for this: leaving earlier aborts the font requests in flight, which ``offline_context``
    records as failed (seen at phone width on a busy 2-core machine)."""
    page.evaluate(MATHJAX_DONE)
    page.wait_for_function("() => window.courseMathDone === true", timeout=timeout)
    page.evaluate("() => document.fonts.ready.then(() => document.fonts.status)")
    page.wait_for_load_state("networkidle", timeout=timeout)


def shown_image(page, edition: Path, explorer) -> bytes:
    src = explorer.locator("img.explorer-figure").get_attribute("src")
    page.wait_for_function("img => img.complete && img.naturalWidth > 100", arg=explorer.locator(
        "img.explorer-figure").element_handle())
    return (edition / src).read_bytes()


@pytest.mark.browser
def test_index_carries_the_readme_table_and_links_every_chapter(edition, offline_context):
    page = offline_context()
    page.goto((edition / "index.html").as_uri())
    rows = page.locator("table.book-chapter-table tbody tr")
    assert rows.count() == len(ROWS)
    for i, row in enumerate(ROWS):
        cells = rows.nth(i).locator("td")
        assert [cells.nth(j).inner_text().strip() for j in range(4)] == [
            row.number, row.title, row.time, row.goal.replace("`", "")]
        assert cells.nth(1).locator("a").get_attribute("href") == f"{row.stem}.html"
    assert page.locator(".book-sidebar .book-chapters > li").count() == len(ROWS)
    settle(page)
    rows.first.locator("a").click()
    page.wait_for_url(re.compile(re.escape(ROWS[0].stem) + r"\.html$"))
    assert page.blocked == [], f"network requests attempted: {page.blocked}"


@pytest.mark.browser
@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_chapter_reads_like_a_book_offline(edition, offline_context, path, tmp_path):
    page = offline_context()
    page.goto((edition / f"{path.stem}.html").as_uri())
    screenshot = tmp_path / f"html-{path.stem}.png"
    try:
        # open: the page's text and figures are in, and its explorers answer (MathJax and the quiz
        # widgets may still be typesetting and rendering)
        page.wait_for_selector(".course-explorer[data-ready='true']", timeout=20_000)
        opened = page.evaluate("() => performance.getEntriesByName('course-explorers-ready')[0].startTime / 1000")
        assert opened < OPEN_BUDGET_S, f"the page took {opened:.2f} s to open (budget {OPEN_BUDGET_S} s)"
        # static figures, MathJax (shipped locally), the quiz widgets (the embedder, saved state)
        figure = page.locator(".jp-OutputArea-output img").first
        figure.wait_for(state="visible", timeout=10_000)
        page.wait_for_selector(".MathJax_CHTML, mjx-container", state="attached", timeout=20_000)
        page.wait_for_selector(".widget-button, .widget-radio-box, .widget-toggle-buttons", timeout=20_000)
        assert "Loading widget" not in page.inner_text("body")
        # the explorer: precomputed, wired, its figure loaded
        explorer = page.locator(".course-explorer").first
        assert explorer.locator(".explorer-precomputed").inner_text() == "precomputed"
        page.wait_for_selector(".course-explorer[data-ready='true']", timeout=5_000)
        assert shown_image(page, edition, explorer)
        # the setup cell is folded behind one "Setup" line
        setup = page.locator("details.course-setup")
        assert setup.count() == 1 and setup.get_attribute("open") is None
        assert setup.locator("summary").inner_text().startswith("Setup")
        assert not setup.locator(".jp-InputArea").is_visible()
        setup.locator("summary").click()
        assert setup.locator(".jp-InputArea").is_visible() and "import torch" in setup.inner_text()
        # the sidebar: every chapter, this one current, with its sections linking to its headings
        chapters = page.locator(".book-sidebar .book-chapters > li > a")
        assert chapters.count() == len(ROWS)
        assert page.locator(".book-sidebar a[aria-current='page']").get_attribute("href") == f"{path.stem}.html"
        sections = page.locator(".book-sidebar .book-sections a")
        headings = page.locator("main h2[id]")
        assert sections.count() == headings.count() >= 3
        for i in range(sections.count()):
            assert sections.nth(i).get_attribute("href") == "#" + headings.nth(i).get_attribute("id")
        # previous and next
        i = [row.stem for row in ROWS].index(path.stem)
        top = page.locator(".book-pager-top")
        want_prev = f"{ROWS[i - 1].stem}.html" if i else "index.html"
        assert top.locator("a[rel=prev]").get_attribute("href") == want_prev
        if i + 1 < len(ROWS):
            assert top.locator("a[rel=next]").get_attribute("href") == f"{ROWS[i + 1].stem}.html"
        else:
            assert top.locator("a[rel=next]").count() == 0
        page.screenshot(path=str(screenshot))
        keep_artifact(screenshot)
        assert page.errors == [], f"JavaScript errors: {page.errors}"
        assert page.blocked == [], f"network requests attempted: {page.blocked}"
    except BaseException:
        page.screenshot(path=str(screenshot))
        keep_artifact(screenshot)
        raise


def stem_of(number: int) -> str:
    return ROWS[number - 1].stem


def move_slider(explorer, name: str, value: str):
    """Move the page slider ``name`` to its stop labelled ``value`` (the track runs over the indices of the
    slider's grid values); return the slider."""
    grid = json.loads(explorer.locator("script.explorer-grid").inner_text())
    slider = explorer.locator(f"label:has-text('{name}') input[type=range]")
    slider.fill(str(grid["controls"][int(slider.get_attribute("data-control"))]["labels"].index(value)))
    return slider


@pytest.mark.browser
def test_moving_controls_shows_what_the_state_function_draws(edition, offline_context):
    """Chapter 3: a dropdown (H), a slider (head) and a dropdown (query token); then a head past H,
    which the wiring clamps as in a kernel."""
    from utils.explorers.multihead import head_explorer_state
    from utils.plotting.multihead import head_token_figure

    def expected(num_heads, head, token):
        state = head_explorer_state(num_heads, head, token)
        return pixels(figure_png(head_token_figure(state.weights, state.tokens, state.head, state.token)))

    page = offline_context()
    page.goto((edition / f"{stem_of(3)}.html").as_uri())
    explorer = page.locator(".course-explorer").first
    page.wait_for_selector(".course-explorer[data-ready='true']")
    np.testing.assert_array_equal(pixels(shown_image(page, edition, explorer)), expected(3, 0, 5))
    explorer.locator("label:has-text('heads H') select").select_option(label="6")
    move_slider(explorer, "head", "2")
    explorer.locator("label:has-text('query token') select").select_option(label="red")
    np.testing.assert_array_equal(pixels(shown_image(page, edition, explorer)), expected(6, 1, 4))
    assert "H = 6, D = 2: 'red' in head 2" in explorer.locator(".explorer-caption").inner_text()
    explorer.locator("label:has-text('heads H') select").select_option(label="2")
    move_slider(explorer, "head", "12")
    np.testing.assert_array_equal(pixels(shown_image(page, edition, explorer)), expected(2, 1, 4))
    assert explorer.locator("label:has-text('head') output").inner_text() == "2"  # clamped to H, as in a kernel
    assert page.errors == [] and page.blocked == []


@pytest.mark.browser
def test_a_slider_stops_only_at_its_rendered_values(edition, offline_context):
    """Chapter 6: the window slider runs 0..16 in a kernel, but its grid is (0, 1, 2, 4, 16): on the page it
    has five stops, one per rendered value, and depth's stops are 1, 2, 3, 4, 8 (3 is its initial value)."""
    from utils.explorers.at_scale import window_explorer_state
    from utils.plotting.at_scale import window_explorer_figure

    page = offline_context()
    page.goto((edition / f"{stem_of(6)}.html").as_uri())
    explorer = page.locator(".course-explorer").first
    page.wait_for_selector(".course-explorer[data-ready='true']")
    shown = {}
    for name, stops in (("window", 5), ("depth", 5)):
        slider = explorer.locator(f"label:has-text('{name}') input[type=range]")
        assert [slider.get_attribute(a) for a in ("min", "max", "step")] == ["0", str(stops - 1), "1"]
        shown[name] = []
        for stop in range(stops):
            slider.fill(str(stop))
            shown[name].append(explorer.locator(f"label:has-text('{name}') output").inner_text())
    assert shown == {"window": ["0", "1", "2", "4", "16"], "depth": ["1", "2", "3", "4", "8"]}
    want = pixels(figure_png(window_explorer_figure(window_explorer_state(16, 0, 8))))
    np.testing.assert_array_equal(pixels(shown_image(page, edition, explorer)), want)
    move_slider(explorer, "depth", "4")
    want = pixels(figure_png(window_explorer_figure(window_explorer_state(16, 0, 4))))
    np.testing.assert_array_equal(pixels(shown_image(page, edition, explorer)), want)
    assert page.errors == [] and page.blocked == []


@pytest.mark.browser
def test_with_scripts_off_the_saved_figure_still_shows(edition, offline_context, tmp_path):
    page = offline_context(java_script_enabled=False)
    page.goto((edition / f"{stem_of(2)}.html").as_uri())
    explorer = page.locator(".course-explorer").first
    figure = explorer.locator("img.explorer-figure")
    figure.scroll_into_view_if_needed()
    assert figure.is_visible() and figure.evaluate("img => img.complete && img.naturalWidth > 100")
    assert explorer.locator(".explorer-noscript").is_visible()
    assert explorer.locator("input, select").evaluate_all("els => els.every(e => e.disabled)")
    grid = json.loads(explorer.locator("script.explorer-grid").inner_text())
    initial = int(explorer.get_attribute("data-initial-state"))
    assert figure.get_attribute("src") == grid["images"][grid["states"][initial][0]]
    page.screenshot(path=str(tmp_path / "html-noscript.png"))
    keep_artifact(tmp_path / "html-noscript.png")
    assert page.blocked == []


@pytest.mark.browser
def test_pages_are_readable_at_phone_width(edition, offline_context, tmp_path):
    page = offline_context()
    page.set_viewport_size({"width": 390, "height": 844})
    for name in ("index", stem_of(2), stem_of(5)):
        page.goto((edition / f"{name}.html").as_uri())
        settle(page)  # measured as typeset, equations included; and leaving it aborts nothing
        width = page.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
        assert width[0] <= width[1] + 1, f"{name}: the page scrolls sideways at 390 px ({width})"
        toc = page.locator("details.book-toc")
        assert toc.get_attribute("open") is None and toc.locator("summary").is_visible()  # "Contents", folded
        main = page.locator("main").bounding_box()
        assert main["x"] < 40 and main["width"] > 300
        page.screenshot(path=str(tmp_path / f"phone-{name}.png"), full_page=False)
        keep_artifact(tmp_path / f"phone-{name}.png")
    assert page.errors == [] and page.blocked == []


@pytest.mark.browser
def test_budgets_size_and_grids(edition):
    size = sum(f.stat().st_size for f in edition.rglob("*") if f.is_file())
    assert size < SIZE_BUDGET_BYTES, f"build/html is {size / 2**20:.1f} MiB, budget {SIZE_BUDGET_BYTES / 2**20:.0f} MiB"
    reports = json.loads((edition / "explorers.json").read_text())
    assert list(reports) == [path.stem for path in SOLUTIONS]
    reports |= {f"zh/{stem}": r for stem, r in json.loads((edition / "zh" / "explorers.json").read_text()).items()}
    for stem, report in reports.items():
        assert report["kept"] == [], f"{stem}: explorers without a precomputed grid: {report['kept']}"
        assert report["precomputed"], f"{stem} has no precomputed explorer"
        for explorer in report["precomputed"]:
            assert explorer["states"] <= MAX_GRID_STATES
            assert explorer["render_s"] <= GRID_TIME_BUDGET_S, (stem, explorer)
    assert math.isfinite(size)


@pytest.mark.browser
def test_every_page_of_both_languages_links_its_twin(edition):
    for lang in EDITION_LANGUAGES:
        folder = edition if lang == EDITION_LANGUAGES[0] else edition / lang
        other = EDITION_LANGUAGES[1 - EDITION_LANGUAGES.index(lang)]
        names = [f"{p.stem}.html" for p in SOLUTIONS] + ["index.html"]
        assert sorted(p.name for p in folder.glob("*.html")) == sorted(names), lang
        for name in names:
            text = (folder / name).read_text(encoding="utf-8")
            assert f'<html lang="{CHROME[lang].html_lang}"' in text, (lang, name)
            hrefs = re.findall(r'class="book-lang-link" href="([^"]+)"', text)
            assert len(hrefs) == 1, f"{lang}/{name}: {len(hrefs)} language switches"
            twin = (folder / hrefs[0]).resolve()
            home = edition if other == EDITION_LANGUAGES[0] else edition / other
            assert twin == (home / name).resolve() and twin.is_file()
            chapters = re.findall(r'<ol class="book-chapters">(.*?)</ol></details>', text, re.S)[0]
            assert re.findall(r'<a href="([^"#]+)"', chapters) == names[:-1], (lang, name)
    reports = json.loads((edition / "zh" / "explorers.json").read_text())
    assert list(reports) == [p.stem for p in SOLUTIONS]
    assert all(r["precomputed"] and not r["kept"] for r in reports.values()), reports


@pytest.mark.browser
def test_a_chinese_chapter_moves_its_explorer_and_switches_to_english_offline(edition, offline_context, tmp_path):
    """Chapter 3 in Chinese: Chinese chrome, the explorer answers (the figure becomes the grid's image for
    the new state), and the switch opens the same chapter in English."""
    page = offline_context()
    page.goto((edition / "zh" / f"{stem_of(3)}.html").as_uri())
    page.wait_for_selector(".course-explorer[data-ready='true']", timeout=20_000)
    assert page.get_attribute("html", "lang") == "zh-CN"
    assert page.locator(".book-toc summary").inner_text() == "目录"
    assert page.locator("details.course-setup summary").inner_text().startswith("环境设置")
    explorer = page.locator(".course-explorer").first
    assert explorer.locator(".explorer-precomputed").inner_text() == "预先计算"
    grid = json.loads(explorer.locator("script.explorer-grid").inner_text())
    figure = explorer.locator("img.explorer-figure")
    before = int(figure.get_attribute("data-state") or explorer.get_attribute("data-initial-state"))
    select = explorer.locator("select").first
    options = select.locator("option")
    index = (int(select.input_value()) + 1) % options.count()
    select.select_option(index=index)  # by position: Playwright's value= also matches an option's label
    state = int(figure.get_attribute("data-state"))
    # a new state, shown with its own grid image (two states may share one image: it is stored once)
    assert state != before and figure.get_attribute("src") == grid["images"][grid["states"][state][0]]
    assert shown_image(page, edition / "zh", explorer)
    page.screenshot(path=str(tmp_path / "html-zh.png"))
    keep_artifact(tmp_path / "html-zh.png")
    settle(page)
    page.locator(".book-lang-link").first.click()
    page.wait_for_url(re.compile(r"/" + re.escape(stem_of(3)) + r"\.html$"))
    assert page.url.endswith(f"/{edition.name}/{stem_of(3)}.html") and page.get_attribute("html", "lang") == "en"
    assert page.locator(".book-lang-link").get_attribute("href") == f"zh/{stem_of(3)}.html"
    assert page.errors == [] and page.blocked == [], (page.errors, page.blocked)


@pytest.mark.browser
def test_a_text_box_offered_as_choices_responds_and_points_to_a_kernel(offline_context, tmp_path):
    """The "choices only + note" fallback for free text, in Chromium: an explorer on chapter 3's state
    and figure functions whose query word is typed into a combobox (as chapter 5's own sentence)."""
    import ipywidgets as w

    from utils.explorers.multihead import head_explorer_state
    from utils.htmlbook.assets import BOOK_STATIC
    from utils.plotting.multihead import head_token_figure
    from utils.widgets.common import KERNEL_NOTE, wire_explorer
    from utils.widgets.grid import render_grid

    tokens = head_explorer_state(3).tokens
    word = w.Combobox(value="apple", options=tokens, description="query word", ensure_option=False)

    def figure(state):
        return head_token_figure(state.weights, state.tokens, state.head, state.token)

    box = wire_explorer([word], {"word": word}, lambda: head_explorer_state(3, 1, tokens.index(word.value)),
                        figure, grid={"word": ("apple", "girl", "red")})
    manifest = json.loads(render_grid(box, tmp_path / "grids").read_text())
    links = [("Binder", "https://mybinder.org/x"), ("Colab", "https://colab.research.google.com/x")]
    block = explorer_html(manifest, f"grids/{box.model_id}", "explorer-1", links)
    (tmp_path / "page.html").write_text(
        f'<!DOCTYPE html><html><head><link rel="stylesheet" href="{(BOOK_STATIC / "book.css").as_uri()}"></head><body>'
        f'{block}<script src="{(BOOK_STATIC / "explorer.js").as_uri()}"></script></body></html>')
    page = offline_context()
    page.goto((tmp_path / "page.html").as_uri())
    explorer = page.locator(".course-explorer")
    page.wait_for_selector(".course-explorer[data-ready='true']")
    note = explorer.locator(".explorer-note")
    assert note.inner_text().startswith(KERNEL_NOTE)
    assert [note.locator("a").nth(i).get_attribute("href") for i in range(2)] == [url for _, url in links]
    explorer.locator("select").select_option(label="girl")
    want = pixels(figure_png(figure(head_explorer_state(3, 1, tokens.index("girl")))))
    np.testing.assert_array_equal(pixels(shown_image(page, tmp_path, explorer)), want)
    assert page.errors == [] and page.blocked == [], (page.errors, page.blocked)
