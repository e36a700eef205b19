"""The HTML builder executes the chapters missing from its cache ``jobs`` at a time (utils/html.py).

Tiny notebooks stand in for the chapters: a rendezvous between two of them (each waits for the
other's file) only completes when both kernels run at the same time, so the test fails if the
builder falls back to one at a time.

Two builders may share one cache (the edition built by two test workers at once: pytest 9.2 broke
xdist's ``loadgroup``, pytest-xdist#1386, so the fixture that builds it ran on both): the second
must wait for the first and reuse its entry, not remove the folder the first one's kernel is
writing its grids into. The English and Chinese notebooks share their stems and keep separate
entries.
"""

from __future__ import annotations

import json
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import nbformat
import pytest
from nbclient.exceptions import CellExecutionError

from utils.htmlbook.cache import _execute_into_cache, cache_folder, execute_chapters, executed_with_grids

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


pytestmark = pytest.mark.slow  # executes notebooks in Jupyter kernels


@pytest.fixture
def course(tmp_path):
    (tmp_path / "solutions").mkdir()
    return tmp_path


def test_missing_chapters_run_at_the_same_time_into_the_cache(course, tmp_path):
    a, b = tmp_path / "a.flag", tmp_path / "b.flag"
    paths = [notebook(course / "solutions" / f"0{i}_x.ipynb", RENDEZVOUS.format(here=str(here), other=str(other)))
             for i, (here, other) in enumerate([(a, b), (b, a)], start=1)]
    lines: list[str] = []
    execute_chapters(paths, cache=course / "cache", jobs=2, log=lines.append)
    for path, other in zip(paths, (b, a)):
        folder = cache_folder(path, course / "cache")
        executed = nbformat.read(folder / "executed.ipynb", as_version=4)
        assert executed.cells[0].outputs[0]["text"] == f"met {other.name}\n"
        assert (folder / "grids").is_dir()
    assert sorted(line.split(" with ")[0] for line in lines) == ["executed 01_x.ipynb", "executed 02_x.ipynb"]
    # cached now: nothing runs again (a kernel would fail: the flags are gone)
    a.unlink(), b.unlink()
    execute_chapters(paths, cache=course / "cache", jobs=2, log=lines.append)
    assert len(lines) == 2 and not a.exists()


def test_a_failing_chapter_fails_the_build_naming_its_cell(course):
    good = notebook(course / "solutions" / "01_ok.ipynb", "x = 1")
    bad = notebook(course / "solutions" / "02_bad.ipynb", "raise ValueError('chapter two is broken')")
    with pytest.raises(CellExecutionError, match="chapter two is broken"):
        execute_chapters([good, bad], cache=course / "cache", jobs=2, log=lambda *_: None)
    assert not (cache_folder(bad, course / "cache") / "executed.ipynb").exists()


def test_jobs_must_be_positive(course):
    with pytest.raises(ValueError, match="jobs must be at least 1, got 0"):
        execute_chapters([], cache=course / "cache", jobs=0)


SLOW_GRID = """
import pathlib, time
grids = pathlib.Path({grids!r})
grids.mkdir(parents=True)
(grids / "first").write_text("1")
time.sleep(4)
(grids / "second").write_text("2")  # FileNotFoundError if another builder removed the folder meanwhile
print(sorted(p.name for p in grids.iterdir()))
"""


def test_a_second_builder_waits_for_the_first_and_reuses_its_entry(course):
    path, cache = course / "solutions" / "04_x.ipynb", course / "cache"
    notebook(path, SLOW_GRID.format(grids=str(cache_folder(path, cache) / "grids" / "model")))
    first_file = cache_folder(path, cache) / "grids" / "model" / "first"
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        first = pool.submit(_execute_into_cache, path, cache, False)
        deadline = time.monotonic() + 120
        while not first_file.exists():  # the first builder's kernel is rendering its grid now
            assert time.monotonic() < deadline and not first.done(), first.exception() if first.done() else "slow"
            time.sleep(0.05)
        lines: list[str] = []
        nb, grids = executed_with_grids(path, cache=cache, log=lines.append)
        assert first.result()[0].startswith("executed 04_x.ipynb")  # it finished, its folder intact
    assert lines == [], "the second builder executed the chapter again"
    assert nb.cells[0].outputs[0]["text"] == "['first', 'second']\n"
    assert sorted(p.name for p in (grids / "model").iterdir()) == ["first", "second"]


def test_each_language_and_each_stem_keeps_its_own_entry(course):
    (course / "solutions" / "zh").mkdir()
    paths = [notebook(course / "solutions" / "01_a.ipynb", "print('en')"),
             notebook(course / "solutions" / "zh" / "01_a.ipynb", "print('zh')"),
             notebook(course / "solutions" / "01_a-b.ipynb", "print('a-b')")]  # a stem that begins with 01_a's
    cache = course / "cache"
    for path in paths:
        executed_with_grids(path, cache=cache, log=lambda *_: None)
    folders = [cache_folder(path, cache) for path in paths]
    assert len(set(folders)) == 3 and all((f / "executed.ipynb").is_file() for f in folders)
    for path, want in zip(paths, ("en", "zh", "a-b")):
        lines: list[str] = []
        nb, _ = executed_with_grids(path, cache=cache, log=lines.append)
        assert lines == [] and nb.cells[0].outputs[0]["text"] == f"{want}\n"
    # a changed notebook replaces its own entry only
    notebook(paths[0], "print('en 2')")
    lines = []
    nb, _ = executed_with_grids(paths[0], cache=cache, log=lines.append)
    assert len(lines) == 1 and nb.cells[0].outputs[0]["text"] == "en 2\n"
    for folder, want in zip(folders[1:], ("zh", "a-b")):
        assert nbformat.read(folder / "executed.ipynb", as_version=4).cells[0].outputs[0]["text"] == f"{want}\n"


EXPLORER = """
import ipywidgets as w
import matplotlib.pyplot as plt
from utils.widgets.common import wire_explorer

def line(n):
    fig, ax = plt.subplots(figsize=(2, 1.5))
    ax.plot(range(n))
    return fig

n = w.IntSlider(value=2, min=1, max=3, description="n")
wire_explorer([n], {"n": n}, lambda: n.value, line)
"""


def test_the_kernel_renders_each_explorers_grid_after_the_last_cell(course):
    """A chapter's explorer, shown as the last expression of a cell, displays as its widget (saved with its
    state), and after the last cell the kernel renders its grid into grids/<its model id>/, the folder the
    edition looks up (utils/htmlbook/explorers.py); the modules it needed are recorded."""
    from utils.htmlbook.explorers import WIDGET_STATE, WIDGET_VIEW

    path = notebook(course / "solutions" / "01_e.ipynb", EXPLORER, "n.value = 3")  # moved after it was built
    nb, grids = executed_with_grids(path, cache=course / "cache", log=lambda *_: None)
    (shown,) = [o for o in nb.cells[0].outputs if WIDGET_VIEW in o.get("data", {})]
    model_id = shown["data"][WIDGET_VIEW]["model_id"]
    assert model_id in nb.metadata["widgets"][WIDGET_STATE]["state"]
    manifest = json.loads((grids / model_id / "manifest.json").read_text())
    assert manifest["renders"] == 3 and manifest["controls"][0]["values"] == [1, 2, 3]
    assert manifest["controls"][0]["initial"] == 2  # the value the saved state holds: the last cell's
    assert [p.name for p in grids.iterdir()] == [model_id]
    files = json.loads((cache_folder(path, course / "cache") / "inputs.json").read_text())["files"]
    assert {"utils/widgets/common.py", "utils/widgets/grid.py", "utils/plotting/common.py"} <= set(files)
