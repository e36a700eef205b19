"""Every explorer a chapter calls is driven by a JupyterLab test (tests/browser/).

The browser tests no longer run whole chapters in JupyterLab (tests/browser/test_browser_chapters.py
says where they run instead): each explorer is built in a notebook cell of a Lab test of its own, the
explorers notebook of test_browser_chapters.py or a focused test (test_browser_new_explorers.py,
test_browser_kv_cache.py). This cheap check, in the unit stage, keeps that list complete: it reads
every ``solutions/NN_*.ipynb`` and ``solutions/zh/NN_*.ipynb`` for explorer calls
(:data:`browser_support.EXPLORER_CALL`) and fails, naming the notebook and the function, when no
string of a browser test (the cell sources they write; docstrings do not count) calls that function.
A browser test that imports ``CELLS`` from tests/explorer_cells.py (the explorers notebook's cells,
which the unit tests build too) drives what those cells call.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import explorer_cells
import nbformat
from browser_support import EXPLORER_CALL

from utils.build import NOTEBOOK_GLOB

REPO = Path(__file__).resolve().parent.parent
CHAPTERS = sorted((REPO / "solutions").glob(NOTEBOOK_GLOB)) + sorted((REPO / "solutions" / "zh").glob(NOTEBOOK_GLOB))
BROWSER_TESTS = sorted((REPO / "tests" / "browser").glob("test_*.py"))
CALLED = re.compile(r"\b(\w*explorer)\s*\($")


def explorer_calls(source: str) -> set[str]:
    """The names of the explorer functions that ``source`` calls (on lines that are not comments)."""
    return {CALLED.search(match.group(0)).group(1) for match in EXPLORER_CALL.finditer(source)}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _imports_the_cells(tree: ast.AST) -> bool:
    return any(isinstance(node, ast.ImportFrom) and node.module == "explorer_cells"
               and any(alias.name == "CELLS" for alias in node.names) for node in ast.walk(tree))


def driven_in(path: Path) -> set[str]:
    """The explorers that the string literals of the test file ``path`` call: the notebook cells it writes
    (an f-string's literal parts included), not its docstrings; and, when it imports
    ``explorer_cells.CELLS``, what those cells call."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    strings = [node.value for node in ast.walk(tree)
               if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip]
    if _imports_the_cells(tree):
        strings += explorer_cells.CELLS.values()
    return {name for text in strings for name in explorer_calls(text)}


def chapter_explorers(path: Path) -> set[str]:
    nb = nbformat.read(path, as_version=4)
    return {name for cell in nb.cells if cell.cell_type == "code" for name in explorer_calls(cell.source)}


def test_the_scan_finds_the_explorers_of_each_lab_test():
    driven = {path.name: driven_in(path) for path in BROWSER_TESTS}
    assert driven["test_browser_chapters.py"] >= {"qkv_explorer", "window_explorer"}, driven
    assert driven["test_browser_new_explorers.py"] == {"mask_polarity_explorer", "sentence_explorer"}, driven
    assert driven["test_browser_kv_cache.py"] == {"kv_cache_explorer"}, driven
    assert explorer_calls("# qkv_explorer()\nx = 1  # head_explorer()\nscale_explorer(d)") == {"scale_explorer"}


def test_every_chapter_explorer_is_driven_by_a_lab_test():
    assert len(CHAPTERS) >= 12, CHAPTERS
    driven = set().union(*(driven_in(path) for path in BROWSER_TESTS))
    missing = [
        f"{path.relative_to(REPO).as_posix()}: {name}"
        for path in CHAPTERS
        for name in sorted(chapter_explorers(path) - driven)
    ]
    assert not missing, (
        "explorers that no JupyterLab test drives (add a cell to CELLS in tests/explorer_cells.py, "
        "which tests/browser/test_browser_chapters.py runs, or a focused test): " + "; ".join(missing)
    )
