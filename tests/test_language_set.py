"""The course's languages are listed once: ``utils.i18n.messages.LANGUAGES``. Everything else (the HTML
edition's pages, the grader's ``--lang``, the builder's ``solutions/<lang>/`` folders, the HTML cache)
derives from it, so adding a language is one line there plus its catalogues."""

from __future__ import annotations

import ast
from pathlib import Path

from utils.i18n.messages import LANGUAGES

PACKAGE = Path(__file__).resolve().parent.parent / "utils"
SOURCE = PACKAGE / "i18n" / "messages.py"


def language_lists(source: str) -> list[tuple[int, str]]:
    """Line and text of every literal tuple, list, set or dict (its keys) of two or more language codes."""
    found = []
    for node in ast.walk(ast.parse(source)):
        items = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None)
        if not isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)) or not items or len(items) < 2:
            continue
        if all(isinstance(item, ast.Constant) and item.value in LANGUAGES for item in items):
            found.append((node.lineno, ast.unparse(node)[:80]))
    return found


def test_the_checker_finds_a_language_list():
    assert language_lists('choices = ("en", "zh")\nx = {"zh": 1, "en": 2}\nok = ("en",)\n') == [
        (1, "('en', 'zh')"), (2, "{'zh': 1, 'en': 2}")]
    assert language_lists('"""(\'zh\', \'en\')"""\nstyle = ("en", "bold")\n') == []  # a docstring, another tuple


def test_no_module_but_messages_lists_the_languages():
    found = [f"{path.relative_to(PACKAGE.parent)}:{line}: {text}"
             for path in sorted(PACKAGE.rglob("*.py")) if path != SOURCE
             for line, text in language_lists(path.read_text())]
    assert not found, "list the languages once, in utils.i18n.messages.LANGUAGES, and derive:\n" + "\n".join(found)
