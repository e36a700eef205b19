"""The Chinese solutions' sync check: which English cells lack a current translation, and which Chinese
solutions were not executed since their code changed.

The builder makes ``solutions/zh/<stem>.ipynb`` from the English solution and its catalogue
(:mod:`utils.builder.translate`, which imports this module; this one never imports the builder). A
markdown cell without a current translation (no entry, an empty one, a fuzzy one, or one whose ``msgid``
is not the English any more: :func:`untranslated_reason`) keeps its English there and is reported by
:func:`translation_status`, which makes ``python -m utils.build --check`` fail. So is a Chinese solution
whose outputs are not from running its current code (:data:`EXECUTED_KEY`, :func:`code_digest`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import nbformat

from utils.i18n.catalog import OUTPUT_DIR, catalogue_path, entries_by_cell, markdown_entries, read_catalogue
from utils.notebook_files import NOTEBOOK_GLOB, read_source_notebook

__all__ = ["EXECUTED_KEY", "Untranslated", "code_digest", "executed_in_chinese", "translated_path",
           "translation_status", "untranslated_reason"]

EXECUTED_KEY = "executed_code_sha256"
"""``metadata.course`` key of a Chinese solution executed in Chinese: the digest of the code it ran."""


@dataclass(frozen=True)
class Untranslated:
    """An English markdown cell without a current translation."""

    notebook: str
    cell_id: str
    english: str
    reason: str

    def __str__(self) -> str:
        words = " ".join(self.english.split()[:8])
        return f"{self.notebook}, cell {self.cell_id!r} ({self.reason}): {words} ..."


def translated_path(rel_solution: str) -> str:
    """``solutions/NN_name.ipynb`` -> ``solutions/zh/NN_name.ipynb``.

    >>> translated_path("solutions/01_queries_keys_values.ipynb")
    'solutions/zh/01_queries_keys_values.ipynb'
    """
    return f"solutions/{OUTPUT_DIR}/{Path(rel_solution).name}"


def code_digest(nb: nbformat.NotebookNode) -> str:
    """A hash of the code cells (ids and sources): the outputs of one run belong to this code."""
    payload = json.dumps([[c["id"], c["source"]] for c in nb["cells"] if c["cell_type"] == "code"])
    return hashlib.sha256(payload.encode()).hexdigest()


def executed_in_chinese(path: Path) -> nbformat.NotebookNode | None:
    """The Chinese solution on disk, if it was executed in Chinese since its code last changed (else None)."""
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception:  # missing or broken: generated afresh
        return None
    executed = nb.get("metadata", {}).get("course", {}).get(EXECUTED_KEY)
    return nb if executed is not None and executed == code_digest(nb) else None


def untranslated_reason(message, english: str) -> str | None:
    """Why the catalogue ``message`` (or ``None``) is not a current translation of ``english``; None if it is."""
    if message is None or not message.string:
        return "missing: no Chinese yet"
    if message.id != english:
        return "stale: the English changed; run `python -m utils.i18n update`"
    if message.fuzzy:
        return "fuzzy: the English changed since it was translated"
    return None


def translation_status(root: str | Path) -> tuple[list[Untranslated], list[str]]:
    """``(untranslated cells of the notebooks that have a catalogue, stems of the notebooks with none)``."""
    root = Path(root)
    problems, without = [], []
    for path in sorted((root / "solutions").glob(NOTEBOOK_GLOB)):
        rel = path.relative_to(root).as_posix()
        po = catalogue_path(root, path.stem)
        if not po.is_file():
            without.append(path.stem)
            continue
        messages = entries_by_cell(read_catalogue(po))
        for cell_id, english in markdown_entries(read_source_notebook(path, rel)):
            reason = untranslated_reason(messages.get(cell_id), english)
            if reason is not None:
                problems.append(Untranslated(rel, cell_id, english, reason))
        zh_rel = translated_path(rel)
        if executed_in_chinese(root / zh_rel) is None:
            problems.append(Untranslated(zh_rel, "(all code cells)", "the outputs are the English solution's",
                                         f"not executed in Chinese since its code last changed: run python -m "
                                         f"utils.build --execute {zh_rel}"))
    return problems, without
