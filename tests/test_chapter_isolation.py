"""A chapter's kernel loads only its own exercises (docs: DESIGN "A chapter's kernel loads only its own
exercises"), so that an edit to one chapter's checks stales only that chapter's executed copies in
html-cache/ (utils/htmlbook/cache.py records every ``utils`` module a kernel had loaded).

For each chapter a fresh process does what the chapter's notebook does with ``utils``: its setup
cell, every ``utils`` import of its code cells, then each of its check cells (on the reference, on a
known mistake in Chinese, on the hidden cases). No module of another chapter's exercises, mistakes
or edge cases may then be loaded.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import pytest

from utils.exercises.registry import chapter_modules, exercise_index
from utils.paths import REPO_ROOT

CHAPTERS = {module.__name__.rpartition(".")[2]: module for module in chapter_modules()}
"""slug -> its chapter module, in course order (qkv, sdpa, ...)."""


def notebook_imports(number: int) -> list[str]:
    """The ``utils`` import statements of the code cells of solutions/<NN>_*.ipynb, in order."""
    (path,) = sorted((REPO_ROOT / "solutions").glob(f"{number:02d}_*.ipynb"))
    found: list[str] = []
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        source = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                statement = ast.get_source_segment(source, node)
                if "utils" in statement and statement not in found:
                    found.append(statement)
    return found


def owned_by(name: str, slug: str) -> bool:
    """Whether module ``name`` holds chapter ``slug``'s exercises, mistakes or edge cases
    (``utils.exercises.mistakes.at_scale_cache`` belongs to ``at_scale``)."""
    for package in ("utils.exercises.", "utils.exercises.mistakes.", "utils.exercises.edges.",
                    "utils.exercises.probing."):
        leaf = name.removeprefix(package)
        if leaf != name and "." not in leaf and (leaf == slug or leaf.startswith(f"{slug}_")):
            return True
    return False


def loaded_after_the_chapter(slug: str) -> list[str]:
    module = CHAPTERS[slug]
    number = int(module.EXERCISES[0].chapter.removeprefix("ch"))
    names = [exercise.func_name for exercise in module.EXERCISES]
    script = "\n".join([
        "import sys",
        "import utils",
        "from utils.exercises import check",
        "utils.setup()",
        *notebook_imports(number),
        f"names = {names!r}",
        "checks = [getattr(check, name) for name in names]",  # the lookup, before anything else
        "dir(check)",  # tab completion lists every exercise
        "assert not hasattr(check, '_repr_html_') and not hasattr(check, 'no_such_exercise')",  # IPython; a typo
        f"import {module.__name__} as chapter",
        "from utils.i18n.messages import using_language",
        "for exercise, run in zip(chapter.EXERCISES, checks):",
        "    run(exercise.reference, quiet=True, assert_passed=True)",
        "    run(exercise.reference, cases='hidden', quiet=True, assert_passed=True)",
        "    with using_language('zh'):",
        "        assert not run(exercise.mistakes[0].fn, quiet=True).passed",
        "        assert not run(exercise.mistakes[0].fn, cases='hidden', quiet=True).passed",
        "print(sorted(name for name in sys.modules if name.startswith('utils.exercises')))",
    ])
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO_ROOT,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1].replace("'", '"'))


@pytest.mark.slow  # a Jupyter kernel per chapter
@pytest.mark.parametrize("slug", list(CHAPTERS))
def test_a_chapters_kernel_loads_no_other_chapters_exercises(slug):
    loaded = loaded_after_the_chapter(slug)
    assert CHAPTERS[slug].__name__ in loaded, "the check cells ran without their chapter's module"
    others = [name for name in loaded for other in CHAPTERS if other != slug and owned_by(name, other)]
    assert others == [], (f"chapter {slug}'s kernel loaded {others}: an edit there would stale its html-cache "
                          "entry; look an exercise up with utils.exercises.registry.exercise_index()")


def test_the_index_read_from_the_sources_agrees_with_every_chapters_exercises():
    """``check.<name>`` imports only the module :func:`exercise_index` names, read with ``ast``."""
    real = {exercise.func_name: module.__name__ for module in chapter_modules() for exercise in module.EXERCISES}
    assert exercise_index() == real


def test_the_index_reads_ids_written_as_literals_and_names_a_module_it_cannot_read(tmp_path, monkeypatch):
    package = "fake_course_index"
    folder = tmp_path / package
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "alpha.py").write_text('X = Exercise(id="ch1.alpha_one", reference=f)\n'
                                     'Y = Exercise(reference=f, id="ch1.alpha_two")\n')
    (folder / "beta.py").write_text('Z = Exercise(id="ch2." + "beta", reference=f)\n')
    (folder / "check_cell.py").write_text('Exercise(id="ch9.machinery")\n')  # machinery: never a chapter
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match=r"fake_course_index\.beta.*a string literal"):
        exercise_index(package)
    (folder / "beta.py").write_text('Z = Exercise(id="ch2.beta", reference=f)\n')
    assert exercise_index(package) == {"alpha_one": f"{package}.alpha", "alpha_two": f"{package}.alpha",
                                       "beta": f"{package}.beta"}
