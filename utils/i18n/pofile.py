"""A small reader of gettext ``.po`` files for run time, so that a learner's kernel needs no Babel.

The catalogues are written by Babel (:mod:`utils.i18n.message_catalog`); this reads back what a kernel
needs: each current entry's context, English, translation and whether it is fuzzy. Obsolete entries
(``#~``) and previous msgids (``#|``) are skipped. A test reads every catalogue with both readers and
compares.

>>> import io
>>> text = 'msgid ""\\nmsgstr ""\\n\\n#, fuzzy\\nmsgctxt "a"\\nmsgid "Hi\\\\n"\\n"there"\\nmsgstr "你好"\\n'
>>> [(e.context, e.msgid, e.msgstr, e.fuzzy) for e in parse_entries(io.StringIO(text).read())]
[('a', 'Hi\\nthere', '你好', True)]
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["PoEntry", "parse_entries", "read_entries"]

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}


@dataclass(frozen=True)
class PoEntry:
    """One entry of a catalogue."""

    context: str | None
    msgid: str
    msgstr: str
    fuzzy: bool


def _unquote(token: str, where: str) -> str:
    if len(token) < 2 or token[0] != '"' or token[-1] != '"':
        raise ValueError(f"{where}: expected a quoted string, got {token[:40]!r}")
    out, body, i = [], token[1:-1], 0
    while i < len(body):
        char = body[i]
        if char == "\\" and i + 1 < len(body):
            out.append(_ESCAPES.get(body[i + 1], body[i + 1]))
            i += 2
        else:
            out.append(char)
            i += 1
    return "".join(out)


def parse_entries(text: str, where: str = "<po>") -> list[PoEntry]:
    """The entries of a ``.po`` text (the header, msgid ``""``, left out)."""
    entries: list[PoEntry] = []
    fields: dict[str, list[str]] = {}
    fuzzy, current = False, None

    def flush() -> None:
        nonlocal fields, fuzzy, current
        if "msgid" in fields and fields["msgid"] != [""] and "".join(fields["msgid"]):
            context = "".join(fields["msgctxt"]) if "msgctxt" in fields else None
            entries.append(PoEntry(context, "".join(fields["msgid"]), "".join(fields.get("msgstr", [])), fuzzy))
        fields, fuzzy, current = {}, False, None

    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        at = f"{where}:{number}"
        if not line:
            flush()
        elif line.startswith("#"):
            if current is not None and current != "comment":
                flush()
            current = "comment"
            if line.startswith("#,") and "fuzzy" in (flag.strip() for flag in line[2:].split(",")):
                fuzzy = True
        elif line.startswith('"'):
            if current in (None, "comment"):
                raise ValueError(f"{at}: a continuation line outside an entry")
            fields[current].append(_unquote(line, at))
        else:
            keyword, _, rest = line.partition(" ")
            if keyword not in ("msgctxt", "msgid", "msgstr"):
                raise ValueError(f"{at}: unknown keyword {keyword!r}")
            if keyword in fields or (keyword == "msgctxt" and "msgid" in fields):
                flush()
            current = keyword
            fields[keyword] = [_unquote(rest.strip(), at)]
    flush()
    return entries


def read_entries(path: str | Path) -> list[PoEntry]:
    """The entries of the catalogue at ``path``."""
    path = Path(path)
    return parse_entries(path.read_text(encoding="utf-8"), path.name)
