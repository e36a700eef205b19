"""A learner who runs a chapter top to bottom before solving anything sees no raw traceback.

Issue 16, item 9: a cell outside an exercise and its check that calls the learner's function must
say in one line that it needs the solution (``except NotImplementedError: print(...)``), not stop
with a ``NotImplementedError`` traceback, and it must not be tagged ``raises-exception`` for that
(on Colab such a cell stops "Run all"). Read statically from ``chapters/`` here; ``make nbval-chapters``
then runs every student chapter top to bottom, where an untagged cell that raises fails.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((REPO / "chapters").glob("[0-9][0-9]_*.ipynb"))


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _exercise_functions(cells: list[dict]) -> set[str]:
    names = set()
    for cell in cells:
        if cell["cell_type"] == "code" and "exercise" in cell.get("metadata", {}).get("course", {}):
            names.add(cell["metadata"]["course"]["exercise"].split(".", 1)[1])
    return names


def _calls(source: str, names: set[str]) -> set[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {node.func.id for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names}


def _is_check_cell(source: str) -> bool:
    return bool(re.match(r"\s*check\.\w+\(", source))


def _handles_unsolved(source: str) -> bool:
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ExceptHandler) and node.type is not None:
            caught = ast.unparse(node.type)
            if "NotImplementedError" in caught and any(isinstance(n, ast.Call) and ast.unparse(n.func) == "print"
                                                       for n in ast.walk(node)):
                return True
    return False


def cells_that_call_the_learner(path: Path) -> list[tuple[int, dict, set[str]]]:
    cells = _cells(path)
    names = _exercise_functions(cells)
    found = []
    for index, cell in enumerate(cells):
        source = "".join(cell["source"])
        if cell["cell_type"] != "code" or "exercise" in cell.get("metadata", {}).get("course", {}):
            continue
        if _is_check_cell(source):
            continue
        called = _calls(source, names)
        if called:
            found.append((index, cell, called))
    return found


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_cells_that_call_an_unsolved_exercise_say_so_in_one_line(path):
    assert _exercise_functions(_cells(path)), f"{path.name}: no exercise found: this test proves nothing"
    for index, cell, called in cells_that_call_the_learner(path):
        source = "".join(cell["source"])
        assert _handles_unsolved(source), (
            f"{path.name} cell {index} calls {sorted(called)} before the learner may have solved it: catch "
            f"NotImplementedError and print one line saying which exercise to solve first")
        assert "raises-exception" not in cell.get("metadata", {}).get("tags", []), (
            f"{path.name} cell {index} is tagged raises-exception only because the exercise is unsolved")


def test_the_detector_finds_a_bare_call():
    source = "out = scaled_dot_product_attention(q, k, v)\nprint(out)"
    assert _calls(source, {"scaled_dot_product_attention"}) == {"scaled_dot_product_attention"}
    assert not _handles_unsolved(source)
    guarded = ("try:\n    out = scaled_dot_product_attention(q, k, v)\nexcept NotImplementedError:\n"
               "    print('write scaled_dot_product_attention in exercise 1 first')")
    assert _handles_unsolved(guarded)
