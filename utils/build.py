"""Build the student notebooks: ``solutions/NN_*.ipynb`` -> ``chapters/NN_*.ipynb``.

``python -m utils.build`` (``make chapters``):

1. stamps, in each solution, the header badges (what lies between ``<!-- badges -->`` and
   ``<!-- /badges -->`` in the first cell) and the setup cell (the cell tagged ``course-setup``), both
   made from ``[tool.course]`` in ``pyproject.toml``; nothing else in a solution is touched;
2. writes ``chapters/NN_*.ipynb``: every exercise cell (cell metadata ``course.exercise``) has what lies
   between whole-line ``# BEGIN SOLUTION`` / ``# END SOLUTION`` markers replaced by
   ``# YOUR CODE HERE`` / ``raise NotImplementedError`` at the marker's indentation; outputs and
   execution counts are cleared, cell ids kept, notebook metadata reduced to what is not
   machine-specific, plus the builder's ``course.generated`` marker.

A file is written only when its content changes. A chapter notebook without the marker, or whose
cells were edited since it was generated (a learner's work), is never overwritten without ``--force``.

Other modes::

    python -m utils.build --check                   # exit 1 if anything is out of date; writes nothing
    python -m utils.build --execute solutions/01_queries_keys_values.ipynb   # run, store outputs, build

Every problem is a :class:`BuildError` naming the file, the cell and what to fix.
"""

from __future__ import annotations

import argparse
import ast
import copy
import hashlib
import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import nbformat

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

__all__ = [
    "BEGIN",
    "BuildError",
    "CourseConfig",
    "END",
    "PIP_SOURCE_ENV",
    "SETUP_TAG",
    "STUB",
    "build",
    "chapter_path",
    "load_config",
    "main",
    "outdated",
    "render",
    "setup_source",
    "strip_solution",
]

REPO_ROOT = Path(__file__).resolve().parent.parent

BEGIN, END = "# BEGIN SOLUTION", "# END SOLUTION"
STUB = ("# YOUR CODE HERE", "raise NotImplementedError")
BADGES_OPEN, BADGES_CLOSE = "<!-- badges -->", "<!-- /badges -->"
SETUP_TAG = "course-setup"
GENERATED_KEY = "generated"
NOTEBOOK_GLOB = "[0-9][0-9]_*.ipynb"

PIP_SOURCE_ENV = "COURSE_PIP_SOURCE"
"""Environment variable that, when set in the kernel, replaces the pip requirement the setup cell
installs on Colab (a local path or a ``file://`` URL), so a test can simulate Colab offline."""

# The setup cell. One template for every notebook; @PIP_SOURCE@ becomes a quoted pip requirement.
# It must stay ruff-clean as a notebook cell and print nothing (its output is the same everywhere).
SETUP_TEMPLATE = '''\
# Setup: stamped by `python -m utils.build` from [tool.course] in pyproject.toml. Edit the template
# in utils/build.py, not this cell.
import os
import sys

COURSE_PIP_SOURCE = os.environ.get("@PIP_SOURCE_ENV@", @PIP_SOURCE@)
if "google.colab" in sys.modules:
    # Colab: install the course package at a pinned ref. No --upgrade: our requirements are ranges,
    # so Colab's own torch satisfies them and stays.
    import importlib
    import subprocess

    _pip = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", COURSE_PIP_SOURCE],
        capture_output=True,
        text=True,
    )
    if _pip.returncode != 0:
        raise RuntimeError(f"pip install {COURSE_PIP_SOURCE} failed:\\n{_pip.stdout}{_pip.stderr}")
    importlib.invalidate_caches()
    from google.colab import output as _colab_output

    _colab_output.enable_custom_widget_manager()
else:
    # Locally or on Binder: use the course folder around the notebook (repo root, chapters/ or
    # solutions/), found by walking up to utils/__init__.py; else an installed `utils`.
    from pathlib import Path

    for _folder in [Path.cwd(), *Path.cwd().parents]:
        if (_folder / "utils" / "__init__.py").is_file():
            if str(_folder) not in sys.path:
                sys.path.insert(0, str(_folder))
            break

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

import utils
from utils.exercises import check

DEVICE = utils.get_device()
utils.seed_everything(0)
%matplotlib inline'''

_KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
_LANGUAGE_INFO = {
    "codemirror_mode": {"name": "ipython", "version": 3},
    "file_extension": ".py",
    "mimetype": "text/x-python",
    "name": "python",
    "nbconvert_exporter": "python",
    "pygments_lexer": "ipython3",
}
# Cell metadata a chapter keeps; timings (``execution``, ``ExecuteTime``) and view state are dropped.
_CELL_METADATA_KEPT = ("tags", "course", "editable", "deletable", "jupyter", "slideshow", "name")


class BuildError(Exception):
    """A problem in a source notebook or the configuration, with where it is and what to fix."""

    def __init__(self, path: str | Path, cell: int | None, message: str) -> None:
        self.path = str(path)
        self.cell = cell
        self.message = message
        where = self.path if cell is None else f"{self.path}, cell {cell}"
        super().__init__(f"{where}: {message}")


# --------------------------------------------------------------------------------------------------
# Configuration: [tool.course] in pyproject.toml
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CourseConfig:
    """Where the course lives. ``ref`` is the tag or commit Colab installs (default: the branch)."""

    repository: str
    branch: str
    ref: str | None = None
    package: str = "attention-step-by-step"

    @property
    def slug(self) -> str:
        """``owner/name`` of the GitHub repository."""
        match = re.fullmatch(r"https://github\.com/([\w.-]+)/([\w.-]+?)(?:\.git)?/?", self.repository)
        if not match:
            raise BuildError(
                "pyproject.toml", None,
                f"[tool.course] repository = {self.repository!r} is not a https://github.com/<owner>/<name> URL",
            )
        return f"{match[1]}/{match[2]}"

    @property
    def pip_source(self) -> str:
        """The pip requirement the setup cell installs on Colab."""
        url = self.repository.rstrip("/")
        return f"{self.package} @ git+{url}@{self.ref or self.branch}"

    def colab_url(self, path: str) -> str:
        return f"https://colab.research.google.com/github/{self.slug}/blob/{self.branch}/{quote(path)}"

    def binder_url(self, path: str) -> str:
        return f"https://mybinder.org/v2/gh/{self.slug}/{self.branch}?labpath={quote(path)}"

    def badges(self, path: str) -> str:
        """The badge line for the notebook at ``path`` (relative to the repository root)."""
        return (
            f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({self.colab_url(path)}) "
            f"[![Binder](https://mybinder.org/badge_logo.svg)]({self.binder_url(path)})"
        )


def load_config(pyproject: str | Path = REPO_ROOT / "pyproject.toml") -> CourseConfig:
    """Read ``[tool.course]`` (``repository``, ``branch``, optional ``ref``) from ``pyproject``."""
    pyproject = Path(pyproject)
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise BuildError(pyproject, None, f"cannot read it: {exc}") from exc
    course = data.get("tool", {}).get("course", {})
    missing = [key for key in ("repository", "branch") if not isinstance(course.get(key), str)]
    if missing:
        raise BuildError(pyproject, None, f"[tool.course] needs {' and '.join(missing)} (strings)")
    config = CourseConfig(
        repository=course["repository"],
        branch=course["branch"],
        ref=course.get("ref") or None,
        package=data.get("project", {}).get("name", CourseConfig.package),
    )
    config.slug  # noqa: B018 - validates the URL early
    return config


def setup_source(config: CourseConfig) -> str:
    """The setup cell's source for ``config``."""
    return SETUP_TEMPLATE.replace("@PIP_SOURCE_ENV@", PIP_SOURCE_ENV).replace(
        "@PIP_SOURCE@", json.dumps(config.pip_source)
    )


# --------------------------------------------------------------------------------------------------
# Cells
# --------------------------------------------------------------------------------------------------


def strip_solution(source: str, path: str | Path = "<cell>", cell: int | None = None) -> str:
    """Replace every ``# BEGIN SOLUTION`` ... ``# END SOLUTION`` block (markers included) by the stub at
    the BEGIN marker's indentation. Raises :class:`BuildError` on unbalanced or nested markers."""
    out: list[str] = []
    begin: tuple[int, str] | None = None
    for number, line in enumerate(source.splitlines(), 1):
        stripped = line.strip()
        indent = line[: len(line) - len(line.lstrip())]
        if stripped == BEGIN:
            if begin is not None:
                raise BuildError(path, cell, f"line {number}: nested {BEGIN} (the one on line {begin[0]} is still open)")
            begin = (number, indent)
            out.extend(indent + stub for stub in STUB)
        elif stripped == END:
            if begin is None:
                raise BuildError(path, cell, f"line {number}: {END} without a {BEGIN} before it")
            if indent != begin[1]:
                raise BuildError(
                    path, cell, f"line {number}: {END} is indented differently from its {BEGIN} on line {begin[0]}"
                )
            begin = None
        elif begin is None:
            out.append(line)
    if begin is not None:
        raise BuildError(path, cell, f"line {begin[0]}: {BEGIN} has no matching {END}")
    return "\n".join(out)


def _marker_lines(source: str) -> list[int]:
    return [n for n, line in enumerate(source.splitlines(), 1) if line.strip() in (BEGIN, END)]


def _exercise_meta(cell: Mapping) -> Mapping | None:
    course = cell.get("metadata", {}).get("course")
    if isinstance(course, Mapping) and "exercise" in course:
        return course
    return None


def _check_exercise_cell(
    cell: Mapping, index: int, path: str, chapter: int | None, registry: Mapping
) -> str:
    """Validate one exercise cell; return its exercise id."""
    meta = _exercise_meta(cell)
    assert meta is not None
    exercise_id = meta["exercise"]
    if cell["cell_type"] != "code":
        raise BuildError(path, index, f"exercise {exercise_id!r} is on a {cell['cell_type']} cell; it must be a code cell")
    if not isinstance(exercise_id, str) or not re.fullmatch(r"ch\d+\.[A-Za-z_]\w*", exercise_id):
        raise BuildError(path, index, f"exercise id {exercise_id!r} must look like 'ch<N>.<function name>'")
    if chapter is not None and exercise_id.split(".")[0] != f"ch{chapter}":
        raise BuildError(path, index, f"exercise {exercise_id!r} is in chapter {chapter}'s notebook; use 'ch{chapter}.…'")
    if exercise_id not in registry:
        raise BuildError(
            path, index,
            f"exercise {exercise_id!r} is not defined in utils.exercises; add an Exercise to EXERCISES in "
            f"the chapter's module (known: {', '.join(registry) or 'none'})",
        )
    points = meta.get("points")
    if not isinstance(points, int) or isinstance(points, bool):
        raise BuildError(path, index, f"exercise {exercise_id!r}: metadata course.points must be an int, got {points!r}")
    if points != registry[exercise_id].points:
        raise BuildError(
            path, index,
            f"exercise {exercise_id!r}: metadata says {points} points but utils.exercises says "
            f"{registry[exercise_id].points}; make them agree",
        )
    source = cell["source"]
    strip_solution(source, path, index)  # marker errors first: they explain a syntax error
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise BuildError(path, index, f"exercise {exercise_id!r} is not valid Python: {exc}") from exc
    defs = [node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    func_name = exercise_id.split(".", 1)[1]
    if len(defs) != 1:
        names = ", ".join(d.name for d in defs) or "none"
        raise BuildError(
            path, index,
            f"exercise {exercise_id!r} must define exactly one top-level function ({func_name}), found {len(defs)}: {names}",
        )
    if defs[0].name != func_name:
        raise BuildError(path, index, f"exercise {exercise_id!r} defines {defs[0].name}(); name it {func_name}()")
    if ast.get_docstring(defs[0]) is None:
        raise BuildError(path, index, f"{func_name}() needs a docstring stating its input and output shapes")
    if not _marker_lines(source):
        raise BuildError(path, index, f"exercise {exercise_id!r} has no {BEGIN} / {END} block, so nothing would be hidden")
    return exercise_id


def _badge_span(nb: Mapping, path: str) -> tuple[int, int]:
    """Where the badge region (both markers included) lies in the first cell's source."""
    if not nb["cells"] or nb["cells"][0]["cell_type"] != "markdown":
        raise BuildError(path, 0, "the first cell must be the markdown header")
    source = nb["cells"][0]["source"]
    if source.count(BADGES_OPEN) != 1 or source.count(BADGES_CLOSE) != 1 or source.index(BADGES_CLOSE) < source.index(BADGES_OPEN):
        raise BuildError(path, 0, f"the header needs one {BADGES_OPEN} followed by one {BADGES_CLOSE} (badges go between)")
    return source.index(BADGES_OPEN), source.index(BADGES_CLOSE) + len(BADGES_CLOSE)


def _setup_index(nb: Mapping, path: str) -> int:
    tagged = [i for i, cell in enumerate(nb["cells"]) if SETUP_TAG in cell.get("metadata", {}).get("tags", [])]
    if len(tagged) != 1:
        raise BuildError(path, None, f"needs exactly one cell tagged {SETUP_TAG!r}, found {len(tagged)}")
    index = tagged[0]
    if index != 1 or nb["cells"][index]["cell_type"] != "code":
        raise BuildError(path, index, f"the cell tagged {SETUP_TAG!r} must be the second cell, a code cell")
    return index


def stamp(nb: nbformat.NotebookNode, config: CourseConfig, relpath: str) -> bool:
    """Stamp the badges (for a notebook at ``relpath``) and the setup cell into ``nb`` in place.
    Returns whether anything changed."""
    start, end = _badge_span(nb, relpath)
    source = nb["cells"][0]["source"]
    # Markers and badges on lines of their own: a line starting with "<!--" is a raw HTML block in
    # Markdown, so badges on the markers' line would show as literal text instead of images.
    region = f"{BADGES_OPEN}\n{config.badges(relpath)}\n{BADGES_CLOSE}"
    new_source = source[:start] + region + source[end:]
    setup = _setup_index(nb, relpath)
    changed = False
    if new_source != source:
        nb["cells"][0]["source"] = new_source
        changed = True
    if nb["cells"][setup]["source"] != setup_source(config):
        nb["cells"][setup]["source"] = setup_source(config)
        changed = True
    return changed


def _digest(cells: Sequence[Mapping]) -> str:
    """A hash of what a learner edits (cell types and sources), to notice work in a chapter file."""
    payload = json.dumps([[c["cell_type"], c["source"]] for c in cells], ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()


def chapter_path(solution: str | Path) -> str:
    """``solutions/NN_name.ipynb`` -> ``chapters/NN_name.ipynb`` (relative paths)."""
    return f"chapters/{Path(solution).name}"


def _to_text(nb: nbformat.NotebookNode) -> str:
    text = nbformat.writes(nb)
    return text if text.endswith("\n") else text + "\n"


def _read(path: Path, rel: str) -> nbformat.NotebookNode:
    try:
        return nbformat.read(path, as_version=4)
    except Exception as exc:  # nbformat raises several kinds for broken JSON
        raise BuildError(rel, None, f"cannot read the notebook: {exc}") from exc


def render_chapter(
    solution: nbformat.NotebookNode, config: CourseConfig, rel_solution: str, registry: Mapping
) -> tuple[nbformat.NotebookNode, list[str]]:
    """Validate a (stamped) solution and return its chapter notebook and its exercise ids."""
    match = re.match(r"(\d+)_", Path(rel_solution).name)
    chapter = int(match[1]) if match else None
    rel_chapter = chapter_path(rel_solution)
    nb = copy.deepcopy(solution)
    exercise_ids: list[str] = []
    for index, cell in enumerate(nb["cells"]):
        if "id" not in cell:
            raise BuildError(
                rel_solution, index,
                "has no cell id; open and save the notebook in JupyterLab 3 or later (nbformat 4.5) to add ids",
            )
        if _exercise_meta(cell) is not None:
            exercise_ids.append(_check_exercise_cell(cell, index, rel_solution, chapter, registry))
            cell["source"] = strip_solution(cell["source"], rel_solution, index)
            try:
                ast.parse(cell["source"])
            except SyntaxError as exc:
                raise BuildError(
                    rel_solution, index, f"with the solution replaced by the stub the cell is not valid Python ({exc}); "
                    f"put {BEGIN} / {END} around whole statements inside the function body",
                ) from exc
        elif _marker_lines(cell["source"]):
            line = _marker_lines(cell["source"])[0]
            raise BuildError(
                rel_solution, index,
                f"line {line}: solution marker outside an exercise cell; add metadata "
                '{"course": {"exercise": "ch<N>.<name>", "points": <int>}} or remove the marker',
            )
        if cell["cell_type"] == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        cell["metadata"] = {k: v for k, v in cell.get("metadata", {}).items() if k in _CELL_METADATA_KEPT}
    duplicates = sorted({e for e in exercise_ids if exercise_ids.count(e) > 1})
    if duplicates:
        raise BuildError(rel_solution, None, f"exercise {duplicates[0]!r} appears twice in this notebook; ids are unique")
    stamp(nb, config, rel_chapter)
    nb["metadata"] = nbformat.from_dict(
        {
            "kernelspec": dict(_KERNELSPEC),
            "language_info": copy.deepcopy(_LANGUAGE_INFO),
            "course": {
                GENERATED_KEY: {
                    "by": "python -m utils.build",
                    "source": rel_solution,
                    "note": "Generated from the solution notebook; edits to the source go there.",
                    "cells_sha256": _digest(nb["cells"]),
                }
            },
        }
    )
    nb["nbformat"], nb["nbformat_minor"] = 4, max(5, solution.get("nbformat_minor", 5))
    nbformat.validate(nb)
    return nb, exercise_ids


# --------------------------------------------------------------------------------------------------
# The whole course
# --------------------------------------------------------------------------------------------------


def _registry() -> Mapping:
    from utils.exercises import all_exercises

    return all_exercises()


def render(root: str | Path = REPO_ROOT, registry: Mapping | None = None) -> dict[Path, str]:
    """Every file the build should produce, with its exact text: stamped solutions (only those whose
    stamped regions are out of date) and all chapter notebooks. Writes nothing."""
    root = Path(root)
    config = load_config(root / "pyproject.toml")
    registry = _registry() if registry is None else registry
    files: dict[Path, str] = {}
    owner: dict[str, str] = {}
    for path in sorted((root / "solutions").glob(NOTEBOOK_GLOB)):
        rel = path.relative_to(root).as_posix()
        solution = _read(path, rel)
        if stamp(solution, config, rel):
            files[path] = _to_text(solution)
        chapter, ids = render_chapter(solution, config, rel, registry)
        for exercise_id in ids:
            if exercise_id in owner:
                raise BuildError(rel, None, f"exercise {exercise_id!r} is already in {owner[exercise_id]}; ids are unique")
            owner[exercise_id] = rel
        files[root / chapter_path(rel)] = _to_text(chapter)
    return files


def _generated_orphans(root: Path, expected: Mapping[Path, str]) -> list[Path]:
    """Generated chapter notebooks whose solution no longer exists."""
    orphans = []
    for path in sorted((root / "chapters").glob("*.ipynb")):
        if path not in expected and _generation_state(path) != "foreign":
            orphans.append(path)
    return orphans


def _generation_state(path: Path) -> str:
    """``"clean"``: generated and not edited since; ``"edited"``: generated, cells edited since;
    ``"foreign"``: not made by the builder (or unreadable)."""
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception:
        return "foreign"
    marker = nb.get("metadata", {}).get("course", {}).get(GENERATED_KEY)
    if not isinstance(marker, Mapping):
        return "foreign"
    return "clean" if marker.get("cells_sha256") == _digest(nb["cells"]) else "edited"


def outdated(root: str | Path = REPO_ROOT, registry: Mapping | None = None) -> list[Path]:
    """Files that a build would write or delete (``--check``)."""
    root = Path(root)
    expected = render(root, registry)
    stale = [p for p, text in expected.items() if not p.is_file() or p.read_text(encoding="utf-8") != text]
    return stale + _generated_orphans(root, expected)


def build(
    root: str | Path = REPO_ROOT, *, force: bool = False, registry: Mapping | None = None, log=print
) -> list[Path]:
    """Stamp the solutions and write ``chapters/``; return the paths written or deleted.

    Refuses (``BuildError``) to overwrite a chapter notebook that the builder did not generate, or that
    was edited since, unless ``force``. Validates everything before writing anything.
    """
    root = Path(root)
    expected = render(root, registry)
    changes = [p for p, text in expected.items() if not p.is_file() or p.read_text(encoding="utf-8") != text]
    if not force:
        for path in changes:
            if path.parent == root / "chapters" and path.exists():
                state = _generation_state(path)
                if state != "clean":
                    what = "was not generated by the builder" if state == "foreign" else "was edited since it was generated"
                    raise BuildError(
                        path.relative_to(root), None,
                        f"{what}; refusing to overwrite it so no work is lost. Move your work elsewhere, "
                        "or pass --force to overwrite it",
                    )
    (root / "chapters").mkdir(exist_ok=True)
    for path in changes:
        path.write_text(expected[path], encoding="utf-8")
        log(f"wrote {path.relative_to(root)}")
    orphans = _generated_orphans(root, expected)
    for path in orphans:
        if _generation_state(path) == "edited" and not force:
            log(f"kept {path.relative_to(root)}: its solution is gone but it was edited (delete it or use --force)")
            continue
        path.unlink()
        log(f"deleted {path.relative_to(root)} (its solution is gone)")
        changes.append(path)
    return changes


def execute(paths: Sequence[str | Path], root: str | Path = REPO_ROOT, log=print) -> None:
    """Stamp, execute in place (cwd = the notebook's folder) and store the outputs of each solution."""
    from utils.notebook_run import execute_notebook

    root = Path(root)
    config = load_config(root / "pyproject.toml")
    for given in paths:
        path = Path(given).resolve()
        try:
            rel = path.relative_to(root.resolve()).as_posix()
        except ValueError as exc:
            raise BuildError(given, None, f"is not inside the course at {root}") from exc
        if not rel.startswith("solutions/"):
            raise BuildError(rel, None, "only solution notebooks are executed (chapters/ is generated from them)")
        nb = _read(path, rel)
        if stamp(nb, config, rel):
            path.write_text(_to_text(nb), encoding="utf-8")
        result = execute_notebook(path)
        executed = result.notebook
        executed.metadata["kernelspec"] = dict(_KERNELSPEC)
        executed.metadata.get("language_info", {}).pop("version", None)
        path.write_text(_to_text(executed), encoding="utf-8")
        rss = "n/a" if result.peak_rss_mib is None else f"{result.peak_rss_mib:.0f} MiB"
        log(f"executed {rel}: {result.wall_s:.1f} s, kernel peak RSS {rss}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m utils.build", description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 if solutions' stamps or chapters/ are out of date")
    mode.add_argument("--execute", nargs="+", metavar="PATH", help="execute these solution notebooks in place, then build")
    parser.add_argument("--force", action="store_true", help="overwrite chapter notebooks even if edited or not generated")
    parser.add_argument("--root", default=str(REPO_ROOT), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    root = Path(args.root)
    try:
        if args.check:
            stale = outdated(root)
            for path in stale:
                print(f"out of date: {path.relative_to(root)}")
            if stale:
                print("run `python -m utils.build` (make chapters) and commit the result", file=sys.stderr)
                return 1
            print("chapters/ and the solutions' stamps are up to date")
            return 0
        if args.execute:
            execute(args.execute, root)
        changed = build(root, force=args.force)
        if not changed:
            print("chapters/ is up to date")
        return 0
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        if type(exc).__name__ == "CellExecutionError":
            print(f"error: executing failed:\n{exc}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
