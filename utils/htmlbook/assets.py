"""What the pages of the HTML edition load, copied into ``build/html/static`` so they render offline.

nbconvert's default page loads RequireJS, the widget embedder (``@jupyter-widgets/html-manager``)
and MathJax from CDNs; here the three come from npm packages (``package.json``, installed by
``npm ci`` into ``node_modules/``), and the pages point at the copies with relative URLs. The book's
own stylesheet and the explorers' script come from ``utils/htmlbook/static/``.

Chinese renders offline too: ``static/fonts.css`` declares the course's CJK font (the subset of Noto
Sans SC that the figures use, ``utils.plotting.fonts.CJK_FONT_PATH``, copied to ``static/fonts/``)
with ``@font-face`` and appends it to the pages' font stacks, after the Latin fonts, so it draws only
what they lack.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from utils.paths import REPO_ROOT

__all__ = ["ASSETS", "BOOK_STATIC", "CJK_FONT_FACE", "MissingAssets", "NODE_MODULES", "STATIC", "URLS", "cjk_font",
           "copy_assets", "fonts_css"]

NODE_MODULES = REPO_ROOT / "node_modules"
STATIC = "static"
BOOK_STATIC = Path(__file__).resolve().parent / "static"

# What is copied from node_modules (source relative to node_modules -> target relative to static/).
# MathJax 2 is copied in part: the TeX input and CommonHTML output that nbconvert's configuration
# (TeX-AMS_CHTML-full) loads, its extensions and the TeX web fonts.
ASSETS = {
    "requirejs/require.js": "require.js",
    "@jupyter-widgets/html-manager/dist": "html-manager",
    "mathjax/MathJax.js": "mathjax/MathJax.js",
    "mathjax/config/TeX-AMS_CHTML-full.js": "mathjax/config/TeX-AMS_CHTML-full.js",
    "mathjax/config/Safe.js": "mathjax/config/Safe.js",  # the ",Safe" of the page's config
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


CJK_FONT_FACE = "Course CJK"
"""The ``font-family`` name the pages give the course's CJK font."""
_LATIN = 'system-ui, -apple-system, blinkmacsystemfont, "Segoe UI", helvetica, arial, sans-serif'


def cjk_font() -> Path | None:
    """The course's CJK font file (``utils.plotting.fonts.CJK_FONT_PATH``), or None where the package
    has none."""
    try:
        from utils.plotting.fonts import CJK_FONT_PATH
    except ImportError:
        return None
    return Path(CJK_FONT_PATH) if Path(CJK_FONT_PATH).is_file() else None


def fonts_css(font_name: str | None) -> str:
    """``static/fonts.css``: the ``@font-face`` of ``fonts/<font_name>`` and the font stacks that end
    with it (JupyterLab's variables and the book's own parts); only a comment without a font."""
    if font_name is None:
        return "/* no CJK font in this build: Chinese falls back to the reader's system fonts */\n"
    stack = f'{_LATIN}, "{CJK_FONT_FACE}"'
    return (f'@font-face {{ font-family: "{CJK_FONT_FACE}"; src: url("fonts/{font_name}") format("opentype"); '
            "font-display: swap; }\n"
            f":root {{ --jp-content-font-family: {stack}; --jp-ui-font-family: {stack}; }}\n"
            "body, body.book-index, .book-sidebar, .book-pager, .book-lang, .course-explorer, "
            f"details.course-setup > summary {{ font-family: {stack}; }}\n")


class MissingAssets(RuntimeError):
    """node_modules lacks what the pages need (``npm ci`` was not run)."""


def copy_assets(out: Path, node_modules: Path = NODE_MODULES) -> None:
    """Copy the JavaScript and CSS the pages load into ``out/static``.

    Raises:
        MissingAssets: ``node_modules`` lacks a file of :data:`ASSETS`.
    """
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
    for source in sorted(BOOK_STATIC.iterdir()):
        shutil.copy2(source, static / source.name)
    font = cjk_font()
    if font is not None:
        (static / "fonts").mkdir()
        shutil.copy2(font, static / "fonts" / font.name)
    (static / "fonts.css").write_text(fonts_css(font.name if font else None), encoding="utf-8")
