"""The course's notebook files as both the builder (:mod:`utils.builder`) and the translations
(:mod:`utils.i18n`) read them: which files are the chapters, the badge markers of a header, reading a
source notebook, and the one error both report. A leaf: it imports nothing from ``utils``.

>>> str(BuildError("solutions/01_x.ipynb", 3, "no docstring"))
'solutions/01_x.ipynb, cell 3: no docstring'
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import nbformat

__all__ = ["BADGES_CLOSE", "BADGES_OPEN", "NOTEBOOK_GLOB", "BuildError", "read_source_notebook"]

NOTEBOOK_GLOB = "[0-9][0-9]_*.ipynb"
"""The chapters of the course: every ``solutions/NN_*.ipynb`` (the one list; nothing else enumerates them)."""
BADGES_OPEN, BADGES_CLOSE = "<!-- badges -->", "<!-- /badges -->"
"""The markers, in a notebook's first cell, between which the builder stamps the badge line."""


class BuildError(Exception):
    """A problem in a source notebook, a catalogue or the configuration, with where it is and what to fix.

    Args:
        path: the file, relative to the repository root.
        cell: the index of the cell, or ``None`` for the whole file.
        message: what is wrong and how to fix it.
    """

    def __init__(self, path: str | Path, cell: int | None, message: str) -> None:
        self.path = str(path)
        self.cell = cell
        self.message = message
        where = self.path if cell is None else f"{self.path}, cell {cell}"
        super().__init__(f"{where}: {message}")


def read_source_notebook(path: Path, rel: str) -> nbformat.NotebookNode:
    """Read a notebook; a broken file is a :class:`BuildError` naming ``rel``."""
    import nbformat  # here: `make lab` reads NOTEBOOK_GLOB without paying for nbformat's jsonschema

    try:
        return nbformat.read(path, as_version=4)
    except Exception as exc:  # nbformat raises several kinds for broken JSON
        raise BuildError(rel, None, f"cannot read the notebook: {exc}") from exc
