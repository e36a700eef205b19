"""The messages a learner reads outside the prose, in the learner's language: check-cell diagnoses and
hints, quiz questions and feedback, explorer labels, figure titles and axis labels, the grader's feedback.

English is the source and the default. Two ways to mark a message:

- ``tr("literal English", **fields)`` where the message is written: the first argument is always a
  string literal (``python -m utils.i18n update`` finds every call by reading the source, and a test
  fails on a call it cannot read). With fields it is a :meth:`str.format` template:
  ``tr("scores of {token!r}", token=t)`` (the Chinese keeps the same fields).
- ``translate(text)`` for text that is data, found by walking where it lives: every exercise's
  diagnoses, hint and part names (:mod:`utils.i18n.extract`).

The language is chosen once: :func:`set_language` (the Chinese notebooks' setup cell calls
``utils.setup(lang="zh")``), else the environment variable :data:`LANG_ENV` (``COURSE_LANG=zh``), else
English. A message without a current Chinese translation stays English (and ``python -m utils.i18n
check`` fails on it).

>>> with using_language("en"):
...     tr("{n} heads", n=4)
'4 heads'
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = [
    "LANGUAGES",
    "LANG_ENV",
    "LOCALE_DIR",
    "current_language",
    "message_table",
    "normalize_language",
    "set_language",
    "tr",
    "translate",
    "using_language",
]

LANG_ENV = "COURSE_LANG"
"""The environment variable that picks the language when no setup cell did (``en`` or ``zh``)."""
LANGUAGES = {"en": None, "zh": "zh_CN"}
"""Language -> its catalogue locale (English is the source: no catalogue)."""
LOCALE_DIR = Path(__file__).resolve().parent / "locale"
"""``<locale>/<domain>.po``: the message catalogues, package data (they ship with ``pip install``)."""

_ALIASES = {"en": "en", "en_us": "en", "en_gb": "en", "english": "en",
            "zh": "zh", "zh_cn": "zh", "zh_hans": "zh", "zh_hans_cn": "zh", "chinese": "zh", "中文": "zh"}
_chosen: str | None = None


def normalize_language(value: str, name: str = "lang") -> str:
    """``"en"`` or ``"zh"`` for the usual spellings (``zh_CN``, ``zh-CN``, ``zh-Hans``, ``EN``...).

    >>> normalize_language("zh-CN"), normalize_language("en")
    ('zh', 'en')
    >>> normalize_language("fr")
    Traceback (most recent call last):
    ...
    ValueError: lang='fr' is not a course language: use 'en' (English) or 'zh' (简体中文)
    """
    key = str(value).strip().lower().replace("-", "_").split(".")[0]
    if key not in _ALIASES:
        raise ValueError(f"{name}={value!r} is not a course language: use 'en' (English) or 'zh' (简体中文)")
    return _ALIASES[key]


def set_language(lang: str | None) -> str:
    """Choose the language of every later message; ``None`` goes back to :data:`LANG_ENV` or English.
    Returns the language now in force."""
    global _chosen
    _chosen = None if lang is None else normalize_language(lang)
    return current_language()


def current_language() -> str:
    """The language in force: :func:`set_language`'s, else :data:`LANG_ENV`'s, else ``"en"``."""
    if _chosen is not None:
        return _chosen
    value = os.environ.get(LANG_ENV, "").strip()
    return normalize_language(value, LANG_ENV) if value else "en"


@contextmanager
def using_language(lang: str | None) -> Iterator[str]:
    """Messages in ``lang`` inside the block (the grader writes one student's feedback, a test renders a
    Chinese figure); the language before is restored after it."""
    global _chosen
    before = _chosen
    try:
        yield set_language(lang)
    finally:
        _chosen = before


@functools.cache
def message_table(locale: str) -> dict[str, str]:
    """English -> translation, from every ``LOCALE_DIR/<locale>/*.po`` (current entries only: a fuzzy or
    empty one is left out, so its English shows). Read once per process."""
    from utils.i18n.pofile import read_entries

    table: dict[str, str] = {}
    for path in sorted((LOCALE_DIR / locale).glob("*.po")):
        for entry in read_entries(path):
            if entry.msgstr and not entry.fuzzy:
                table.setdefault(entry.msgid, entry.msgstr)
    return table


def translate(text: str) -> str:
    """``text`` in the current language (itself when English, or when it has no current translation)."""
    locale = LANGUAGES[current_language()]
    if locale is None or not text:
        return text
    return message_table(locale).get(text, text)


def tr(english: str, /, **fields: object) -> str:
    """A marked message in the current language; with ``fields``, formatted with :meth:`str.format`.

    The first argument must be a string literal: the catalogues are made by reading the source.
    """
    text = translate(english)
    return text.format(**fields) if fields else text
