"""What each stage of ``make test`` executes, so that no notebook runs twice for the same assurance.

- nbval-solutions runs every solution strictly (English and Chinese) and measures its budgets
  (tests/test_notebook_budgets.py checks that recipe).
- Every English student notebook runs top to bottom in Binder's environment (binder-test); under
  ``make test`` nbval-chapters therefore runs only ``chapters/zh/``, and alone (``make nbval``) all of
  ``chapters/``.
"""

from __future__ import annotations

from pathlib import Path

from env_support import CHAPTERS

from utils.build import NOTEBOOK_GLOB

REPO = Path(__file__).resolve().parent.parent
MAKEFILE = (REPO / "Makefile").read_text()


def recipe(target: str) -> str:
    return MAKEFILE.split(f"\n{target}:", 1)[1].split("\n\n", 1)[0]


def test_make_test_runs_binder_and_the_chapters_stage():
    prerequisites = recipe("test").splitlines()[0].split()
    assert {"nbval", "binder-test"} <= set(prerequisites), prerequisites
    assert "nbval-chapters" in recipe("nbval").split()


def test_under_make_test_nbval_runs_the_chinese_chapters_and_alone_all():
    assert "NBVAL_CHAPTERS ?= $(if $(filter test,$(MAKECMDGOALS)),chapters/zh,chapters)" in MAKEFILE
    assert "--nbval-lax $(NBVAL_CHAPTERS)" in recipe("nbval-chapters")
    assert sorted((REPO / "chapters" / "zh").glob(NOTEBOOK_GLOB)), "no Chinese chapters to run"


def test_binder_runs_every_english_chapter():
    assert CHAPTERS and {p.parent for p in CHAPTERS} == {REPO / "chapters"}, CHAPTERS
    source = (REPO / "tests" / "test_binder_env.py").read_text()
    assert '@pytest.mark.parametrize("chapter", CHAPTERS' in source
    assert "tests/test_binder_env.py" in recipe("binder-test")
