"""The message catalogues, ``utils/i18n/locale/zh_CN/<domain>.po``: updated from the source with Babel,
and checked (see :mod:`utils.i18n.messages` for how they are used, :mod:`utils.i18n.extract` for how
messages are found).

An update follows the rules of the notebook catalogues (:func:`utils.i18n.catalog.carry_over`): a
message with a context (an exercise's diagnosis, hint or part) is matched by its context; a ``tr()``
message is matched by its English, or else by the closest English that disappeared from the same
catalogue (difflib, ratio >= 0.75), which makes it fuzzy with that English as ``previous_id``. An
unmatched old translation becomes obsolete (``#~``), not lost. Nothing else changes: an update with
nothing to do writes the same bytes.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from babel.messages.catalog import Catalog

from utils.files import write_if_changed
from utils.i18n.catalog import LOCALE, carry_over, catalogue_text, new_catalogue, read_catalogue
from utils.i18n.extract import MarkedMessage, MarkProblem, all_messages, format_fields
from utils.i18n.messages import LOCALE_DIR

__all__ = ["MessageProblem", "message_catalogue_path", "message_status", "update_message_catalogues",
           "updated_domain"]

_HEADER = (
    "# Chinese (Simplified) messages of utils/{path} of the course Attention, Step by Step.\n"
    "# msgid is the English a learner reads (diagnoses, quizzes, explorers, figures, grader feedback),\n"
    "# msgstr its Chinese; {{fields}} stay as they are. Update with `python -m utils.i18n update`;\n"
    "# terms: i18n/zh_CN/GLOSSARY.md."
)
_CUTOFF = 0.75


@dataclass(frozen=True)
class MessageProblem:
    """A message without a current translation, or a translation that breaks its message."""

    domain: str
    msgid: str
    reason: str

    def __str__(self) -> str:
        words = " ".join(self.msgid.split()[:8])
        return f"utils/i18n/locale/{LOCALE}/{self.domain}.po ({self.reason}): {words} ..."


def message_catalogue_path(domain: str, locale_dir: Path = LOCALE_DIR) -> Path:
    """``widgets.qkv`` -> ``utils/i18n/locale/zh_CN/widgets.qkv.po``."""
    return locale_dir / LOCALE / f"{domain}.po"


def _new(domain: str) -> Catalog:
    catalog = new_catalogue(domain)
    catalog.header_comment = _HEADER.format(path=domain.replace(".", "/") + ".py")
    return catalog


def updated_domain(old: Catalog | None, domain: str, messages: list[MarkedMessage]) -> Catalog:
    """A catalogue holding ``messages``, carrying over ``old``'s translations (module docstring)."""
    updated = _new(domain)
    if old is not None:
        updated.header_comment, updated.mime_headers = old.header_comment, old.mime_headers
    entries = [m for m in old if m.id] if old is not None else []
    entries += list(old.obsolete.values()) if old is not None else []
    by_context = {m.context: m for m in entries if m.context is not None}
    by_id = {m.id: m for m in entries if m.context is None}
    wanted_ids = {m.msgid for m in messages if m.context is None}
    vanished = [msgid for msgid in by_id if msgid not in wanted_ids and by_id[msgid].string]
    used: set[tuple[str | None, str]] = set()
    for message in messages:
        if message.context is not None:
            old_entry = by_context.get(message.context)
        elif message.msgid in by_id:
            old_entry = by_id[message.msgid]
        else:
            close = difflib.get_close_matches(message.msgid, vanished, n=1, cutoff=_CUTOFF)
            old_entry = by_id[close[0]] if close else None
            if close:
                vanished.remove(close[0])
        if old_entry is not None:
            used.add((old_entry.context, old_entry.id))
        flags = {"python-brace-format"} if message.formatted else set()
        # Babel keys an entry by (msgid, context), so two diagnoses may share an English
        updated[message.msgid] = carry_over(old_entry, message.msgid, message.context,
                                            locations=[(message.location, None)], flags=flags)
    for entry in entries:
        if (entry.context, entry.id) not in used and entry.string:
            key = entry.id if entry.context is None else (entry.id, entry.context)
            updated.obsolete[key] = carry_over(entry, entry.id, entry.context)
    return updated


def update_message_catalogues(locale_dir: Path = LOCALE_DIR, log=print) -> list[Path]:
    """Bring every domain's catalogue in step with the source; return the files written."""
    by_domain, problems = all_messages()
    if problems:
        raise ValueError("tr() calls whose message cannot be read:\n" + "\n".join(map(str, problems)))
    written = []
    for domain, messages in by_domain.items():
        path = message_catalogue_path(domain, locale_dir)
        old = read_catalogue(path) if path.is_file() else None
        text = catalogue_text(updated_domain(old, domain, messages))
        if write_if_changed(path, text):
            written.append(path)
            log(f"wrote {path.relative_to(locale_dir.parents[2])}")
    return written


def _entry_problem(entry, message: MarkedMessage) -> str | None:
    if entry is None:
        return "not in the catalogue: run `python -m utils.i18n update`"
    if not entry.string:
        return "missing: no Chinese yet"
    if entry.fuzzy:
        return "fuzzy: the English changed since it was translated"
    if message.formatted and format_fields(entry.string) != format_fields(message.msgid):
        return (f"fields differ: the English has {sorted(format_fields(message.msgid))}, "
                f"the Chinese {sorted(format_fields(entry.string))}")
    return None


def message_status(locale_dir: Path = LOCALE_DIR) -> tuple[list[MessageProblem], list[MarkProblem]]:
    """``(messages without a current translation, unreadable tr() calls)``."""
    by_domain, unreadable = all_messages()
    problems = []
    for domain, messages in by_domain.items():
        path = message_catalogue_path(domain, locale_dir)
        catalog = read_catalogue(path) if path.is_file() else None
        for message in messages:
            entry = None if catalog is None else catalog.get(message.msgid, context=message.context)
            reason = _entry_problem(entry, message)
            if reason is not None:
                problems.append(MessageProblem(domain, message.msgid, reason))
    return problems, unreadable
