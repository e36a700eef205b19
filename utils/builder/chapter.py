"""Step 4 of a build: one (stamped) solution notebook -> its chapter notebook, in memory.

Like nbgrader's preprocessors, the chapter is made by a sequence of small steps (:data:`STEPS`), each
applied in turn to a copy of the solution: check cell ids, validate and strip the exercises, clear the
outputs, keep only portable cell metadata, stamp the chapter's own badges, and set the notebook
metadata, whose ``course.generated`` marker records a hash of the cells (see :func:`digest`).
"""

from __future__ import annotations

import ast
import copy
import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from utils.builder.config import CourseConfig
from utils.builder.stamps import stamp
from utils.builder.strip import BEGIN, END, check_exercise_cell, exercise_meta, marker_lines, strip_solution
from utils.notebook_files import BuildError

__all__ = ["GENERATED_KEY", "KERNELSPEC", "STEPS", "RenderContext", "chapter_path", "digest", "render_chapter"]

GENERATED_KEY = "generated"
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
_LANGUAGE_INFO = {
    "codemirror_mode": {"name": "ipython", "version": 3},
    "file_extension": ".py",
    "mimetype": "text/x-python",
    "name": "python",
    "nbconvert_exporter": "python",
    "pygments_lexer": "ipython3",
}
# Cell metadata a chapter keeps; timings (``execution``, ``ExecuteTime``) and view state are dropped.
_CELL_METADATA_KEPT = ("tags", "course", "editable", "deletable", "jupyter", "slideshow", "name")


def chapter_path(solution: str | Path) -> str:
    """``solutions/NN_name.ipynb`` -> ``chapters/NN_name.ipynb`` (relative paths); a translation's
    ``solutions/zh/NN_name.ipynb`` -> ``chapters/zh/NN_name.ipynb``.

    >>> chapter_path("solutions/01_queries_keys_values.ipynb")
    'chapters/01_queries_keys_values.ipynb'
    >>> chapter_path("solutions/zh/01_queries_keys_values.ipynb")
    'chapters/zh/01_queries_keys_values.ipynb'
    """
    path = Path(solution)
    if path.parent.parent.name == "solutions" and not path.parent.parent.parent.name:
        return f"chapters/{path.parent.name}/{path.name}"
    return f"chapters/{path.name}"


def digest(cells: Sequence[Mapping]) -> str:
    """A hash of what a learner edits (cell types and sources), to notice work in a chapter file."""
    payload = json.dumps([[c["cell_type"], c["source"]] for c in cells], ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()


@dataclass
class RenderContext:
    """What the steps share: the configuration, the solution's path and the exercise registry."""

    config: CourseConfig
    solution: str
    registry: Mapping
    exercise_ids: list[str] = field(default_factory=list)

    @property
    def chapter(self) -> int | None:
        """The chapter number from the file name ``NN_name.ipynb``."""
        match = re.match(r"(\d+)_", Path(self.solution).name)
        return int(match[1]) if match else None


def require_cell_ids(nb: nbformat.NotebookNode, ctx: RenderContext) -> None:
    """Refuse cells without an id: ids tie a chapter's cells to the solution's."""
    for index, cell in enumerate(nb["cells"]):
        if "id" not in cell:
            raise BuildError(
                ctx.solution, index,
                "has no cell id; open and save the notebook in JupyterLab 3 or later (nbformat 4.5) to add ids",
            )


def strip_exercises(nb: nbformat.NotebookNode, ctx: RenderContext) -> None:
    """Validate every exercise cell and replace its solution by the stub; no marker elsewhere."""
    for index, cell in enumerate(nb["cells"]):
        if exercise_meta(cell) is not None:
            ctx.exercise_ids.append(check_exercise_cell(cell, index, ctx.solution, ctx.chapter, ctx.registry))
            cell["source"] = strip_solution(cell["source"], ctx.solution, index)
            try:
                ast.parse(cell["source"])
            except SyntaxError as exc:
                raise BuildError(
                    ctx.solution, index,
                    f"with the solution replaced by the stub the cell is not valid Python ({exc}); "
                    f"put {BEGIN} / {END} around whole statements inside the function body",
                ) from exc
        elif marker_lines(cell["source"]):
            raise BuildError(
                ctx.solution, index,
                f"line {marker_lines(cell['source'])[0]}: solution marker outside an exercise cell; add metadata "
                '{"course": {"exercise": "ch<N>.<name>", "points": <int>}} or remove the marker',
            )
    duplicates = sorted({e for e in ctx.exercise_ids if ctx.exercise_ids.count(e) > 1})
    if duplicates:
        raise BuildError(
            ctx.solution, None, f"exercise {duplicates[0]!r} appears twice in this notebook; ids are unique"
        )


def clear_outputs(nb: nbformat.NotebookNode, ctx: RenderContext) -> None:
    """Empty every code cell's outputs and execution count."""
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"] = []
            cell["execution_count"] = None


def keep_portable_cell_metadata(nb: nbformat.NotebookNode, ctx: RenderContext) -> None:
    """Drop cell metadata that is machine- or run-specific (timings, view state)."""
    for cell in nb["cells"]:
        cell["metadata"] = {k: v for k, v in cell.get("metadata", {}).items() if k in _CELL_METADATA_KEPT}


def stamp_chapter(nb: nbformat.NotebookNode, ctx: RenderContext) -> None:
    """Stamp the badges for the chapter's own path (and the setup cell)."""
    stamp(nb, ctx.config, chapter_path(ctx.solution))


def set_chapter_metadata(nb: nbformat.NotebookNode, ctx: RenderContext) -> None:
    """Notebook metadata reduced to what is not machine-specific, plus the ``course.generated`` marker."""
    nb["metadata"] = nbformat.from_dict(
        {
            "kernelspec": dict(KERNELSPEC),
            "language_info": copy.deepcopy(_LANGUAGE_INFO),
            "course": {
                GENERATED_KEY: {
                    "by": "python -m utils.build",
                    "source": ctx.solution,
                    "note": "Generated from the solution notebook; edits to the source go there.",
                    "cells_sha256": digest(nb["cells"]),
                }
            },
        }
    )
    nb["nbformat"], nb["nbformat_minor"] = 4, max(5, nb.get("nbformat_minor", 5))


Step = Callable[[nbformat.NotebookNode, RenderContext], None]
STEPS: tuple[Step, ...] = (
    require_cell_ids,
    strip_exercises,
    clear_outputs,
    keep_portable_cell_metadata,
    stamp_chapter,
    set_chapter_metadata,
)
"""The steps that make a chapter from a solution, in order; the hash is taken last."""


def render_chapter(
    solution: nbformat.NotebookNode, config: CourseConfig, rel_solution: str, registry: Mapping
) -> tuple[nbformat.NotebookNode, list[str]]:
    """Validate a (stamped) solution and return its chapter notebook and its exercise ids.

    Args:
        solution: the solution notebook; it is not modified.
        config: where the course lives.
        rel_solution: the solution's path relative to the repository root.
        registry: exercise id -> ``Exercise`` (``utils.exercises.all_exercises()``).

    Returns:
        ``(chapter, exercise_ids)``. Raises :class:`BuildError` naming the file, the cell and the fix.
    """
    nb = copy.deepcopy(solution)
    ctx = RenderContext(config, rel_solution, registry)
    for step in STEPS:
        step(nb, ctx)
    nbformat.validate(nb)
    return nb, ctx.exercise_ids
