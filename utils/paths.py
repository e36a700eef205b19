"""Where the course lives on disk: the one definition of the repository root.

>>> (REPO_ROOT / "utils" / "paths.py").is_file()
True
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["REPO_ROOT"]

REPO_ROOT = Path(__file__).resolve().parent.parent
"""The folder that holds ``utils/``, ``solutions/``, ``chapters/`` and ``pyproject.toml``. The builder,
the HTML edition, ``python -m utils.lab`` and the grader all default to it."""
