"""The HTML edition's page chrome: English in ``utils/htmlbook/chrome.py``, every other language from the
message catalogue ``utils/i18n/locale/<locale>/htmlbook.chrome.po``."""

from __future__ import annotations

import dataclasses
import string

import pytest

from utils.htmlbook.chrome import CHROME, EDITION_LANGUAGES, chrome
from utils.i18n.messages import LANGUAGES


def _texts(words) -> dict[str, str]:
    fields = dataclasses.asdict(words)
    texts = {name: value for name, value in fields.items() if isinstance(value, str) and name != "html_lang"}
    texts.update({f"table_head[{i}]": head for i, head in enumerate(fields["table_head"]) if i})  # "#" stays
    return texts


def test_the_edition_is_built_in_every_course_language():
    assert EDITION_LANGUAGES == tuple(LANGUAGES) and EDITION_LANGUAGES[0] == "en"
    assert list(CHROME) == list(EDITION_LANGUAGES)
    assert [CHROME[lang].html_lang for lang in EDITION_LANGUAGES] == ["en", "zh-CN"]


@pytest.mark.parametrize("lang", EDITION_LANGUAGES[1:])
def test_every_word_of_a_translated_half_comes_from_its_catalogue(lang):
    english, translated = _texts(chrome("en")), _texts(chrome(lang))
    untranslated = [name for name in english if translated[name] == english[name]]
    assert not untranslated, f"{lang}: still English (htmlbook.chrome.po lacks them): {untranslated}"
    assert len(chrome(lang).table_head) == 4


@pytest.mark.parametrize("lang", EDITION_LANGUAGES)
def test_the_explorer_sentence_keeps_its_fields(lang):
    fields = {name for _, name, _, _ in string.Formatter().parse(CHROME[lang].explorer_about) if name}
    assert fields == {"states", "stops"}


def test_the_chinese_pages_read_as_before():
    zh = CHROME["zh"]
    assert (zh.book_title, zh.contents, zh.table_head, zh.switch_text) == (
        "一步一步学注意力", "目录", ("#", "章节", "时长", "学完你将能够"), "中文")
