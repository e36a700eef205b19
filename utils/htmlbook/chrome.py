"""The words of the HTML edition's own page chrome, in each language it is built in.

The edition has an English and a Chinese half (``build/html/`` and ``build/html/zh/``). The chapters'
text comes from their notebooks; what the book itself adds around them (the sidebar, previous and
next, the setup fold, the index page, the explorer blocks' labels, the language switch) comes from
:data:`CHROME`, English in the source and Chinese from the message catalogue ``htmlbook.chrome.po``.
Every page has a switch to the same page in the other language, with a relative link.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from utils.i18n.messages import LANGUAGES, tr, using_language

__all__ = ["CHROME", "EDITION_LANGUAGES", "Chrome", "chrome", "language_switch", "page_href"]

EDITION_LANGUAGES = tuple(LANGUAGES)
"""The languages of the edition; the first is at the top of ``build/html``, the others in a folder each."""


@dataclass(frozen=True)
class Chrome:
    """The page chrome's words in one language (``html_lang`` is the ``<html lang>`` value)."""

    html_lang: str
    book_title: str
    contents: str
    chapters_label: str
    pager_label: str
    back_to_contents: str
    setup: str
    setup_hint: str
    index_intro: str
    table_head: tuple[str, str, str, str]
    precomputed: str
    explorer_about: str  # str.format: {states}, {stops}
    explorer_stops: str
    explorer_alt: str
    explorer_noscript: str
    switch_text: str  # the link that leads to this language, written in it
    switch_label: str  # its title, also in this language


def chrome(lang: str) -> Chrome:
    """The page chrome in ``lang``. The English below is the source; ``python -m utils.i18n update`` reads
    each ``tr("...")`` into ``htmlbook.chrome.po``, whose Chinese the Chinese half shows."""
    locale = LANGUAGES[lang]
    with using_language(lang):
        return Chrome(
            html_lang=locale.replace("_", "-") if locale else lang,
            book_title=tr("Attention, Step by Step"),
            contents=tr("Contents"),
            chapters_label=tr("Chapters"),
            pager_label=tr("Previous and next"),
            back_to_contents=tr("← Contents"),
            setup=tr("Setup"),
            setup_hint=tr("(imports, seeds and the device: the code runs first in every chapter)"),
            index_intro=tr(
                "Self-attention from first principles, one idea at a time, with every claim checked against "
                "PyTorch. This is the static edition: every chapter with its solutions, figures and quizzes. The "
                "explorers are <em>precomputed</em>: each figure was rendered when the book was built, for a grid "
                "of control values, so the controls respond without a kernel. To change anything else, or type "
                "your own input, run the notebooks (<code>make lab</code>, Binder or Colab)."),
            # one message: this "time" is a duration (时长), another module's "time" is 时间
            table_head=("#", *tr("chapter | time | you will be able to").split(" | ")),
            precomputed=tr("precomputed"),
            explorer_about=tr("{states} states, rendered when this page was built; no kernel runs here{stops}."),
            explorer_stops=tr(", and a slider stops only at the rendered values"),
            explorer_alt=tr("the explorer's figure for the chosen controls"),
            explorer_noscript=tr("Scripts are off: this is the figure the explorer was saved with. Turn JavaScript "
                                 "on to move the controls."),
            switch_text=tr("English"),  # in Chinese, "中文": the link to a language is written in it
            switch_label=tr("Read this page in English"),
        )


CHROME = {lang: chrome(lang) for lang in EDITION_LANGUAGES}
"""Language -> its page chrome."""


def page_href(page: str, lang: str, from_lang: str) -> str:
    """The relative link from a page of ``from_lang`` to ``page`` (``"index"`` or a stem) in ``lang``.

    >>> page_href("02_x", "zh", "en"), page_href("02_x", "en", "zh"), page_href("index", "zh", "zh")
    ('zh/02_x.html', '../02_x.html', 'index.html')
    """
    up = "" if from_lang == EDITION_LANGUAGES[0] else "../"
    down = "" if lang == EDITION_LANGUAGES[0] else f"{lang}/"
    return f"{up}{down}{page}.html" if lang != from_lang else f"{page}.html"


def language_switch(page: str, lang: str) -> str:
    """The switch on a page of ``lang``: a link to the same ``page`` in each other language."""
    links = []
    for other in EDITION_LANGUAGES:
        if other == lang:
            continue
        words = CHROME[other]
        links.append(f'<a class="book-lang-link" href="{page_href(page, other, lang)}" hreflang="{words.html_lang}" '
                     f'lang="{words.html_lang}" title="{html.escape(words.switch_label)}">'
                     f"{html.escape(words.switch_text)}</a>")
    return f'<div class="book-lang">{"".join(links)}</div>'
