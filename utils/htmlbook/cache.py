"""The executed chapters of the HTML edition, with their explorers' grids: a cache kept in the repository.

Executing the twelve notebooks with every explorer's grid rendered (about 800 figures) is the slow
part of the edition, so it is done when a chapter or the code it runs changes, and the result is
committed in ``html-cache/<language>/<stem>/``:

* ``executed.ipynb``: the notebook as executed, with its widget state;
* ``grids/<model id>/``: each explorer's ``manifest.json`` and figures (:mod:`utils.widgets.grid`);
* ``inputs.json``: the SHA-256 of everything the execution read from this repository: the notebook,
  every ``utils`` module its kernel had loaded by the end (asked of the kernel itself, after the last
  cell), every data file of ``utils`` outside the HTML builder (fonts, and the message catalogues of
  the modules it loaded), and
  ``constraints.txt`` (the exact versions of matplotlib, torch and the rest draw the pixels).

An entry is **current** when every one of those files still has its recorded hash. A change to a
module no chapter's kernel loads (the grader, the builder, this module) keeps every entry current;
a change to one that a kernel loaded makes that chapter's entry stale, and the builder executes it
again. ``python -m utils.html --check`` (and a unit test) fails on a stale or missing entry, naming
the notebook and the first changed file, so a change never lands with a cache that CI would have to
rebuild.

Several builders may share the cache (two test workers): each chapter is executed under a lock
(``<stem>.lock``, not committed), and one that waited finds it current.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import multiprocessing
import shutil
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import nbformat

from utils.i18n.messages import LANGUAGES
from utils.paths import REPO_ROOT

__all__ = ["DEFAULT_JOBS", "HTML_CACHE", "cache_folder", "execute_chapters", "executed_with_grids", "kernel_epilogue",
           "language_of", "notebook_label", "stale_reason"]

HTML_CACHE = REPO_ROOT / "html-cache"
DEFAULT_JOBS = 2
"""Chapters executed at the same time when the cache lacks them (``--jobs``)."""
INPUTS = "inputs.json"
_NOT_READ_BY_KERNELS = ("utils/htmlbook/", "utils/grading/")
"""Data files of ``utils`` no chapter's kernel reads: the pages' templates and scripts, and the grader's
exercise list (its modules are recorded only when a kernel loads them, which none does)."""
KERNEL_MODULES = """\
import json as _json, sys as _sys
from pathlib import Path as _Path
_base = _Path(_sys.modules["utils"].__file__).resolve().parents[1] if "utils" in _sys.modules else None
print(_json.dumps(sorted(
    _Path(_m.__file__).resolve().relative_to(_base).as_posix()
    for _name, _m in list(_sys.modules.items())
    if _base is not None and (_name == "utils" or _name.startswith("utils.")) and getattr(_m, "__file__", None)
)))
"""
"""Run in the kernel after the last cell: the ``utils`` modules it loaded, as paths like ``utils/vocab.py``."""


def kernel_epilogue(grids: Path) -> str:
    """What the kernel runs after a chapter's last cell: render every explorer's grid into ``grids``
    (:func:`utils.widgets.grid.render_grids`; a kernel that never imported ``utils`` built none), then
    print :data:`KERNEL_MODULES` (last, so that the modules the rendering loaded are recorded too).

    >>> "_render_grids('/tmp/g')" in kernel_epilogue(Path("/tmp/g"))
    True
    """
    render = ("import sys as _sys\n"
              "if 'utils' in _sys.modules:\n"
              "    from utils.widgets.grid import render_grids as _render_grids\n"
              f"    _render_grids({str(grids)!r})\n")
    return render + KERNEL_MODULES


def language_of(path: Path) -> str:
    """``"zh"`` for a notebook in a ``zh/`` folder (``solutions/zh/``), else ``"en"``.

    >>> language_of(Path("solutions/zh/01_x.ipynb")), language_of(Path("solutions/01_x.ipynb"))
    ('zh', 'en')
    """
    return path.parent.name if path.parent.name in LANGUAGES else "en"


def notebook_label(path: Path) -> str:
    """``01_x.ipynb`` for English, ``zh/01_x.ipynb`` for Chinese: how logs and errors name a notebook."""
    return path.name if language_of(path) == "en" else f"{language_of(path)}/{path.name}"


def cache_folder(path: Path, cache: Path = HTML_CACHE) -> Path:
    """``cache/<language>/<stem>``: the English and Chinese notebooks share their stems."""
    return Path(cache) / language_of(path) / path.stem


def _sha(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def _catalogue_module(relative: str) -> str | None:
    """The module whose messages a catalogue holds (``utils/i18n/locale/zh_CN/exercises.sdpa.po`` ->
    ``utils/exercises/sdpa.py``), or None for a file that is not a message catalogue.

    >>> _catalogue_module("utils/i18n/locale/zh_CN/exercises.sdpa.po"), _catalogue_module("utils/x.otf")
    ('utils/exercises/sdpa.py', None)
    """
    folder, _, name = relative.rpartition("/")
    if not (folder.startswith("utils/i18n/locale/") and name.endswith(".po")):
        return None
    return "utils/" + name[: -len(".po")].replace(".", "/") + ".py"


def _data_files(package_root: Path, modules: Sequence[str]) -> list[str]:
    """The files of ``utils`` a kernel may read that are not modules: fonts, and the message catalogues of
    the ``modules`` it loaded. A catalogue of a module the kernel never loaded changes none of its messages:
    one English message has one translation in every catalogue (``tests/test_i18n_messages.py``), so such a
    file cannot change a loaded module's words, and editing one chapter's diagnoses stales only that
    chapter."""
    loaded = set(modules)
    found = []
    for source in sorted((package_root / "utils").rglob("*")):
        relative = source.relative_to(package_root).as_posix()
        if (source.is_file() and source.suffix not in (".py", ".pyc") and "__pycache__" not in source.parts
                and not relative.startswith(_NOT_READ_BY_KERNELS)):
            owner = _catalogue_module(relative)
            if owner is None or owner in loaded:
                found.append(relative)
    return found


def _inputs(notebook: Path, modules: Sequence[str], package_root: Path) -> dict[str, object]:
    files = sorted({*modules, *_data_files(package_root, modules), "constraints.txt"})
    return {"notebook": _sha(notebook), "files": {name: _sha(package_root / name) for name in files}}


def stale_reason(path: Path, cache: Path = HTML_CACHE, *, package_root: Path = REPO_ROOT) -> str | None:
    """Why the cache entry of the notebook at ``path`` is not current, or None when it is.

    ``package_root`` is the folder holding the ``utils`` whose files the entry recorded (the course's
    root; a test points it at a copy)."""
    record_path = cache_folder(path, cache) / INPUTS
    if not record_path.is_file():
        return "it has no entry"
    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
        recorded_notebook, files = record["notebook"], dict(record["files"])
    except (ValueError, KeyError, TypeError):
        return f"its {INPUTS} is unreadable"
    if recorded_notebook != _sha(path):
        return "the notebook changed"
    for name, digest in files.items():
        now = _sha(package_root / name)
        if now != digest:
            return f"{name} " + ("was added" if digest is None else "was removed" if now is None else "changed")
    modules = [name for name in files if name.endswith(".py")]
    added = sorted(set(_data_files(package_root, modules)) - set(files))
    if added:
        return f"{added[0]} was added"
    return None


@contextlib.contextmanager
def _chapter_lock(folder: Path):
    """Hold ``<stem>.lock`` beside the chapter's entry: one builder at a time executes a chapter."""
    import fcntl

    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{folder.name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def executed_with_grids(path: Path, *, cache: Path = HTML_CACHE, execute: bool = False,
                        log=print) -> tuple[nbformat.NotebookNode, Path]:
    """The notebook at ``path`` executed with every explorer's grid rendered, and the grids' folder.

    Taken from the cache when its entry is current (:func:`stale_reason`); else (and always with
    ``execute``) executed again into it, replacing the entry. Safe when several processes build into
    one cache: a chapter is executed under a lock, and a builder that waited for it finds it current.
    """
    from utils.i18n.messages import LANG_ENV
    from utils.notebook_run import deterministic_env, execute_notebook

    path = Path(path)
    folder = cache_folder(path, cache)
    executed, grids = folder / "executed.ipynb", folder / "grids"
    if not execute and stale_reason(path, cache) is None:
        return nbformat.read(executed, as_version=4), grids
    with _chapter_lock(folder):
        if not execute and stale_reason(path, cache) is None:
            return nbformat.read(executed, as_version=4), grids  # another builder executed it while this one waited
        if folder.exists():
            shutil.rmtree(folder)
        grids.mkdir(parents=True)
        env = deterministic_env()
        if language_of(path) == "zh":
            env[LANG_ENV] = "zh"
        result = execute_notebook(path, env=env, epilogue=kernel_epilogue(grids))
        modules = json.loads(result.epilogue.strip().splitlines()[-1]) if result.epilogue.strip() else []
        log(f"executed {notebook_label(path)} with its explorers' grids: {result.wall_s:.1f} s")
        nbformat.write(result.notebook, executed)
        # last: an entry without it (a build that stopped half-way) is never taken for current
        (folder / INPUTS).write_text(json.dumps(_inputs(path, modules, REPO_ROOT), indent=1) + "\n",
                                     encoding="utf-8")
    return result.notebook, grids


def _execute_into_cache(path: Path, cache: Path, execute: bool) -> list[str]:
    """Run in a worker process: execute ``path`` into the cache; return the lines it would have logged
    (the notebook itself travels back through the cache, not through a pipe)."""
    lines: list[str] = []
    executed_with_grids(path, cache=cache, execute=execute, log=lines.append)
    return lines


def execute_chapters(paths: Sequence[Path], *, cache: Path = HTML_CACHE, execute: bool = False,
                     jobs: int = DEFAULT_JOBS, log=print) -> None:
    """Make sure every notebook of ``paths`` has a current entry, with its grids, in ``cache``.

    Those without one (all of them with ``execute``) run ``jobs`` at a time, each in its own process
    and kernel, with exactly the environment :func:`executed_with_grids` gives one run alone. The
    later chapters train models and run longest, so they start first: two long ones do not end up
    one after the other while the other worker idles.
    """
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    missing = [p for p in paths if execute or stale_reason(p, cache) is not None]
    missing.sort(key=lambda p: p.name, reverse=True)
    if jobs == 1 or len(missing) < 2:
        for path in missing:
            executed_with_grids(path, cache=cache, execute=execute, log=log)
        return
    # spawn: a fresh interpreter per worker (forking a parent that has imported torch or zmq is unsafe)
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(jobs, len(missing)), mp_context=context) as pool:
        futures = [pool.submit(_execute_into_cache, path, cache, execute) for path in missing]
        for future in futures:
            for line in future.result():  # re-raises a worker's error (CellExecutionError names the cell)
                log(line)
