"""Step 5 of a build: the whole course. Renders every ``solutions/NN_*.ipynb`` and writes what changed.

A solution that has a translation catalogue (``i18n/zh_CN/<stem>.po``) also gets its Chinese solution
``solutions/zh/<stem>.ipynb`` and chapter ``chapters/zh/<stem>.ipynb`` (:mod:`utils.builder.translate`).

When the course root holds the ``utils/grading`` package (the course's own checkout, not a scratch
course in a test), the build also writes the grader's exercise list, ``utils/grading/exercises.json``
(:mod:`utils.grading.manifest`): package data, so that a pip-installed grader knows the exercises.

A file is written only when its content changes. A chapter notebook without the builder's marker, or
whose cells were edited since it was generated (a learner's work: its cells no longer match the hash
in the marker), is never overwritten without ``force``. Everything is validated before anything is
written.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import nbformat

from utils.builder.chapter import GENERATED_KEY, chapter_path, digest, render_chapter
from utils.builder.config import load_config
from utils.builder.stamps import stamp
from utils.builder.strip import exercise_meta
from utils.files import holds, write_if_changed
from utils.grading.manifest import MANIFEST_FILE, manifest_text
from utils.notebook_files import NOTEBOOK_GLOB, BuildError, read_source_notebook
from utils.paths import REPO_ROOT

__all__ = ["GENERATED_DIRS", "build", "generation_state", "notebook_text", "outdated", "render"]

GENERATED_DIRS = ("chapters", "chapters/zh", "solutions/zh")
"""The folders of generated notebooks: never hand-edited, guarded against overwriting a learner's edits."""


def notebook_text(nb: nbformat.NotebookNode) -> str:
    """The notebook as the builder writes it (nbformat's JSON, ending with a newline)."""
    text = nbformat.writes(nb)
    return text if text.endswith("\n") else text + "\n"


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
    manifest: list[dict] = []
    stamped: dict[str, nbformat.NotebookNode] = {}
    for path in sorted((root / "solutions").glob(NOTEBOOK_GLOB)):
        rel = path.relative_to(root).as_posix()
        solution = read_source_notebook(path, rel)
        if stamp(solution, config, rel):
            files[path] = notebook_text(solution)
        stamped[rel] = solution
        chapter, ids = render_chapter(solution, config, rel, registry)
        for exercise_id in ids:
            if exercise_id in owner:
                raise BuildError(
                    rel, None, f"exercise {exercise_id!r} is already in {owner[exercise_id]}; ids are unique"
                )
            owner[exercise_id] = rel
        files[root / chapter_path(rel)] = notebook_text(chapter)
        manifest += [{"id": meta["exercise"], "points": meta.get("points"), "notebook": path.name}
                     for meta in map(exercise_meta, solution["cells"]) if meta is not None]
    from utils.builder.translate import render_translations  # Babel is needed only where catalogues are built

    files.update({p: notebook_text(nb) for p, nb in render_translations(root, config, stamped, registry).items()})
    # a linked utils/ (a test course borrowing the package) is not this course's: never write through it
    if (root / "utils" / "grading").is_dir() and not (root / "utils").is_symlink():
        files[root / "utils" / "grading" / MANIFEST_FILE] = manifest_text(manifest)
    return files


def _generated_orphans(root: Path, expected: Mapping[Path, str]) -> list[Path]:
    """Generated notebooks (chapters, translations) whose source no longer exists."""
    orphans = []
    for folder in GENERATED_DIRS:
        for path in sorted((root / folder).glob("*.ipynb")):
            if path not in expected and generation_state(path) != "foreign":
                orphans.append(path)
    return orphans


def generation_state(path: Path) -> str:
    """``"clean"``: generated and not edited since; ``"edited"``: generated, cells edited since;
    ``"foreign"``: not made by the builder (or unreadable)."""
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception:
        return "foreign"
    marker = nb.get("metadata", {}).get("course", {}).get(GENERATED_KEY)
    if not isinstance(marker, Mapping):
        return "foreign"
    return "clean" if marker.get("cells_sha256") == digest(nb["cells"]) else "edited"


def outdated(root: str | Path = REPO_ROOT, registry: Mapping | None = None) -> list[Path]:
    """Files that a build would write or delete (``--check``)."""
    root = Path(root)
    expected = render(root, registry)
    stale = [p for p, text in expected.items() if not holds(p, text)]
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
    changes = [p for p, text in expected.items() if not holds(p, text)]
    if not force:
        for path in changes:
            if path.parent in {root / folder for folder in GENERATED_DIRS} and path.exists():
                state = generation_state(path)
                if state != "clean":
                    what = (
                        "was not generated by the builder" if state == "foreign"
                        else "was edited since it was generated"
                    )
                    raise BuildError(
                        path.relative_to(root), None,
                        f"{what}; refusing to overwrite it so no work is lost. Move your work elsewhere, "
                        "or pass --force to overwrite it",
                    )
    for path in changes:
        write_if_changed(path, expected[path])
        log(f"wrote {path.relative_to(root)}")
    orphans = _generated_orphans(root, expected)
    for path in orphans:
        if generation_state(path) == "edited" and not force:
            log(f"kept {path.relative_to(root)}: its solution is gone but it was edited (delete it or use --force)")
            continue
        path.unlink()
        log(f"deleted {path.relative_to(root)} (its solution is gone)")
        changes.append(path)
    return changes
