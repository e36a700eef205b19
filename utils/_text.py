"""Plain-text tables for a monospace printout, in either language: a wide character (Chinese, full-width
punctuation) takes two columns, so a table with Chinese labels lines up as an English one does.

Python's ``f"{text:>{width}}"`` counts every character as one column, which misaligns Chinese labels.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

__all__ = ["display_width", "pad", "text_table"]


def display_width(text: str) -> int:
    """Columns ``text`` takes in a monospace font, a wide character counting as two.

    >>> display_width("peak"), display_width("峰值内存")
    (4, 8)
    """
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def pad(text: str, width: int, align: str = "<") -> str:
    """``text`` padded with spaces to ``width`` display columns, on the right (``align="<"``) or on the
    left (``">"``); a longer ``text`` is kept whole.

    >>> pad("窗口", 6, ">") + "|", pad("ab", 4) + "|"
    ('  窗口|', 'ab  |')
    """
    if align not in ("<", ">"):
        raise ValueError(f"align must be '<' or '>', got {align!r}")
    spaces = " " * max(0, width - display_width(text))
    return spaces + text if align == ">" else text + spaces


def text_table(header: Sequence[str], body: Sequence[Sequence[str]], align: str = "") -> str:
    """A plain-text table: columns padded to their widest cell, two spaces apart, no trailing spaces.
    ``align`` gives each column's ``<`` or ``>`` (default: all left).

    >>> print(text_table(("name", "ratio"), [("fast path", "0.95x"), ("explicit", "1.20x")]))
    name       ratio
    fast path  0.95x
    explicit   1.20x
    >>> print(text_table(("缓存", "损失"), [("完整缓存", "3.25"), ("窗口", "4.40")], align="<>"))
    缓存      损失
    完整缓存  3.25
    窗口      4.40
    """
    lines = [tuple(header), *(tuple(row) for row in body)]
    if any(len(line) != len(header) for line in lines):
        raise ValueError(f"every row of body must have {len(header)} cells, as header has; got "
                         f"{sorted({len(line) for line in lines})}")
    align = align or "<" * len(header)
    if len(align) != len(header):
        raise ValueError(f"align must give one of '<' or '>' per column ({len(header)}), got {align!r}")
    widths = [max(display_width(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(pad(cell, w, a) for cell, w, a in zip(line, widths, align)).rstrip()
                     for line in lines)
