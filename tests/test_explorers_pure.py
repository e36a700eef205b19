"""The explorers layer (``utils/explorers/``): each explorer's state and pure functions, with no ipywidgets
and no matplotlib, drawn by ``utils.plotting`` and wired by ``utils.widgets`` (never the other way round)."""

from __future__ import annotations

import ast
import subprocess
import sys
import typing
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXPLORERS = sorted((ROOT / "utils" / "explorers").glob("*.py"))
FORBIDDEN = ("ipywidgets", "matplotlib", "utils.plotting", "utils.widgets")
CHAPTERS = ("qkv", "sdpa", "multihead", "positional", "transformer", "at_scale")


def imported_names(path: Path) -> list[tuple[int, str]]:
    """Every module ``path`` imports, by any kind of import (function-local and TYPE_CHECKING included)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.lineno, "utils." * bool(node.level) + node.module))
    return found


def test_every_chapter_has_its_explorers_module():
    assert {path.stem for path in EXPLORERS} >= {"__init__", *CHAPTERS}


@pytest.mark.parametrize("path", EXPLORERS, ids=lambda p: p.stem)
def test_an_explorers_module_imports_no_widgets_no_figures(path):
    bad = [f"{path.name}:{line} imports {name}" for line, name in imported_names(path)
           if any(name == f or name.startswith(f + ".") for f in FORBIDDEN)]
    assert not bad, bad


def test_importing_the_explorers_loads_neither_matplotlib_nor_ipywidgets():
    """Transitively too: a core module they import must not pull them in either."""
    code = ("import sys\n" + "".join(f"import utils.explorers.{x}\n" for x in CHAPTERS)
            + "print(sorted({m.split('.')[0] for m in sys.modules} & {'matplotlib', 'ipywidgets'}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_a_chapters_figures_import_nothing_from_its_widgets(chapter):
    path = ROOT / "utils" / "plotting" / f"{chapter}.py"
    assert not [name for _, name in imported_names(path) if name.startswith("utils.widgets")]


@pytest.mark.parametrize(("figure", "state"), [
    ("sdpa.scale_explorer_figure", "sdpa.ScaleExplorerState"),
    ("sdpa.mask_polarity_figure", "sdpa.MaskPolarityState"),
    ("multihead.head_explorer_figure", "multihead.HeadExplorerState"),
    ("positional.positional_explorer_figure", "positional.PositionalExplorerState"),
    ("transformer.attention_view_figure", "transformer.AttentionView"),
    ("transformer.sentence_figure", "transformer.SentenceState"),
    ("at_scale.window_explorer_figure", "at_scale.WindowExplorerState"),
    ("at_scale.kv_cache_explorer_figure", "at_scale.KVCacheExplorerState"),
])
def test_an_explorer_figure_takes_its_explorers_state(figure, state):
    """The annotation resolves at run time (imported at the top, not under TYPE_CHECKING) to the state class
    of ``utils.explorers``."""
    import importlib

    module, name = figure.split(".")
    draw = getattr(importlib.import_module(f"utils.plotting.{module}"), name)
    module, name = state.split(".")
    expected = getattr(importlib.import_module(f"utils.explorers.{module}"), name)
    hints = typing.get_type_hints(draw)
    assert [hint for key, hint in hints.items() if key != "return"] == [expected]
