"""Writing generated text files: only when their content changes, so an up-to-date file keeps its
timestamp and a run with nothing to do writes nothing (the builder, the catalogues, the README).

>>> import tempfile
>>> from pathlib import Path
>>> path = Path(tempfile.mkdtemp()) / "new" / "a.txt"
>>> write_if_changed(path, "one\\n"), write_if_changed(path, "one\\n"), holds(path, "one\\n")
(True, False, True)
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["holds", "write_if_changed"]


def holds(path: str | Path, text: str) -> bool:
    """Whether ``path`` is a file whose UTF-8 text is exactly ``text``."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    path = Path(path)
    return path.is_file() and path.read_text(encoding="utf-8") == text


def write_if_changed(path: str | Path, text: str) -> bool:
    """Write ``text`` (UTF-8) to ``path``, making its folders, unless the file already holds exactly that
    text; return whether it was written."""
    if holds(path, text):
        return False
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return True
