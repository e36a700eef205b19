"""The words of the HTML edition's own page chrome, in each language it is built in.

The edition has an English and a Chinese half (``build/html/`` and ``build/html/zh/``). The chapters'
text comes from their notebooks; what the book itself adds around them (the sidebar, previous and
next, the setup fold, the index page, the explorer blocks' labels, the language switch) comes from
:data:`CHROME`. Every page has a switch to the same page in the other language, with a relative link.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

__all__ = ["CHROME", "EDITION_LANGUAGES", "Chrome", "language_switch", "page_href"]

EDITION_LANGUAGES = ("en", "zh")
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
    explorer_about: str  # str.format: {states}, {snaps}
    explorer_snaps: str
    explorer_alt: str
    explorer_noscript: str
    switch_text: str  # the link that leads to this language, written in it
    switch_label: str  # its title, also in this language


CHROME = {
    "en": Chrome(
        html_lang="en",
        book_title="Attention, Step by Step",
        contents="Contents",
        chapters_label="Chapters",
        pager_label="Previous and next",
        back_to_contents="← Contents",
        setup="Setup",
        setup_hint="(imports, seeds and the device: the code runs first in every chapter)",
        index_intro=(
            "Self-attention from first principles, one idea at a time, with every claim checked against "
            "PyTorch. This is the static edition: every chapter with its solutions, figures and quizzes. The "
            "explorers are <em>precomputed</em>: each figure was rendered when the book was built, for a grid "
            "of control values, so the controls respond without a kernel. To change anything else, or type "
            "your own input, run the notebooks (<code>make lab</code>, Binder or Colab)."),
        table_head=("#", "chapter", "time", "you will be able to"),
        precomputed="precomputed",
        explorer_about="{states} states, rendered when this page was built; no kernel runs here{snaps}.",
        explorer_snaps=", and a slider snaps to the nearest rendered value",
        explorer_alt="the explorer's figure for the chosen controls",
        explorer_noscript=("Scripts are off: this is the figure the explorer was saved with. Turn JavaScript "
                           "on to move the controls."),
        switch_text="English",
        switch_label="Read this page in English",
    ),
    "zh": Chrome(
        html_lang="zh-CN",
        book_title="注意力，一步一步",
        contents="目录",
        chapters_label="章节",
        pager_label="上一章和下一章",
        back_to_contents="← 目录",
        setup="环境设置",
        setup_hint="（导入、随机种子和设备：每一章最先运行的代码）",
        index_intro=(
            "从第一性原理出发讲解自注意力，一次只讲一个概念，每个结论都用 PyTorch 验证。这是静态版："
            "每一章都带有答案、图和测验。探索器是<em>预先计算</em>的：构建本书时，已经为一组控件取值把每张图"
            "都渲染好了，所以不需要内核，控件也能响应。想改动其他内容或输入你自己的文字，请运行笔记本"
            "（<code>make lab</code>、Binder 或 Colab）。"),
        table_head=("#", "章节", "时长", "学完你将能够"),
        precomputed="预先计算",
        explorer_about="共 {states} 种状态，在构建本页时渲染；这里不运行内核{snaps}。",
        explorer_snaps="，滑块会吸附到最近的已渲染取值",
        explorer_alt="探索器在所选控件取值下的图",
        explorer_noscript="脚本已关闭：这是探索器保存时的图。打开 JavaScript 才能移动控件。",
        switch_text="中文",
        switch_label="阅读本页的中文版",
    ),
}


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
