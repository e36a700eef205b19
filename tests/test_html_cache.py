"""The committed cache of executed chapters (utils/htmlbook/cache.py): current, and stale exactly when
something its execution read has changed.

An entry records the SHA-256 of the notebook, of every ``utils`` module its kernel had loaded (asked
of the kernel after the last cell), of the data files of ``utils`` and of ``constraints.txt``. These
tests execute tiny notebooks into a temporary cache and then change, in a copy of the course's
``utils``, a file the kernel loaded, one it did not load, and a data file.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import nbformat
import pytest

from utils.html import main, stale_entries
from utils.htmlbook.cache import (
    HTML_CACHE,
    INPUTS,
    _data_files,
    cache_folder,
    executed_with_grids,
    notebook_label,
    stale_reason,
)
from utils.i18n.messages import LANGUAGES
from utils.paths import REPO_ROOT


def notebook(path: Path, source: str) -> Path:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


@pytest.fixture(scope="module")
def entry(tmp_path_factory):
    """A notebook that loads ``utils.vocab`` executed into a fresh cache, and a copy of the course's
    ``utils`` and ``constraints.txt`` to change."""
    tmp = tmp_path_factory.mktemp("cache")
    path = notebook(tmp / "solutions" / "01_x.ipynb", "import utils.vocab\nprint(len(utils.vocab.__name__))")
    lines: list[str] = []
    executed_with_grids(path, cache=tmp / "cache", log=lines.append)
    copy = tmp / "course"
    shutil.copytree(REPO_ROOT / "utils", copy / "utils", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO_ROOT / "constraints.txt", copy / "constraints.txt")
    return {"path": path, "cache": tmp / "cache", "copy": copy, "lines": lines}


def recorded(entry) -> dict[str, str]:
    return json.loads((cache_folder(entry["path"], entry["cache"]) / INPUTS).read_text(encoding="utf-8"))["files"]


def test_an_entry_records_the_modules_its_kernel_loaded_and_nothing_of_the_grader(entry):
    files = recorded(entry)
    assert "utils/vocab.py" in files and "utils/__init__.py" in files
    assert "constraints.txt" in files and any(name.endswith(".po") or name.endswith(".mo") for name in files)
    assert not any(name.startswith(("utils/grading/", "utils/builder/", "utils/htmlbook/")) for name in files)
    assert all(name != "utils/html.py" for name in files)


def test_a_current_entry_is_taken_without_executing(entry):
    assert stale_reason(entry["path"], entry["cache"]) is None
    lines: list[str] = []
    nb, _ = executed_with_grids(entry["path"], cache=entry["cache"], log=lines.append)
    assert lines == [] and nb.cells[0].outputs[0]["text"] == "11\n"


def edited(entry, name: str, extra: str):
    """``stale_reason`` with ``extra`` appended to the copy's ``name``, which is then put back."""
    target = entry["copy"] / name
    before = target.read_bytes() if target.exists() else None
    with open(target, "a", encoding="utf-8") as handle:
        handle.write(extra)
    try:
        return stale_reason(entry["path"], entry["cache"], package_root=entry["copy"])
    finally:
        if before is None:
            target.unlink()
        else:
            target.write_bytes(before)


def test_stale_exactly_when_a_file_the_execution_read_changed(entry):
    assert stale_reason(entry["path"], entry["cache"], package_root=entry["copy"]) is None
    assert edited(entry, "utils/vocab.py", "\n# changed\n") == "utils/vocab.py changed"
    assert edited(entry, "constraints.txt", "\n# a new pin\n") == "constraints.txt changed"
    po = next(name for name in recorded(entry) if name.endswith(".po"))
    assert edited(entry, po, "\n") == f"{po} changed"
    assert edited(entry, "utils/plotting/fonts/new.otf", "") == "utils/plotting/fonts/new.otf was added"
    # a catalogue is read for the modules the kernel loaded: a new one for a loaded module stales the entry,
    # one for a module it never loaded does not (one English message has one translation everywhere)
    assert edited(entry, "utils/i18n/locale/zh_CN/vocab.po", "") == "utils/i18n/locale/zh_CN/vocab.po was added"
    assert edited(entry, "utils/i18n/locale/zh_CN/grading.new.po", "") is None
    vocab = entry["copy"] / "utils" / "vocab.py"
    vocab.rename(vocab.with_suffix(".moved"))
    try:
        assert stale_reason(entry["path"], entry["cache"], package_root=entry["copy"]) == "utils/vocab.py was removed"
    finally:
        vocab.with_suffix(".moved").rename(vocab)
    # the grader and the HTML builder never run in a chapter's kernel: their changes keep the entry
    assert edited(entry, "utils/grading/cli.py", "\n# changed\n") is None
    assert edited(entry, "utils/htmlbook/book.py", "\n# changed\n") is None
    assert stale_reason(entry["path"], entry["cache"], package_root=entry["copy"]) is None


def test_a_changed_notebook_or_a_half_written_entry_is_not_current(entry, tmp_path):
    other = tmp_path / "cache"
    shutil.copytree(entry["cache"], other)
    folder = cache_folder(entry["path"], other)
    (folder / INPUTS).write_text("{not json", encoding="utf-8")
    assert stale_reason(entry["path"], other) == f"its {INPUTS} is unreadable"
    (folder / INPUTS).unlink()  # what a build that stopped half-way leaves: never taken for current
    assert stale_reason(entry["path"], other) == "it has no entry"
    changed = notebook(tmp_path / "solutions" / "01_x.ipynb", "print('another')")
    shutil.copytree(entry["cache"], tmp_path / "cache2")
    assert stale_reason(changed, tmp_path / "cache2") == "the notebook changed"


def test_the_committed_cache_serves_every_chapter_in_both_languages():
    """CI builds the edition from html-cache/ without executing a chapter: run `python -m utils.html`
    and commit html-cache/ when this fails."""
    assert stale_entries() == []
    for lang in LANGUAGES:
        folders = sorted(p.name for p in (REPO_ROOT / "html-cache" / lang).iterdir() if p.is_dir())
        solutions = REPO_ROOT / "solutions" / ("" if lang == "en" else lang)
        assert folders == sorted(p.stem for p in solutions.glob("[0-9][0-9]_*.ipynb")), f"html-cache/{lang}/"


@pytest.mark.parametrize("edited", ["utils/exercises/mistakes/at_scale.py",
                                    "utils/i18n/locale/zh_CN/exercises.at_scale.po"])
def test_an_edit_to_one_chapters_mistakes_stales_only_that_chapters_two_entries(tmp_path, edited):
    """A chapter's kernel loads only its own exercises (tests/test_chapter_isolation.py), so each committed
    entry records only its chapter's exercise modules. Each entry's record is rebased on a copy of
    ``utils`` (the same files, with today's digests: unrelated edits do not matter), then chapter 6's
    mistakes are edited in the copy: exactly its English and Chinese entries are stale. When this fails,
    run `python -m utils.html` and commit html-cache/."""
    copy = tmp_path / "course"
    shutil.copytree(REPO_ROOT / "utils", copy / "utils", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO_ROOT / "constraints.txt", copy / "constraints.txt")

    def digest(path: Path) -> str | None:
        return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None

    paths = sorted([*(REPO_ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"),
                    *(REPO_ROOT / "solutions" / "zh").glob("[0-9][0-9]_*.ipynb")])
    for path in paths:  # the recorded files, and the data files its modules read (one added since too)
        recorded = json.loads((cache_folder(path) / INPUTS).read_text(encoding="utf-8"))["files"]
        files = [*recorded, *_data_files(copy, [name for name in recorded if name.endswith(".py")])]
        rebased = cache_folder(path, tmp_path / "cache") / INPUTS
        rebased.parent.mkdir(parents=True)
        rebased.write_text(json.dumps({"notebook": digest(path),
                                       "files": {name: digest(copy / name) for name in files}}), encoding="utf-8")
    reasons = {notebook_label(p): stale_reason(p, tmp_path / "cache", package_root=copy) for p in paths}
    assert len(paths) == 14 and set(reasons.values()) == {None}, reasons  # 7 chapters, 2 languages
    with open(copy / edited, "a", encoding="utf-8") as handle:
        handle.write("\n# an edit to chapter 6's mistakes or their Chinese diagnoses\n")
    stale = {notebook_label(p): stale_reason(p, tmp_path / "cache", package_root=copy) for p in paths}
    changed = f"{edited} changed"
    assert {label: why for label, why in stale.items() if why} == {
        "06_attention_at_scale.ipynb": changed, "zh/06_attention_at_scale.ipynb": changed}, (
        f"html-cache/ ({HTML_CACHE}) records chapter 6's mistakes for other chapters too")


def test_check_fails_naming_the_notebook_and_why(tmp_path, capsys):
    assert main(["--check"]) == 0, capsys.readouterr().err
    empty = tmp_path / "empty"
    assert main(["--check", "--cache", str(empty)]) == 1
    err = capsys.readouterr().err
    assert f"{empty} is not current for 01_queries_keys_values.ipynb: it has no entry" in err
    assert "zh/06_attention_at_scale.ipynb: it has no entry" in err
    assert "python -m utils.html" in err
    assert not empty.exists(), "--check builds nothing"
