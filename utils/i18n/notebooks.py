"""English solution + catalogue -> ``solutions/zh/<stem>.ipynb``, and the sync check.

The Chinese solution is the stamped English solution with each markdown cell's source replaced by its
current translation; everything else is the English notebook's: the same cells in the same order, the
same ids, the same code, the same stored outputs. The outputs are copied, not re-executed: the code cells
are identical (``tests/test_i18n.py`` proves it), so running them again would only spend ``make test``'s
time to produce the same outputs, and nbval runs ``solutions/zh/`` strictly like every solution. The
badges are stamped for the Chinese path, and the notebook metadata says ``course.language``.

A markdown cell without a current translation (no entry, an empty one, a fuzzy one, or one whose
``msgid`` is not the English any more) keeps its English in the generated notebook and is reported by
:func:`translation_status`, which makes ``python -m utils.build --check`` fail.
"""

from __future__ import annotations

import copy
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

__all__ = ["Untranslated", "render_translations", "translated_path", "translated_solution", "translation_status"]


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


def _reason(message, english: str) -> str | None:
    if message is None or not message.string:
        return "missing: no Chinese yet"
    if message.id != english:
        return "stale: the English changed; run `python -m utils.i18n update`"
    if message.fuzzy:
        return "fuzzy: the English changed since it was translated"
    return None


def translated_solution(
    solution: nbformat.NotebookNode, catalog, config: CourseConfig, rel_solution: str
) -> tuple[nbformat.NotebookNode, list[Untranslated]]:
    """The Chinese solution notebook made from the stamped English ``solution`` and its catalogue.

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
        zh, _ = translated_solution(solution, catalog, config, rel)
        zh_rel = translated_path(rel)
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
    return problems, without
