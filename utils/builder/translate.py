"""Step 5b of a build: the Chinese notebooks, made from the stamped English solutions and their catalogues.

The Chinese solution ``solutions/zh/<stem>.ipynb`` is the stamped English solution with each markdown
cell's source replaced by its current translation: the same cells in the same order, the same ids, the
same code (``tests/test_i18n.py`` proves it) but for the setup cell, which calls ``utils.setup(lang="zh")``
so that diagnoses, quizzes, explorers and figures speak Chinese. Its outputs are therefore its own:
``python -m utils.build --execute solutions/zh/<stem>.ipynb`` runs it and records the digest of the code
it ran (``course.executed_code_sha256``). A later build keeps those outputs while the code is the same;
when the code changed, the notebook gets the English outputs and
:func:`utils.i18n.notebooks.translation_status` reports it until it is executed again. The badges are
stamped for the Chinese path, and the notebook metadata says ``course.language``. Its chapter
``chapters/zh/<stem>.ipynb`` is made from it like any chapter (:mod:`utils.builder.chapter`).

A markdown cell without a current translation keeps its English in the generated notebook (and
``python -m utils.build --check`` fails on it, through :mod:`utils.i18n.notebooks`). The catalogues are
read with :mod:`utils.i18n.catalog`; the translations never import the builder.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path

import nbformat

from utils.builder.chapter import GENERATED_KEY, chapter_path, digest, render_chapter
from utils.builder.config import CourseConfig
from utils.builder.stamps import stamp
from utils.i18n.catalog import LOCALE, catalogue_path, entries_by_cell, markdown_entries, read_catalogue
from utils.i18n.notebooks import (
    EXECUTED_KEY,
    Untranslated,
    code_digest,
    executed_in_chinese,
    translated_path,
    untranslated_reason,
)
from utils.notebook_files import BuildError

__all__ = ["render_translations", "translated_solution"]


def _keep_outputs(nb: nbformat.NotebookNode, executed: nbformat.NotebookNode | None) -> bool:
    """Give ``nb``'s code cells the outputs of ``executed``, and its saved widget state, when it ran the same
    code; whether it did."""
    if executed is None or code_digest(executed) != code_digest(nb):
        return False
    ran = {c["id"]: c for c in executed["cells"] if c["cell_type"] == "code"}
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"] = copy.deepcopy(ran[cell["id"]]["outputs"])
            cell["execution_count"] = ran[cell["id"]].get("execution_count")
    nb["metadata"].pop("widgets", None)  # the saved explorers belong to the run that made the outputs
    if "widgets" in executed["metadata"]:
        nb["metadata"]["widgets"] = copy.deepcopy(executed["metadata"]["widgets"])
    return True


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
        reason = untranslated_reason(messages.get(cell["id"]), english)
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
        zh, _ = translated_solution(solution, catalog, config, rel, executed_in_chinese(root / zh_rel))
        chapter, _ = render_chapter(zh, config, zh_rel, registry)
        chapter["metadata"]["course"]["language"] = LOCALE
        out[root / zh_rel] = zh
        out[root / chapter_path(zh_rel)] = chapter
    return out
