"""The HTML builder executes the chapters missing from its cache ``jobs`` at a time (utils/html.py).

Tiny notebooks stand in for the chapters: a rendezvous between two of them (each waits for the
other's file) only completes when both kernels run at the same time, so the test fails if the
builder falls back to one at a time.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient.exceptions import CellExecutionError

from utils.html import _cache_folder, execute_chapters

RENDEZVOUS = """
import pathlib, time
here, other = pathlib.Path({here!r}), pathlib.Path({other!r})
here.write_text("up")
deadline = time.monotonic() + 90
while not other.exists():
    if time.monotonic() > deadline:
        raise TimeoutError("the other notebook never ran at the same time as this one")
    time.sleep(0.05)
print("met", other.name)
"""


def notebook(path: Path, *sources: str) -> Path:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


@pytest.fixture
def course(tmp_path):
    (tmp_path / "solutions").mkdir()
    return tmp_path


def test_missing_chapters_run_at_the_same_time_into_the_cache(course, tmp_path):
    a, b = tmp_path / "a.flag", tmp_path / "b.flag"
    paths = [notebook(course / "solutions" / f"0{i}_x.ipynb", RENDEZVOUS.format(here=str(here), other=str(other)))
             for i, (here, other) in enumerate([(a, b), (b, a)], start=1)]
    lines: list[str] = []
    execute_chapters(paths, root=course, cache=course / "cache", jobs=2, log=lines.append)
    for path, other in zip(paths, (b, a)):
        folder = _cache_folder(path, course, course / "cache")
        executed = nbformat.read(folder / "executed.ipynb", as_version=4)
        assert executed.cells[0].outputs[0]["text"] == f"met {other.name}\n"
        assert (folder / "grids").is_dir()
    assert sorted(line.split(" with ")[0] for line in lines) == ["executed 01_x.ipynb", "executed 02_x.ipynb"]
    # cached now: nothing runs again (a kernel would fail: the flags are gone)
    a.unlink(), b.unlink()
    execute_chapters(paths, root=course, cache=course / "cache", jobs=2, log=lines.append)
    assert len(lines) == 2 and not a.exists()


def test_a_failing_chapter_fails_the_build_naming_its_cell(course):
    good = notebook(course / "solutions" / "01_ok.ipynb", "x = 1")
    bad = notebook(course / "solutions" / "02_bad.ipynb", "raise ValueError('chapter two is broken')")
    with pytest.raises(CellExecutionError, match="chapter two is broken"):
        execute_chapters([good, bad], root=course, cache=course / "cache", jobs=2, log=lambda *_: None)
    assert not (_cache_folder(bad, course, course / "cache") / "executed.ipynb").exists()


def test_jobs_must_be_positive(course):
    with pytest.raises(ValueError, match="jobs must be at least 1, got 0"):
        execute_chapters([], root=course, cache=course / "cache", jobs=0)
