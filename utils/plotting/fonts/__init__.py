"""The CJK font that lets every figure show Chinese, offline: a subset of Noto Sans CJK SC (SIL OFL 1.1).

The font file travels inside the package (``OFL.txt`` beside it is its licence), so nothing is
fetched at run time: not here, not on Binder, not on Colab. Importing ``utils.plotting`` calls
``register_cjk_font()``, which adds the file to matplotlib and appends its family to ``font.family``
(after ``sans-serif``, i.e. DejaVu Sans). matplotlib (>= 3.6) falls back glyph by glyph along that
list, so Latin letters and digits are still drawn by DejaVu Sans, exactly as before, and only what
DejaVu Sans lacks (hanzi, full-width punctuation) comes from this font. ``make_subset.py`` remakes the file and says
when to.

>>> CJK_FONT_PATH.is_file()
True
>>> sorted(cjk_characters("Query 查询，键"))
['查', '询', '键', '，']
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import matplotlib
from matplotlib import font_manager

__all__ = ["CJK_FONT_PATH", "CJK_FONT_FAMILY", "CJK_RANGES", "cjk_characters", "register_cjk_font"]

CJK_FONT_PATH = Path(__file__).resolve().parent / "NotoSansSC-CourseSubset.otf"
"""The font file (OpenType, CFF outlines), for matplotlib and for the HTML edition's ``@font-face``."""

CJK_FONT_FAMILY = "Noto Sans SC Course Subset"
"""The family name inside the file (renamed, so it never shadows a full Noto font on the system)."""

_OTHER_WEIGHTS = (100, 200, 300, 500, 600, 700, 800, 900)

CJK_RANGES = (
    (0x2E80, 0x2FFF),  # radicals, Kangxi radicals, ideographic description characters
    (0x3000, 0x303F),  # CJK symbols and punctuation: 、。「」《》
    (0x3040, 0x30FF),  # kana
    (0x3100, 0x312F),  # bopomofo
    (0x3190, 0x33FF),  # kanbun, strokes, enclosed letters, compatibility
    (0x3400, 0x4DBF),  # extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xF900, 0xFAFF),  # compatibility ideographs
    (0xFE10, 0xFE1F),  # vertical forms
    (0xFE30, 0xFE4F),  # compatibility forms
    (0xFF00, 0xFFEF),  # half-width and full-width forms: ，：；！？（）
    (0x20000, 0x3134F),  # extensions B to G
)
"""Inclusive code point ranges that count as CJK: the characters the subset must cover."""


def cjk_characters(text: str) -> set[str]:
    """The characters of ``text`` that fall in ``CJK_RANGES``."""
    return {char for char in set(text) if any(start <= ord(char) <= end for start, end in CJK_RANGES)}


def register_cjk_font() -> str:
    """Add the CJK font to matplotlib as the per-glyph fallback after the default family. Idempotent.

    matplotlib falls back glyph by glyph along ``font.family`` (not within the generic ``sans-serif``
    list, which resolves to one font), so the family is appended there: ``["sans-serif",
    CJK_FONT_FAMILY]``. Text keeps its font (DejaVu Sans by default) for every glyph that font has.
    Call it again after ``matplotlib.rcdefaults()`` or ``plt.style.use(...)``, which reset
    ``font.family``.

    Returns:
        ``CJK_FONT_FAMILY``.

    >>> import matplotlib
    >>> register_cjk_font() in matplotlib.rcParams["font.family"]
    True
    """
    path = str(CJK_FONT_PATH)
    manager = font_manager.fontManager
    if not any(entry.fname == path for entry in manager.ttflist):
        manager.addfont(path)
        # One Regular face stands for every weight: otherwise each bold text (any language) makes findfont log
        # "Failed to find font weight bold", which a notebook shows on stderr. Bold hanzi draw Regular.
        (regular,) = (entry for entry in manager.ttflist if entry.fname == path)
        manager.ttflist += [dataclasses.replace(regular, weight=weight) for weight in _OTHER_WEIGHTS]
        manager._findfont_cached.cache_clear()
    families = list(matplotlib.rcParams["font.family"])
    if CJK_FONT_FAMILY not in families:
        matplotlib.rcParams["font.family"] = [*families, CJK_FONT_FAMILY]
    return CJK_FONT_FAMILY
