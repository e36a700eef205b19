"""Remake the course's CJK font subset, ``utils/plotting/fonts/NotoSansSC-CourseSubset.otf``.

When to rerun: when ``tests/test_cjk_font.py`` says a catalogue (``i18n/**/*.po`` or
``utils/i18n/locale/**/*.po``) has a CJK character that the subset lacks, i.e. after a translation
adds a rare hanzi. The common set (GB 2312, 6763 hanzi) is already in; most new text needs nothing.

The source is Noto Sans CJK SC Regular (SIL OFL 1.1) from Debian's ``fonts-noto-cjk`` package (the
course needs no network at run time, so the subset is committed; making it needs Debian's archive)::

    apt-get download fonts-noto-cjk && dpkg-deb -x fonts-noto-cjk_*.deb /tmp/noto
    python -m utils.plotting.fonts.make_subset \\
        --source /tmp/noto/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc

The subset keeps the CFF outlines (smaller than TrueType), drops hinting (matplotlib auto-hints) and
renames the family to ``CJK_FONT_FAMILY`` so that it never shadows a full Noto font installed on the
system. Latin letters and digits are not needed: matplotlib draws them with DejaVu Sans, which comes
first in ``font.family``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from utils.paths import REPO_ROOT
from utils.plotting.fonts import CJK_FONT_FAMILY, CJK_FONT_PATH, cjk_characters

__all__ = ["catalogue_characters", "gb2312_characters", "subset_characters", "make_subset", "CATALOGUE_GLOBS"]

CATALOGUE_GLOBS = ("i18n/**/*.po", "utils/i18n/locale/**/*.po")
"""Where the translation catalogues live, relative to the repository root."""

_SOURCE_FAMILY = "Noto Sans CJK SC"
# Full-width punctuation, quotes and the CJK symbols block: wanted even where no catalogue uses them yet.
_PUNCTUATION = "，。：；！？（）「」『』《》〈〉【】〔〕、…—～·“”‘’"
_BLOCKS = ((0x3000, 0x303F), (0xFF01, 0xFF5E), (0xFFE0, 0xFFE6))


def gb2312_characters() -> set[str]:
    """Every character of GB 2312 (its 6763 hanzi, plus its punctuation, kana, Greek, Cyrillic rows).

    >>> chars = gb2312_characters()
    >>> len(cjk_characters("".join(chars)) & {chr(c) for c in range(0x4E00, 0xA000)})
    6763
    """
    chars = set()
    for high in range(0xA1, 0xF8):
        for low in range(0xA1, 0xFF):
            try:
                chars.add(bytes((high, low)).decode("gb2312"))
            except UnicodeDecodeError:
                continue
    return chars


def catalogue_characters(root: Path | str = REPO_ROOT) -> dict[str, list[str]]:
    """Each CJK character of every translation catalogue under ``root`` -> the catalogues that use it."""
    found: dict[str, list[str]] = {}
    for pattern in CATALOGUE_GLOBS:
        for path in sorted(Path(root).glob(pattern)):
            for char in sorted(cjk_characters(path.read_text(encoding="utf-8"))):
                found.setdefault(char, []).append(str(path.relative_to(root)))
    return found


def subset_characters(root: Path | str = REPO_ROOT) -> set[str]:
    """What the subset must cover: GB 2312, the punctuation above, and every catalogue's CJK characters."""
    chars = gb2312_characters() | set(_PUNCTUATION) | set(catalogue_characters(root))
    for start, end in _BLOCKS:
        chars |= {chr(c) for c in range(start, end + 1)}
    return chars


def _rename(font) -> None:
    """Give the subset its own family name (names 1, 3, 4, 6, 16), keeping copyright and licence records."""
    postscript = CJK_FONT_FAMILY.replace(" ", "") + "-Regular"
    names = {1: CJK_FONT_FAMILY, 3: postscript, 4: CJK_FONT_FAMILY, 6: postscript, 16: CJK_FONT_FAMILY}
    table = font["name"]
    table.names = [record for record in table.names if record.nameID not in names and record.nameID != 17]
    for name_id, value in names.items():
        table.setName(value, name_id, 3, 1, 0x409)
        table.setName(value, name_id, 1, 0, 0)
    cff = font["CFF "].cff
    cff.fontNames = [postscript]
    top = cff.topDictIndex[0]
    top.FullName, top.FamilyName = CJK_FONT_FAMILY, CJK_FONT_FAMILY


def make_subset(source: Path | str, out: Path | str = CJK_FONT_PATH, root: Path | str = REPO_ROOT) -> dict:
    """Write the subset of ``source`` (a Noto Sans CJK ``.ttc`` or the SC ``.otf``) to ``out``.

    Returns:
        A summary: characters asked for, characters written, those the source lacks, bytes written.
    """
    from fontTools import subset
    from fontTools.ttLib import TTCollection, TTFont

    source = Path(source)
    if source.suffix.lower() in {".ttc", ".otc"}:
        faces = [i for i, f in enumerate(TTCollection(source, lazy=True).fonts)
                 if f["name"].getDebugName(1) == _SOURCE_FAMILY]
        if not faces:
            raise ValueError(f"source: {source} has no {_SOURCE_FAMILY!r} face")
        font = TTFont(source, fontNumber=faces[0], recalcTimestamp=False)
    else:
        font = TTFont(source, recalcTimestamp=False)
    wanted = subset_characters(root)
    cmap = font.getBestCmap()
    present = {c for c in wanted if ord(c) in cmap}
    options = subset.Options()
    options.hinting = False
    options.name_IDs = [0, 1, 2, 3, 4, 5, 6, 7, 11, 13, 14, 16]
    options.name_languages = [0x409, 0]
    options.notdef_outline = True
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=sorted(ord(c) for c in present))
    subsetter.subset(font)
    _rename(font)
    out = Path(out)
    font.save(out)
    return {"wanted": len(wanted), "written": len(present), "missing": sorted(wanted - present),
            "bytes": out.stat().st_size}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m utils.plotting.fonts.make_subset", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", required=True, help="NotoSansCJK-Regular.ttc (Debian's fonts-noto-cjk)")
    parser.add_argument("--out", default=str(CJK_FONT_PATH), help="Default: %(default)s")
    args = parser.parse_args(argv)
    summary = make_subset(args.source, args.out)
    print(f"{summary['written']} of {summary['wanted']} characters, {summary['bytes'] / 1e6:.2f} MB -> {args.out}")
    if summary["missing"]:
        print("not in the source font, left out:", "".join(summary["missing"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
