"""What makes the HTML edition read like a book: the chapter table, the sidebar, previous and next.

The index page carries the README's chapter table (``## Chapters``: number, title, time, what you
will be able to do), read from ``README.md`` when the edition is built, so there is one copy of it.
Every page has a sidebar listing the chapters, with the current chapter's sections (its ``##``
headings) under it, and chapter pages have previous and next links. On a narrow screen the sidebar
becomes a "Contents" block above the page.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import nbformat

from utils.build import BADGES_CLOSE, BADGES_OPEN
from utils.htmlbook.chrome import CHROME, language_switch

__all__ = ["BOOK_TITLE", "ChapterRow", "Section", "chapter_table", "index_page", "inline_markdown",
           "kernel_links", "localized_rows", "offline_badges", "pager", "sections_of", "sidebar", "title_of"]

BOOK_TITLE = CHROME["en"].book_title
_BADGE = re.compile(r"\[!\[([^\]]*)\]\([^)\s]*\)\]\(([^)\s]+)\)")
_LINK = re.compile(r"^\[(?P<title>[^\]]+)\]\((?P<href>[^)\s]+)\)$")
_H2 = re.compile(r'<h2 id="(?P<id>[^"]+)"[^>]*>(?P<text>.*?)</h2>', re.S)


@dataclass(frozen=True)
class ChapterRow:
    """One row of the README's chapter table; ``stem`` is the notebook's file name without ``.ipynb``."""

    number: str
    title: str
    stem: str
    time: str
    goal: str  # markdown, as in the README


@dataclass(frozen=True)
class Section:
    """A ``##`` heading of a chapter page: its anchor and its text."""

    anchor: str
    text: str


def chapter_table(readme: str | Path) -> list[ChapterRow]:
    """The rows of the ``## Chapters`` table of the README at ``readme``.

    Raises:
        ValueError: the README has no such table, or a row whose chapter cell is not a link to a
            notebook.

    >>> from utils.paths import REPO_ROOT
    >>> rows = chapter_table(REPO_ROOT / "README.md")
    >>> rows[0].number, rows[0].stem, rows[0].time
    ('1', '01_queries_keys_values', '~40 min')
    """
    text = Path(readme).read_text(encoding="utf-8")
    match = re.search(r"^## Chapters\s*\n(?P<body>.*?)(?=^## |\Z)", text, re.M | re.S)
    if not match:
        raise ValueError(f"{readme}: no '## Chapters' section")
    lines = [line.strip() for line in match["body"].splitlines() if line.strip().startswith("|")]
    rows = []
    for line in lines[2:]:  # after the header and the |---| line
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) != 4:
            raise ValueError(f"{readme}: a chapter row needs 4 cells (#, chapter, time, goal), got {line!r}")
        link = _LINK.match(cells[1])
        if not link or not link["href"].endswith(".ipynb"):
            raise ValueError(f"{readme}: the chapter cell {cells[1]!r} is not a link to a notebook")
        rows.append(ChapterRow(cells[0], link["title"], Path(link["href"]).stem, cells[2], cells[3]))
    if not rows:
        raise ValueError(f"{readme}: the '## Chapters' section has no table rows")
    return rows


def localized_rows(rows: Sequence[ChapterRow], notebooks: Sequence[nbformat.NotebookNode]) -> list[ChapterRow]:
    """The chapter table of a translated edition: each row's title and time from its notebook's header
    (``# 第 1 章 · 标题``, then ``约 40 分钟 · ...``), its goal from the header's first paragraph that
    ends with a colon and is followed by a list (the learning objectives), else left out.

    Raises:
        ValueError: a header without its ``· title`` or time line, naming the chapter.
    """
    localized = []
    for row, nb in zip(rows, notebooks, strict=True):
        header = nb.cells[0].source if nb.cells else ""
        title = re.search(r"^#\s+[^·\n]*·\s*(.+?)\s*$", header, re.M)
        time = re.search(r"^(?!#)([^·\n<\[]+?) · ", header, re.M)
        if not title or not time:
            raise ValueError(f"chapter {row.number} ({row.stem}): its header lacks '# ... · title' or a time line")
        localized.append(ChapterRow(row.number, title[1], row.stem, time[1].strip(), ""))
    return localized


def inline_markdown(text: str) -> str:
    """``text`` as HTML: escaped, with `code` spans (all the README's table uses).

    >>> inline_markdown("match `nn.MultiheadAttention` & <more>")
    'match <code>nn.MultiheadAttention</code> &amp; &lt;more&gt;'
    """
    parts = text.split("`")
    return "".join(f"<code>{html.escape(p)}</code>" if i % 2 else html.escape(p) for i, p in enumerate(parts))


def title_of(nb: nbformat.NotebookNode, fallback: str) -> str:
    """The first ``# heading`` of the notebook, else ``fallback``."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            match = re.search(r"^#\s+(.+?)\s*$", cell.source, re.M)
            if match:
                return match[1]
    return fallback


def kernel_links(nb: nbformat.NotebookNode) -> list[tuple[str, str]]:
    """``(name, url)`` of the header's badges (Colab, Binder): where a kernel can run the chapter."""
    if not nb.cells or nb.cells[0].cell_type != "markdown":
        return []
    source = nb.cells[0].source
    start, end = source.find(BADGES_OPEN), source.find(BADGES_CLOSE)
    if start < 0 or end < start:
        return []
    return [(alt.replace("Open in ", ""), url) for alt, url in _BADGE.findall(source[start:end])]


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


def sections_of(page: str) -> list[Section]:
    """The ``<h2>`` headings of a rendered page, with their anchors (nbconvert's ids)."""
    sections = []
    for match in _H2.finditer(page):
        text = re.sub(r"<a class=\"anchor-link\".*?</a>", "", match["text"], flags=re.S)
        text = html.unescape(re.sub(r"<[^>]+>", "", text)).strip()
        sections.append(Section(match["id"], text))
    return sections


def sidebar(rows: Sequence[ChapterRow], current: str | None = None, sections: Sequence[Section] = (),
            lang: str = "en") -> str:
    """The sidebar: the book's title (a link to the index), every chapter, and under ``current`` (a
    stem) its ``sections``. Inside a ``<details>`` that is open on a wide screen (a line of script)
    and a "Contents" line on a phone. Its words are ``lang``'s (:data:`~utils.htmlbook.chrome.CHROME`)."""
    words = CHROME[lang]
    items = []
    for row in rows:
        here = row.stem == current
        current_attr = ' aria-current="page"' if here else ""
        link = (f'<a href="{html.escape(row.stem)}.html"{current_attr}>'
                f'<span class="book-num">{html.escape(row.number)}</span> {html.escape(row.title)}</a>')
        inner = ""
        if here and sections:
            inner = '<ol class="book-sections">' + "".join(
                f'<li><a href="#{html.escape(s.anchor)}">{html.escape(s.text)}</a></li>' for s in sections) + "</ol>"
        item_attr = ' class="book-current"' if here else ""
        items.append(f"<li{item_attr}>{link}{inner}</li>")
    return (
        f'<nav class="book-sidebar" aria-label="{html.escape(words.chapters_label)}">'
        f'<details class="book-toc" open><summary>{html.escape(words.contents)}</summary>'
        f'<p class="book-title"><a href="index.html">{html.escape(words.book_title)}</a></p>'
        f'<ol class="book-chapters">{"".join(items)}</ol></details></nav>'
        "<script>if (window.matchMedia('(max-width: 800px)').matches) "
        "document.querySelector('.book-toc').removeAttribute('open');</script>"
    )


def pager(rows: Sequence[ChapterRow], current: str, where: str, lang: str = "en") -> str:
    """Previous and next links around chapter ``current`` (``where``: ``"top"`` or ``"bottom"``); the top
    one also carries the switch to the same chapter in the other language."""
    words = CHROME[lang]
    stems = [row.stem for row in rows]
    i = stems.index(current)
    links = []
    if i > 0:
        prev = rows[i - 1]
        links.append(f'<a class="book-prev" rel="prev" href="{prev.stem}.html">← {prev.number} · '
                     f'{html.escape(prev.title)}</a>')
    else:
        links.append(f'<a class="book-prev" rel="prev" href="index.html">{html.escape(words.back_to_contents)}</a>')
    if i + 1 < len(rows):
        nxt = rows[i + 1]
        links.append(f'<a class="book-next" rel="next" href="{nxt.stem}.html">{nxt.number} · '
                     f'{html.escape(nxt.title)} →</a>')
    switch = language_switch(current, lang) if where == "top" else ""
    return (f'{switch}<nav class="book-pager book-pager-{where}" aria-label="{html.escape(words.pager_label)}">'
            f'{"".join(links)}</nav>')


def index_page(rows: Sequence[ChapterRow], lang: str = "en", static: str = "static") -> str:
    """The index page in ``lang``: what the edition is, the language switch, and the chapter table
    (the README's, or :func:`localized_rows`) with links."""
    words = CHROME[lang]
    body = "\n".join(
        f'<tr><td>{html.escape(r.number)}</td><td><a href="{html.escape(r.stem)}.html">{html.escape(r.title)}</a>'
        f'</td><td class="book-time">{html.escape(r.time)}</td><td>{inline_markdown(r.goal)}</td></tr>'
        for r in rows)
    with_goal = any(r.goal for r in rows)  # a translated table without goals leaves the column out
    if not with_goal:
        body = re.sub(r"<td></td></tr>", "</tr>", body)
    head = "".join(f"<th>{html.escape(h)}</th>" for h in words.table_head[:4 if with_goal else 3])
    return f"""<!DOCTYPE html>
<html lang="{words.html_lang}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>{html.escape(words.book_title)}</title>
<link rel="stylesheet" href="{static}/book.css">
<link rel="stylesheet" href="{static}/fonts.css">
</head>
<body class="book-index">
<div class="book">
{sidebar(rows, lang=lang)}
<main class="book-main">
  {language_switch("index", lang)}
  <h1>{html.escape(words.book_title)}</h1>
  <p>{words.index_intro}</p>
  <table class="book-chapter-table">
    <thead><tr>{head}</tr></thead>
    <tbody>
{body}
    </tbody>
  </table>
</main>
</div>
</body>
</html>
"""
