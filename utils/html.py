"""The static HTML edition: ``python -m utils.html`` (``make html``) -> ``build/html``.

Every ``solutions/NN_*.ipynb`` becomes ``build/html/NN_*.html`` with its outputs and its widget state
embedded, so the explorers show the state they were saved with and the course reads without a kernel.
``index.html`` lists the chapters.

It renders **offline**. nbconvert's default page loads RequireJS, the widget embedder
(``@jupyter-widgets/html-manager``) and MathJax from CDNs; here the three come from npm packages
(``package.json``, installed by ``npm ci`` into ``node_modules/``), are copied into
``build/html/static/`` and the pages point at those copies with relative URLs. The badges' images
(served by Colab and Binder) become plain links.

The widget state is the one stored in the solution notebooks by ``python -m utils.build --execute``
(nbclient with the widget state saved). ``--execute`` runs the notebooks again first; a notebook that
shows widgets but has no stored state is always executed.
"""

from __future__ import annotations

import argparse
import html
import re
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

import nbformat

from utils.build import BADGES_CLOSE, BADGES_OPEN, NOTEBOOK_GLOB
from utils.paths import REPO_ROOT

__all__ = ["MissingAssets", "STATIC", "build_html", "main", "offline_badges", "render_notebook"]

NODE_MODULES = REPO_ROOT / "node_modules"
STATIC = "static"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

# What is copied from node_modules (source relative to node_modules -> target relative to static/).
# MathJax 2 is copied in part: the TeX input and CommonHTML output that nbconvert's configuration
# (TeX-AMS_CHTML-full) loads, its extensions and the TeX web fonts.
ASSETS = {
    "requirejs/require.js": "require.js",
    "@jupyter-widgets/html-manager/dist": "html-manager",
    "mathjax/MathJax.js": "mathjax/MathJax.js",
    "mathjax/config/TeX-AMS_CHTML-full.js": "mathjax/config/TeX-AMS_CHTML-full.js",
    "mathjax/extensions": "mathjax/extensions",
    "mathjax/jax/input/TeX": "mathjax/jax/input/TeX",
    "mathjax/jax/output/CommonHTML": "mathjax/jax/output/CommonHTML",
    "mathjax/jax/element": "mathjax/jax/element",
    "mathjax/localization/en": "mathjax/localization/en",
    "mathjax/fonts/HTML-CSS/TeX/woff": "mathjax/fonts/HTML-CSS/TeX/woff",
}
URLS = {
    "require_js_url": f"{STATIC}/require.js",
    "widget_renderer_url": f"{STATIC}/html-manager/embed-amd.js",
    "mathjax_url": f"{STATIC}/mathjax/MathJax.js?config=TeX-AMS_CHTML-full,Safe",
}
_BADGE = re.compile(r"\[!\[([^\]]*)\]\([^)\s]*\)\]\(([^)\s]+)\)")


class MissingAssets(RuntimeError):
    """node_modules lacks what the pages need (``npm ci`` was not run)."""


def copy_assets(out: Path, node_modules: Path = NODE_MODULES) -> None:
    """Copy the JavaScript the pages load into ``out/static``."""
    missing = [src for src in ASSETS if not (node_modules / src).exists()]
    if missing:
        raise MissingAssets(
            f"{node_modules} lacks {', '.join(missing)}: run `npm ci` in the repository root (make html does)"
        )
    static = out / STATIC
    if static.exists():
        shutil.rmtree(static)
    for src, dst in ASSETS.items():
        source, target = node_modules / src, static / dst
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("*.map"))
        else:
            shutil.copy2(source, target)


def offline_badges(nb: nbformat.NotebookNode) -> None:
    """Turn the header's badge images (loaded from Colab and Binder) into text links, in place."""
    if not nb.cells or nb.cells[0].cell_type != "markdown":
        return
    source = nb.cells[0].source
    start, end = source.find(BADGES_OPEN), source.find(BADGES_CLOSE)
    if start < 0 or end < start:
        return
    region = _BADGE.sub(lambda m: f"[{m[1]}]({m[2]})", source[start:end])
    nb.cells[0].source = source[:start] + region.replace(") [", ") · [") + source[end:]


def _needs_execution(nb: nbformat.NotebookNode) -> bool:
    shows_widgets = any(
        WIDGET_VIEW in output.get("data", {})
        for cell in nb.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
    )
    has_state = bool(nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state"))
    unexecuted = any(
        cell.cell_type == "code" and cell.source.strip() and cell.execution_count is None for cell in nb.cells
    )
    return unexecuted or (shows_widgets and not has_state)


def title_of(nb: nbformat.NotebookNode, fallback: str) -> str:
    """The first ``# heading`` of the notebook, else ``fallback``."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            match = re.search(r"^#\s+(.+?)\s*$", cell.source, re.M)
            if match:
                return match[1]
    return fallback


def render_notebook(path: Path, *, execute: bool = False, log=print) -> tuple[str, str]:
    """``(title, html)`` of the notebook at ``path``; executed first (widget state saved) if asked or
    needed."""
    from nbconvert import HTMLExporter

    nb = nbformat.read(path, as_version=4)
    if execute or _needs_execution(nb):
        from utils.notebook_run import execute_notebook

        result = execute_notebook(path)  # nbclient; stores the widget state in the metadata
        nb = result.notebook
        log(f"executed {path.name}: {result.wall_s:.1f} s")
    title = title_of(nb, path.stem)
    nb.metadata["title"] = title
    offline_badges(nb)
    exporter = HTMLExporter(template_name="lab", **URLS)
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": path.stem}})
    return title, body


def index_page(entries: Sequence[tuple[str, str]]) -> str:
    items = "\n".join(f'    <li><a href="{html.escape(href)}">{html.escape(title)}</a></li>' for href, title in entries)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>Attention, Step by Step</title>
<style>
  body {{ font-family: system-ui, sans-serif; max-width: 46rem; margin: 3rem auto; padding: 0 1rem; line-height: 1.5; }}
  li {{ margin: 0.4rem 0; }}
</style>
</head>
<body>
  <h1>Attention, Step by Step</h1>
  <p>The static edition of the course: every chapter with its solutions, figures and the explorers in
  the state they were saved with. To move the sliders, run the notebooks (<code>make lab</code>, Binder
  or Colab).</p>
  <ol class="chapters">
{items}
  </ol>
</body>
</html>
"""


def build_html(
    out: str | Path = REPO_ROOT / "build" / "html",
    *,
    root: str | Path = REPO_ROOT,
    node_modules: str | Path = NODE_MODULES,
    execute: bool = False,
    log=print,
) -> list[Path]:
    """Write the HTML edition into ``out``; return the pages written (index last)."""
    root, out = Path(root), Path(out)
    solutions = sorted((root / "solutions").glob(NOTEBOOK_GLOB))
    if not solutions:
        raise FileNotFoundError(f"no {NOTEBOOK_GLOB} in {root / 'solutions'}")
    out.mkdir(parents=True, exist_ok=True)
    copy_assets(out, Path(node_modules))
    for stale in out.glob(NOTEBOOK_GLOB.replace(".ipynb", ".html")):
        stale.unlink()
    pages, entries = [], []
    for path in solutions:
        title, body = render_notebook(path, execute=execute, log=log)
        page = out / f"{path.stem}.html"
        page.write_text(body, encoding="utf-8")
        pages.append(page)
        entries.append((page.name, title))
        log(f"wrote {page.relative_to(out.parent) if out.parent in page.parents else page}")
    index = out / "index.html"
    index.write_text(index_page(entries), encoding="utf-8")
    pages.append(index)
    log(f"wrote {index}")
    return pages


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m utils.html", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO_ROOT / "build" / "html"), help="output folder (default: build/html)")
    parser.add_argument("--execute", action="store_true", help="execute the notebooks again (widget state saved) first")
    args = parser.parse_args(argv)
    try:
        build_html(args.out, execute=args.execute)
    except MissingAssets as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
