"""The static HTML edition: ``python -m utils.html`` (``make html``) -> ``build/html``.

Every ``solutions/NN_*.ipynb`` becomes ``build/html/NN_*.html``, and ``index.html`` carries the
README's chapter table. The Chinese edition is built beside it from ``solutions/zh/`` into
``build/html/zh/`` (its page chrome in Chinese, ``<html lang="zh-CN">``, its chapter table from the
notebooks' headers), and every page of either has a switch to the same page in the other language
(:mod:`utils.htmlbook.chrome`); both share ``static/``.

The pages read like a book (:mod:`utils.htmlbook.book`): a sidebar with the
chapters and the current chapter's sections, previous and next links, the setup cell folded behind a
"Setup" line, and a layout that works at phone width.

**The explorers still move.** Each chapter is executed (nbclient, widget state saved), and after its
last cell the kernel renders every explorer's whole grid of control values, with the explorer's own
state function and figure function (:func:`utils.widgets.grid.render_grids`, called by
:func:`utils.htmlbook.cache.kernel_epilogue`). The explorer's widget view is then replaced by plain
HTML controls and a script that swaps the figure (:mod:`utils.htmlbook.explorers`), labelled
"precomputed". Other widgets (the quizzes) keep their
saved state, rendered by the widget embedder.

**Offline.** RequireJS, the widget embedder and MathJax come from ``node_modules`` (``npm ci``) and
are copied into ``build/html/static/`` with the book's CSS and script (:mod:`utils.htmlbook.assets`);
the badges' images become plain links.

**Budgets** (``tests/test_html.py`` checks them): an explorer's grid has at most
:data:`~utils.widgets.grid.MAX_GRID_STATES` states and renders in at most
:data:`~utils.widgets.grid.GRID_TIME_BUDGET_S` CPU seconds; the whole edition stays under
:data:`SIZE_BUDGET_BYTES` (figures are lossless WebP at the explorers' 80 dpi); a page opens offline
in headless Chromium in under :data:`OPEN_BUDGET_S`.

Executing is the slow part, so each executed chapter and its grids are kept in ``html-cache/``, which
is committed (:mod:`utils.htmlbook.cache`): an entry records what its execution read (the notebook,
the ``utils`` modules its kernel loaded, the data files, the pins), and only a notebook whose entry is
missing or no longer current is executed again, ``--jobs`` at a time (default 2), longest first.
``--execute`` executes every chapter again; ``--check`` builds nothing and fails on an entry that is
not current. After changing a chapter or code its kernel runs, run ``python -m utils.html`` and
commit ``html-cache/`` with the change (``make test`` fails until then).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

import nbformat

from utils.build import NOTEBOOK_GLOB
from utils.htmlbook.assets import NODE_MODULES, STATIC, URLS, MissingAssets, copy_assets
from utils.htmlbook.book import (
    chapter_table,
    index_page,
    kernel_links,
    localized_rows,
    offline_badges,
    pager,
    sections_of,
    sidebar,
    title_of,
)
from utils.htmlbook.cache import (
    DEFAULT_JOBS,
    HTML_CACHE,
    execute_chapters,
    executed_with_grids,
    language_of,
    notebook_label,
    stale_reason,
)
from utils.htmlbook.chrome import CHROME, EDITION_LANGUAGES
from utils.htmlbook.explorers import ExplorerReport, precompute_explorers
from utils.paths import REPO_ROOT

__all__ = ["DEFAULT_JOBS", "HTML_CACHE", "OPEN_BUDGET_S", "SIZE_BUDGET_BYTES", "build_html", "execute_chapters",
           "executed_with_grids", "language_of", "main", "render_notebook", "stale_entries"]

SIZE_BUDGET_BYTES = 48 * 2**20
"""The whole ``build/html`` stays under 48 MiB: ``static/`` (MathJax, the widget renderer, the CJK font)
is about 20 MiB and shared, each language's pages and explorer figures about 11 MiB."""
OPEN_BUDGET_S = 3.0
"""A chapter page opens offline in headless Chromium within this many seconds: from the start of the
navigation until its text and figures are in and every explorer answers (``explorer.js`` marks it)."""
TEMPLATES = Path(__file__).resolve().parent / "htmlbook" / "templates"


def render_notebook(nb: nbformat.NotebookNode, stem: str, rows, *, grids: Path | None = None,
                    out: Path | None = None, lang: str = "en") -> tuple[str, str, ExplorerReport]:
    """``(title, html, report)`` of the executed notebook ``nb`` as the book page ``stem`` in ``lang``.

    With ``grids`` (and ``out``, where ``explorers/<stem>/`` receives the images), its explorers are
    made precomputed (:func:`~utils.htmlbook.explorers.precompute_explorers`). A page of a language
    other than the first lives one folder down and reaches ``static/`` as ``../static``.
    """
    words = CHROME[lang]
    static = STATIC if lang == EDITION_LANGUAGES[0] else f"../{STATIC}"
    from nbconvert import HTMLExporter

    nb = nbformat.from_dict(json.loads(json.dumps(nb)))  # a copy: the cached notebook stays as it is
    title = title_of(nb, stem)
    nb.metadata["title"] = title
    links = kernel_links(nb)
    report = ExplorerReport()
    if grids is not None and out is not None:
        report = precompute_explorers(nb, grids, out / "explorers" / stem, f"explorers/{stem}", links, lang)
    offline_badges(nb)
    urls = {name: url.replace(f"{STATIC}/", f"{static}/", 1) for name, url in URLS.items()}
    exporter = HTMLExporter(template_name="course", extra_template_basedirs=[str(TEMPLATES)],
                            language_code=words.html_lang.split("-")[0], **urls)
    book = {"static": static, "setup": words.setup, "setup_hint": words.setup_hint}
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": stem}, "book": book})
    body = body.replace(f'<html lang="{exporter.language_code}">', f'<html lang="{words.html_lang}">', 1)
    body = body.replace("<!--book:sidebar-->", sidebar(rows, stem, sections_of(body), lang), 1)
    body = body.replace("<!--book:pager-top-->", pager(rows, stem, "top", lang), 1)
    body = body.replace("<!--book:pager-bottom-->", pager(rows, stem, "bottom", lang), 1)
    return title, body, report


def _editions(root: Path) -> dict[str, list[Path]]:
    """The solution notebooks of each language: ``solutions/`` and ``solutions/zh/``.

    Raises:
        ValueError: the Chinese notebooks are not exactly the English ones (the switch on every page
            needs the same chapter in the other language).
    """
    solutions = sorted((root / "solutions").glob(NOTEBOOK_GLOB))
    if not solutions:
        raise FileNotFoundError(f"no {NOTEBOOK_GLOB} in {root / 'solutions'}")
    editions = {"en": solutions}
    for lang in EDITION_LANGUAGES[1:]:
        translated = sorted((root / "solutions" / lang).glob(NOTEBOOK_GLOB))
        if [p.stem for p in translated] != [p.stem for p in solutions]:
            raise ValueError(f"solutions/{lang}/ has {[p.stem for p in translated]}, solutions/ has "
                             f"{[p.stem for p in solutions]}: run `python -m utils.build`")
        editions[lang] = translated
    return editions


def build_html(
    out: str | Path = REPO_ROOT / "build" / "html",
    *,
    root: str | Path = REPO_ROOT,
    node_modules: str | Path = NODE_MODULES,
    cache: str | Path = HTML_CACHE,
    execute: bool = False,
    jobs: int = DEFAULT_JOBS,
    log=print,
) -> list[Path]:
    """Write the HTML edition, English in ``out`` and Chinese in ``out/zh``; return the pages written
    (each language's chapters, then its index).

    The chapters of both languages missing from ``cache`` are executed first, ``jobs`` at a time
    (:func:`execute_chapters`).

    Raises:
        ValueError: the README's chapter table does not list the solution notebooks, in order; or
            ``solutions/zh/`` lacks one of them.
        MissingAssets: ``node_modules`` lacks the JavaScript the pages load.
    """
    root, out, cache = Path(root), Path(out), Path(cache)
    editions = _editions(root)
    rows = chapter_table(root / "README.md")
    if [row.stem for row in rows] != [path.stem for path in editions["en"]]:
        raise ValueError(f"README.md's chapter table lists {[r.stem for r in rows]}, solutions/ has "
                         f"{[p.stem for p in editions['en']]}")
    out.mkdir(parents=True, exist_ok=True)
    copy_assets(out, Path(node_modules))
    execute_chapters([p for paths in editions.values() for p in paths], cache=cache, execute=execute,
                     jobs=jobs, log=log)
    pages = []
    for lang, solutions in editions.items():
        folder = out if lang == EDITION_LANGUAGES[0] else out / lang
        folder.mkdir(exist_ok=True)
        for stale in [*folder.glob(NOTEBOOK_GLOB.replace(".ipynb", ".html")), folder / "explorers"]:
            shutil.rmtree(stale) if stale.is_dir() else stale.unlink(missing_ok=True)
        executed = [executed_with_grids(path, cache=cache, log=log) for path in solutions]  # cached now
        lang_rows = rows if lang == EDITION_LANGUAGES[0] else localized_rows(rows, [nb for nb, _ in executed])
        reports = {}
        for path, (nb, grids) in zip(solutions, executed):
            _, body, report = render_notebook(nb, path.stem, lang_rows, grids=grids, out=folder, lang=lang)
            for model_id, why in report.kept:
                log(f"warning: {notebook_label(path)}: explorer {model_id} keeps its saved state only: {why}")
            reports[path.stem] = {"precomputed": report.precomputed, "kept": report.kept}
            page = folder / f"{path.stem}.html"
            page.write_text(body, encoding="utf-8")
            pages.append(page)
            log(f"wrote {page}")
        (folder / "explorers.json").write_text(json.dumps(reports, indent=1), encoding="utf-8")
        index = folder / "index.html"
        static = STATIC if lang == EDITION_LANGUAGES[0] else f"../{STATIC}"
        index.write_text(index_page(lang_rows, lang, static), encoding="utf-8")
        pages.append(index)
        log(f"wrote {index}")
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    log(f"the edition is {size / 2**20:.1f} MiB (budget {SIZE_BUDGET_BYTES / 2**20:.0f} MiB)")
    return pages


def stale_entries(root: str | Path = REPO_ROOT, cache: str | Path = HTML_CACHE) -> list[str]:
    """One line per solution notebook (both languages) whose cache entry is missing or not current,
    saying why (:func:`~utils.htmlbook.cache.stale_reason`); empty when the committed cache serves
    the whole edition without executing anything."""
    lines = []
    for paths in _editions(Path(root)).values():
        for path in paths:
            why = stale_reason(path, Path(cache))
            if why is not None:
                lines.append(f"{notebook_label(path)}: {why}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m utils.html", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO_ROOT / "build" / "html"), help="output folder (default: build/html)")
    parser.add_argument("--execute", action="store_true",
                        help="execute the notebooks again, ignoring the cache in html-cache/")
    parser.add_argument("--cache", default=str(HTML_CACHE), help="the executed chapters (default: html-cache/)")
    parser.add_argument("--check", action="store_true",
                        help="build nothing; exit 1 if a notebook's entry in html-cache/ is missing or not current")
    parser.add_argument("--jobs", type=int, default=DEFAULT_JOBS,
                        help=f"chapters executed at the same time (default: {DEFAULT_JOBS})")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    if args.check:
        stale = stale_entries(cache=args.cache)
        for line in stale:
            print(f"{args.cache} is not current for {line}", file=sys.stderr)
        if stale:
            print("run `python -m utils.html` (it executes only those) and commit html-cache/", file=sys.stderr)
        return 1 if stale else 0
    try:
        build_html(args.out, cache=args.cache, execute=args.execute, jobs=args.jobs)
    except MissingAssets as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
