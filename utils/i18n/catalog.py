"""Translation catalogues: one gettext ``i18n/zh_CN/<stem>.po`` per solution notebook, read and written
with Babel.

Each non-empty markdown cell of ``solutions/<stem>.ipynb`` is one entry: ``msgctxt`` is the cell id,
``msgid`` the cell's English source (with the badge region that the builder stamps left empty:
``<!-- badges -->`` and ``<!-- /badges -->`` on lines of their own), ``msgstr`` its Chinese.

:func:`update_catalogue` brings a catalogue in step with its notebook, matching entries by cell id:

- a new cell gets an empty entry;
- a cell whose English changed keeps its Chinese, marked ``fuzzy``, with the English that the Chinese
  translates kept as ``previous_id`` (written ``#| msgid ...``), so the translator sees what changed;
- a removed cell's entry becomes obsolete (written ``#~``), so its Chinese is not lost;
- everything else is left exactly as it is: an update with nothing to do rewrites the same bytes.

Babel 2.19 neither reads ``#| msgid`` back (its reader keeps it as a comment) nor writes a multi-line
one validly (it wraps the comment inside a string), so :func:`catalogue_text` writes it in GNU
gettext's form (``#| msgid ""`` then one ``#| "..."`` per line) and :func:`read_catalogue` recovers it.
Lines are never wrapped (``width=0``): one markdown line is one PO line.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path

import nbformat
from babel.messages.catalog import Catalog, Message
from babel.messages.pofile import escape, normalize, read_po, unescape, write_po

from utils.notebook_files import BADGES_CLOSE, BADGES_OPEN

__all__ = [
    "CATALOGUE_DIR",
    "LOCALE",
    "OUTPUT_DIR",
    "blank_badges",
    "catalogue_path",
    "carry_over",
    "catalogue_text",
    "entries_by_cell",
    "markdown_entries",
    "new_catalogue",
    "read_catalogue",
    "update_catalogue",
]

LOCALE = "zh_CN"
"""The one translation so far: Simplified Chinese."""
CATALOGUE_DIR = Path("i18n") / LOCALE
"""Where the catalogues live, relative to the course root."""
OUTPUT_DIR = "zh"
"""The folder, under ``solutions/`` and ``chapters/``, of the generated Chinese notebooks."""

_BADGES = re.compile(re.escape(BADGES_OPEN) + r".*?" + re.escape(BADGES_CLOSE), re.DOTALL)
_PREVIOUS = "| msgid "
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')
_HEADER_COMMENT = (
    "# Chinese (Simplified) translation of {stem}.ipynb of the course Attention, Step by Step.\n"
    "# msgctxt is the cell id, msgid the English markdown cell, msgstr its Chinese.\n"
    "# Update with `python -m utils.i18n update`; terms: i18n/zh_CN/GLOSSARY.md."
)
_FIXED_DATE = datetime(2026, 1, 1, tzinfo=timezone.utc)  # dates never change on update: byte-stable files


def catalogue_path(root: str | Path, stem: str) -> Path:
    """The catalogue of ``solutions/<stem>.ipynb``.

    >>> catalogue_path("/course", "01_queries_keys_values").as_posix()
    '/course/i18n/zh_CN/01_queries_keys_values.po'
    """
    return Path(root) / CATALOGUE_DIR / f"{stem}.po"


def blank_badges(source: str) -> str:
    """``source`` with what lies between the badge markers removed (the builder stamps it per language).

    >>> blank_badges("# T\\n<!-- badges -->\\n[![x](y)](z)\\n<!-- /badges -->\\n\\ntext")
    '# T\\n<!-- badges -->\\n<!-- /badges -->\\n\\ntext'
    """
    return _BADGES.sub(f"{BADGES_OPEN}\n{BADGES_CLOSE}", source)


def markdown_entries(nb: nbformat.NotebookNode) -> list[tuple[str, str]]:
    """``(cell id, msgid)`` of every non-empty markdown cell, in notebook order (an empty msgid is
    gettext's header, so an empty cell has no entry and stays empty)."""
    return [(cell["id"], blank_badges(cell["source"])) for cell in nb["cells"]
            if cell["cell_type"] == "markdown" and cell["source"].strip()]


def new_catalogue(stem: str) -> Catalog:
    """An empty catalogue for ``solutions/<stem>.ipynb`` with a fixed header."""
    return Catalog(
        locale=LOCALE, project="attention-step-by-step", version=stem, fuzzy=False,
        header_comment=_HEADER_COMMENT.format(stem=stem), creation_date=_FIXED_DATE, revision_date=_FIXED_DATE,
        last_translator="attention-step-by-step contributors", language_team="Chinese (Simplified)",
        msgid_bugs_address="https://github.com/attention-step-by-step/attention-step-by-step/issues",
    )


def _recover_previous(message: Message) -> None:
    """Move the ``#| msgid ""`` / ``#| "..."`` comments back into ``message.previous_id``."""
    kept, previous, inside = [], None, False
    for comment in message.user_comments:
        if comment.startswith(_PREVIOUS) and previous is None:
            previous, inside = [comment[len(_PREVIOUS):]], True
        elif inside and comment.startswith('| "'):
            previous.append(comment[2:])
        else:
            kept.append(comment)
            inside = False
    if previous is not None:
        message.previous_id = ["".join(unescape(token) for line in previous for token in _QUOTED.findall(line))]
    message.user_comments = kept


def read_catalogue(path: str | Path) -> Catalog:
    """Read a ``.po`` file, with each fuzzy entry's previous msgid restored."""
    with open(path, "rb") as handle:
        catalog = read_po(handle, locale=LOCALE)
    for message in [*catalog, *catalog.obsolete.values()]:
        if message.id:
            _recover_previous(message)
    return catalog


def catalogue_text(catalog: Catalog) -> str:
    """The catalogue as it is written to disk: unwrapped, previous msgids included, obsolete entries last."""
    buffer = io.BytesIO()
    write_po(buffer, catalog, width=0)
    text = buffer.getvalue().decode("utf-8")
    for message in catalog:
        if message.id and message.previous_id:
            lines = normalize(message.previous_id[0], width=0).split("\n")
            previous = "".join(f"#| {'msgid ' if i == 0 else ''}{line}\n" for i, line in enumerate(lines))
            if message.context is not None:
                anchor = f"\nmsgctxt {escape(message.context)}\n"
            else:  # a message keyed by its English alone: the first line written after its comments
                anchor = f"\nmsgid {normalize(message.id, width=0)}\n"
            text = text.replace(anchor, f"\n{previous}{anchor[1:]}", 1)
    return text


def _copy(message: Message, **changes) -> Message:
    fields = dict(id=message.id, string=message.string, context=message.context, flags=set(message.flags),
                  previous_id=list(message.previous_id), user_comments=list(message.user_comments),
                  auto_comments=list(message.auto_comments))
    fields.update(changes)
    return Message(**fields)


def carry_over(old: Message | None, english: str, context: str | None, **fields) -> Message:
    """The entry for ``english`` given the entry ``old`` that translated it or an earlier English
    (``None``: none): the same when the English is the same, fuzzy with ``previous_id`` when it changed,
    current again when it changed back, empty when there was no Chinese. ``fields`` (e.g. ``locations``,
    ``flags``) are set on the result; the ``fuzzy`` flag is the one this decides.
    """
    if old is None or not old.string:
        message = Message(english, "", context=context)
    elif old.id == english:
        message = _copy(old)
    elif old.fuzzy and old.previous_id == [english]:  # changed back to what the Chinese translates
        message = _copy(old, id=english, flags=set(old.flags) - {"fuzzy"}, previous_id=[])
    else:  # the English changed: keep the Chinese, fuzzy, and the English it translates
        previous = old.previous_id if old.fuzzy and old.previous_id else [old.id]
        message = _copy(old, id=english, flags=set(old.flags) | {"fuzzy"}, previous_id=list(previous))
    message.context = context
    fuzzy = message.fuzzy
    for name, value in fields.items():
        setattr(message, name, value)
    if "flags" in fields:
        message.flags = set(fields["flags"]) | ({"fuzzy"} if fuzzy else set())
    return message


def update_catalogue(catalog: Catalog, entries: Iterable[tuple[str, str]]) -> Catalog:
    """A new catalogue holding ``entries`` (``(cell id, English)``, in order), matched by cell id to
    ``catalog``'s entries (see the module docstring for what happens to new, changed and removed cells).

    >>> old = new_catalogue("01_x")
    >>> _ = old.add("Hello", "你好", context="a")
    >>> new = update_catalogue(old, [("a", "Hello!"), ("b", "More")])
    >>> [(m.context, m.string, m.fuzzy, m.previous_id) for m in new if m.id]
    [('a', '你好', True, ['Hello']), ('b', '', False, [])]
    """
    by_cell: dict[str, Message] = {m.context: m for m in catalog.obsolete.values()}
    by_cell.update({m.context: m for m in catalog if m.id})
    updated = new_catalogue("")
    updated.header_comment = catalog.header_comment
    updated.mime_headers = catalog.mime_headers
    updated.fuzzy = catalog.fuzzy
    seen = set()
    for cell_id, english in entries:
        seen.add(cell_id)
        updated[english] = carry_over(by_cell.get(cell_id), english, cell_id)
    for context, old in by_cell.items():
        if context not in seen and old.string:
            updated.obsolete[(old.id, context)] = _copy(old, previous_id=[])
    return updated


def entries_by_cell(catalog: Catalog) -> Mapping[str, Message]:
    """Cell id -> entry, for every non-obsolete entry."""
    return {m.context: m for m in catalog if m.id}
