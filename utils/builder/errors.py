"""The one exception of the builder: where the problem is and what to fix."""

from __future__ import annotations

from pathlib import Path

__all__ = ["BuildError"]


class BuildError(Exception):
    """A problem in a source notebook or the configuration, with where it is and what to fix.

    Args:
        path: the file, relative to the repository root.
        cell: the index of the cell, or ``None`` for the whole file.
        message: what is wrong and how to fix it.

    >>> str(BuildError("solutions/01_x.ipynb", 3, "no docstring"))
    'solutions/01_x.ipynb, cell 3: no docstring'
    """

    def __init__(self, path: str | Path, cell: int | None, message: str) -> None:
        self.path = str(path)
        self.cell = cell
        self.message = message
        where = self.path if cell is None else f"{self.path}, cell {cell}"
        super().__init__(f"{where}: {message}")
