"""English solution + catalogue -> ``solutions/zh/<stem>.ipynb``, and the sync check.

The Chinese solution is the stamped English solution with each markdown cell's source replaced by its
current translation: the same cells in the same order, the same ids, the same code (``tests/test_i18n.py``
proves it) but for the setup cell, which calls ``utils.setup(lang="zh")`` so that diagnoses, quizzes,
explorers and figures speak Chinese. Its outputs are therefore its own: ``python -m utils.build --execute
solutions/zh/<stem>.ipynb`` runs it and records the digest of the code it ran (``course.executed_code_sha256``).
A later build keeps those outputs while the code is the same; when the code changed, the notebook gets the
English outputs and :func:`translation_status` reports it until it is executed again. The badges are
stamped for the Chinese path, and the notebook metadata says ``course.language``.

A markdown cell without a current translation (no entry, an empty one, a fuzzy one, or one whose
``msgid`` is not the English any more) keeps its English in the generated notebook and is reported by
:func:`translation_status`, which makes ``python -m utils.build --check`` fail.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import nbformat

from utils.builder.chapter import GENERATED_KEY, chapter_path, digest, render_chapter
from utils.builder.config import CourseConfig
from utils.builder.errors import BuildError
from utils.builder.stamps import stamp
from utils.i18n.catalog import (
    LOCALE,
    OUTPUT_DIR,
    catalogue_path,
    entries_by_cell,
    markdown_entries,
    read_catalogue,
)

__all__ = ["EXECUTED_KEY", "Untranslated", "code_digest", "render_translations", "translated_path",
           "translated_solution", "translation_status"]

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


def _executed(path: Path) -> nbformat.NotebookNode | None:
    """The Chinese solution on disk, if it was executed in Chinese (else None)."""
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception:  # missing or broken: generated afresh
        return None
    executed = nb.get("metadata", {}).get("course", {}).get(EXECUTED_KEY)
    return nb if executed is not None and executed == code_digest(nb) else None


def _keep_outputs(nb: nbformat.NotebookNode, executed: nbformat.NotebookNode | None) -> bool:
    """Give ``nb``'s code cells the outputs of ``executed`` when it ran the same code; whether it did."""
    if executed is None or code_digest(executed) != code_digest(nb):
        return False
    ran = {c["id"]: c for c in executed["cells"] if c["cell_type"] == "code"}
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"] = copy.deepcopy(ran[cell["id"]]["outputs"])
            cell["execution_count"] = ran[cell["id"]].get("execution_count")
    return True


def _reason(message, english: str) -> str | None:
    if message is None or not message.string:
        return "missing: no Chinese yet"
    if message.id != english:
        return "stale: the English changed; run `python -m utils.i18n update`"
    if message.fuzzy:
        return "fuzzy: the English changed since it was translated"
    return None


def translated_solution(
    solution: nbformat.NotebookNode, catalog, config: CourseConfig, rel_solution: str,
    executed: nbformat.NotebookNode | None = None,
) -> tuple[nbformat.NotebookNode, list[Untranslated]]:
    """The Chinese solution notebook made from the stamped English ``solution`` and its catalogue, with
    the outputs of ``executed`` (the Chinese solution as last executed) when it ran the same code.

    Returns ``(notebook, untranslated cells)``; an untranslated cell keeps its English.
    """
    nb = copy.deepcopy(solution)
    rel = translated_path(rel_solution)
    messages, problems = entries_by_cell(catalog), []
    english_by_cell = dict(markdown_entries(solution))
    for cell in nb["cells"]:
        if cell["id"] not in english_by_cell:
            continue
        english = english_by_cell[cell["id"]]
        reason = _reason(messages.get(cell["id"]), english)
        if reason is None:
            cell["source"] = messages[cell["id"]].string
        else:
            problems.append(Untranslated(rel_solution, cell["id"], english, reason))
    stamp(nb, config, rel)  # badges that open the Chinese notebook; a translation that lost the markers fails here
    course = {"language": LOCALE}
    course[GENERATED_KEY] = {
        "by": "python -m utils.build",
        "source": [rel_solution, catalogue_path("", Path(rel_solution).stem).as_posix()],
        "note": "Generated from the English solution and its catalogue; edit those, not this file.",
        "cells_sha256": digest(nb["cells"]),
    }
    if _keep_outputs(nb, executed):
        course[EXECUTED_KEY] = code_digest(nb)
    nb["metadata"]["course"] = course
    return nb, problems


def render_translations(
    root: Path, config: CourseConfig, solutions: Mapping[str, nbformat.NotebookNode], registry: Mapping
) -> dict[Path, nbformat.NotebookNode]:
    """``solutions/zh/`` and ``chapters/zh/`` notebooks for every stamped solution (``rel -> notebook``)
    that has a catalogue, as path -> notebook. Writes nothing."""
    out: dict[Path, nbformat.NotebookNode] = {}
    for rel, solution in solutions.items():
        po = catalogue_path(root, Path(rel).stem)
        if not po.is_file():
            continue
        try:
            catalog = read_catalogue(po)
        except Exception as exc:  # Babel raises several kinds for a broken file
            raise BuildError(po.relative_to(root), None, f"cannot read the catalogue: {exc}") from exc
        zh_rel = translated_path(rel)
        zh, _ = translated_solution(solution, catalog, config, rel, _executed(root / zh_rel))
        chapter, _ = render_chapter(zh, config, zh_rel, registry)
        chapter["metadata"]["course"]["language"] = LOCALE
        out[root / zh_rel] = zh
        out[root / chapter_path(zh_rel)] = chapter
    return out


def translation_status(root: str | Path) -> tuple[list[Untranslated], list[str]]:
    """``(untranslated cells of the notebooks that have a catalogue, stems of the notebooks with none)``."""
    from utils.builder.course import NOTEBOOK_GLOB, read_source_notebook

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
            reason = _reason(messages.get(cell_id), english)
            if reason is not None:
                problems.append(Untranslated(rel, cell_id, english, reason))
        zh_rel = translated_path(rel)
        if _executed(root / zh_rel) is None:
            problems.append(Untranslated(zh_rel, "(all code cells)", "the outputs are the English solution's",
                                         f"not executed in Chinese since its code last changed: run python -m "
                                         f"utils.build --execute {zh_rel}"))
    return problems, without
