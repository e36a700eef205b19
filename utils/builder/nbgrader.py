"""``python -m utils.build --nbgrader DIR``: the course as an nbgrader course directory.

For each ``solutions/NN_name.ipynb`` it writes ``DIR/source/NN_name/NN_name.ipynb`` (one assignment per
chapter, named like its notebook), stamped as the builder stamps it, outputs cleared, with nbgrader's
cell metadata (schema 3):

- **exercise cells** (``course.exercise``) become *solution* cells (``grade_id``: the exercise id
  with ``-`` for ``.``, as nbgrader's ids allow); their ``# BEGIN SOLUTION`` / ``# END SOLUTION``
  lines become nbgrader's ``### BEGIN SOLUTION`` / ``### END SOLUTION``, at the same indentation.
  Their ``course`` metadata stays, so the course's own grader can grade nbgrader's released notebooks;
- **check cells** (``check.<name>(<name>)``) become locked, graded *test* cells worth the exercise's
  points (``grade_id``: ``ch2-causal_mask-tests``). In the students' copy they run the public cases with
  ``assert_passed=True``. Their ``### BEGIN HIDDEN TESTS`` block, which ``nbgrader generate_assignment``
  removes and ``nbgrader autograde`` restores, only raises: no test cell decides a grade, and autograde
  runs no submission in a kernel. The course's judge does (``nbgrader_hook.py``,
  :mod:`utils.builder.nbgrader_hook`, in place of nbgrader's ``Execute``): it grades every submitted notebook
  with the course's grader in one fresh, sandboxed process, then writes each test cell's verdict and points
  (partial credit per named part) as its output. Without the judge, the block's error gives 0 and says why;
- **prose cells** (markdown) and the **setup cell** are locked (``grade_id``: ``cell-<cell id>``);
  other code cells stay free, since the chapters' "Try it" prompts ask the learner to edit them.

``DIR/nbgrader_config.py`` names the course, keeps the course's stub for cleared solutions and installs
the judge, which runs ``COURSE_PYTHON`` (the Python that exported,
unless the instructor edits it). ``DIR/grading_secret.txt`` holds the course's secret seed (drawn at
random, or ``--seed``), mode 0600: the judge draws each student's hidden cases from it as
``python -m utils.grade --seed SEED`` does. It is written once and never replaced; nothing else holds it.
``DIR/secret_fingerprints.json`` records, for each assignment exported, the secret's fingerprint (which
does not reveal it): the judge refuses to autograde an assignment with another secret, and an export that
would give an assignment another secret (the file moved away, or another ``--seed``) is refused unless
``--force``. ``DIR/judge_code.json`` (0600) records the course package's files as ``COURSE_PYTHON``
imports them (their digests): autograde refuses to grade, naming the files, when they differ.
``DIR/source_digests.json`` records the digest of each source notebook as written: ``source/`` is
generated, so an export that would replace a notebook edited since (or not written by an export) is
refused, naming it, unless ``--force``, which first moves the edited file to ``DIR/edited_source/``.
Run nbgrader (0.9) in DIR (students' kernels, for their Validate button, need the course package)::

    nbgrader generate_assignment 02_scaled_dot_product_attention
    nbgrader autograde 02_scaled_dot_product_attention
    nbgrader export
"""

from __future__ import annotations

import copy
import json
import os
import re
import secrets
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import nbformat

from utils.builder.chapter import KERNELSPEC, chapter_path
from utils.builder.config import load_config
from utils.builder.course import notebook_text
from utils.builder.nbgrader_hook import BOOTSTRAP, FINGERPRINTS_NAME, JUDGE_CODE_NAME, fingerprint
from utils.builder.nbgrader_sources import (
    EDITED_DIR,
    SOURCE_DIGESTS_NAME,
    edited_sources,
    keep_aside,
    read_string_map,
    record_source_digests,
)
from utils.builder.stamps import SETUP_TAG, stamp
from utils.builder.strip import BEGIN, END, exercise_meta
from utils.grading.course_secret import SECRET_NAME, SecretError, read_secret, write_secret
from utils.notebook_files import NOTEBOOK_GLOB, BuildError, read_source_notebook
from utils.paths import REPO_ROOT

__all__ = [
    "HOOK_NAME",
    "SECRET_NAME",
    "export_nbgrader",
    "nbgrader_config",
    "nbgrader_notebook",
    "nbgrader_test_source",
]

HOOK_NAME = "nbgrader_hook.py"
"""The judge's file in the course directory: a copy of :mod:`utils.builder.nbgrader_hook`."""
_HOOK_SOURCE = Path(__file__).with_name("nbgrader_hook.py")
_CONFIG = '''"""nbgrader's configuration for the course exported by `python -m utils.build --nbgrader DIR`."""

import os
import sys

c = get_config()  # noqa: F821  (nbgrader defines it)
c.CourseDirectory.course_id = "attention-step-by-step"
# The course's own stub, as in chapters/.
c.ClearSolutions.code_stub = {{"python": "# YOUR CODE HERE\\nraise NotImplementedError"}}
# The course's judge grades each submission in the course's sandbox (nbgrader_hook.py, next to this file),
# with the hidden cases of the seed in grading_secret.txt; autograde runs no submission in a kernel.
# COURSE_PYTHON: a Python in which the course package is installed (the one that exported this course).
COURSE_PYTHON = {python!r}
COURSE_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, COURSE_DIR)
from nbgrader_hook import install  # noqa: E402

install(c, python=COURSE_PYTHON, course_dir=COURSE_DIR, secret={secret!r})
'''
_CHECK_CELL = re.compile(r"\s*check\.(\w+)\((\w+)\)\s*")


def nbgrader_config(python: str = sys.executable) -> str:
    """The text of ``nbgrader_config.py``, whose judge runs ``python`` (a Python with the course installed)."""
    return _CONFIG.format(python=str(python), secret=SECRET_NAME)


def _grade_id(exercise_id: str) -> str:
    """nbgrader's ids allow letters, digits, ``_`` and ``-`` only: ``ch2.causal_mask`` -> ``ch2-causal_mask``."""
    return exercise_id.replace(".", "-")


def nbgrader_test_source(func_name: str, exercise_id: str, points: int) -> str:
    """The source of the graded test cell that replaces ``check.<func_name>(<func_name>)``.

    >>> print(nbgrader_test_source("causal_mask", "ch2.causal_mask", 1))
    # Tests of ch2.causal_mask (1 point): the public cases; nbgrader's score is the course grader's.
    check.causal_mask(causal_mask, assert_passed=True)
    ### BEGIN HIDDEN TESTS
    # The course's judge (nbgrader_hook.py) replaces this cell's output with its verdict.
    raise RuntimeError("ch2.causal_mask: the course's judge did not run; see nbgrader_config.py")
    ### END HIDDEN TESTS
    """
    unit = "point" if points == 1 else "points"
    message = f"{exercise_id}: the course's judge did not run; see nbgrader_config.py"
    return "\n".join(
        [
            f"# Tests of {exercise_id} ({points} {unit}): the public cases; nbgrader's score is the course grader's.",
            f"check.{func_name}({func_name}, assert_passed=True)",
            "### BEGIN HIDDEN TESTS",
            "# The course's judge (nbgrader_hook.py) replaces this cell's output with its verdict.",
            f"raise RuntimeError({message!r})",
            "### END HIDDEN TESTS",
        ]
    )


def _meta(
    grade_id: str, *, grade: bool = False, solution: bool = False, locked: bool = False, points: int | None = None
) -> dict:
    meta = {
        "grade": grade,
        "grade_id": grade_id,
        "locked": locked,
        "schema_version": 3,
        "solution": solution,
        "task": False,
    }
    if points is not None:
        meta["points"] = points
    return meta


def _nbgrader_markers(source: str) -> str:
    """``# BEGIN SOLUTION`` -> ``### BEGIN SOLUTION`` (whole lines, indentation kept); the same for END."""
    out = []
    for line in source.split("\n"):
        stripped = line.strip()
        if stripped in (BEGIN, END):
            line = line[: len(line) - len(line.lstrip())] + "##" + stripped
        out.append(line)
    return "\n".join(out)


def nbgrader_notebook(solution: nbformat.NotebookNode, rel: str) -> nbformat.NotebookNode:
    """A stamped solution notebook as an nbgrader source notebook (see the module docstring).

    Args:
        solution: the solution notebook; it is not modified.
        rel: its path, for error messages.

    Returns:
        The nbgrader notebook. Raises :class:`BuildError` when an exercise has no check cell after it.
    """
    nb = copy.deepcopy(solution)
    exercises: dict[str, tuple[str, int]] = {}  # function name -> (exercise id, points)
    tested: set[str] = set()
    for index, cell in enumerate(nb.cells):
        meta = exercise_meta(cell)
        kept = {k: v for k, v in cell.get("metadata", {}).items() if k in ("tags", "course")}
        if meta is not None:
            exercise_id, points = meta["exercise"], meta["points"]
            exercises[exercise_id.split(".", 1)[1]] = (exercise_id, points)
            cell.source = _nbgrader_markers(cell.source)
            kept["nbgrader"] = _meta(_grade_id(exercise_id), solution=True)
        elif cell.cell_type == "code" and (match := _CHECK_CELL.fullmatch(cell.source)):
            name = match[1]
            if name not in exercises or match[2] != name:
                raise BuildError(
                    rel,
                    index,
                    f"check cell {cell.source.strip()!r} does not follow the exercise cell that defines {name}",
                )
            exercise_id, points = exercises[name]
            cell.source = nbgrader_test_source(name, exercise_id, points)
            kept["nbgrader"] = _meta(f"{_grade_id(exercise_id)}-tests", grade=True, locked=True, points=points)
            tested.add(name)
        elif cell.cell_type == "markdown" or SETUP_TAG in cell.get("metadata", {}).get("tags", []):
            kept["nbgrader"] = _meta(f"cell-{cell.get('id', index)}", locked=True)
        cell.metadata = nbformat.from_dict(kept)
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    untested = [name for name in exercises if name not in tested]  # in course order
    if untested:
        raise BuildError(
            rel,
            None,
            f"exercise {exercises[untested[0]][0]!r} has no check cell "
            f"`check.{untested[0]}({untested[0]})`, so nbgrader could not grade it",
        )
    nb.metadata = nbformat.from_dict({"kernelspec": dict(KERNELSPEC), "language_info": {"name": "python"}})
    return nb


def _secret(out_dir: Path, seed: int | None) -> bool:
    """Write ``out_dir/grading_secret.txt`` when it is missing (``seed``, or one drawn at random) and return
    True; keep an existing one (False). A ``seed`` other than the one it holds is an error: the hidden cases
    of students already graded depend on it."""
    path = out_dir / SECRET_NAME
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise BuildError(path, None, f"--seed must be a non-negative integer, got {seed!r}")
    if not path.exists() and not path.is_symlink():
        write_secret(path, secrets.randbelow(2**63) if seed is None else seed)
        return True
    try:
        kept = read_secret(path)
    except SecretError as exc:
        raise BuildError(path, None, f"{exc}; fix or remove it, then export again") from None
    if seed is not None and seed != kept:
        raise BuildError(
            path,
            None,
            "already holds this course's seed, and students' hidden cases depend on it: "
            "export without --seed to keep it, or move the file away to set a new one",
        )
    return False


def _fingerprints(out_dir: Path) -> dict[str, str]:
    return read_string_map(out_dir / FINGERPRINTS_NAME, "each assignment to a fingerprint")


def _check_same_secret(out_dir: Path, stems: list[str], seed: int | None, force: bool) -> None:
    """Refuse (unless ``force``) to export an assignment with another secret than the one it was exported
    with: students already graded would get other hidden cases when graded again."""
    records = _fingerprints(out_dir)
    recorded = {stem: records[stem] for stem in stems if stem in records}
    path = out_dir / SECRET_NAME
    if not recorded or force:
        return
    if path.exists() or path.is_symlink():
        try:
            now = fingerprint(read_secret(path))
        except SecretError:
            return  # _secret says what is wrong with it
    elif seed is not None:
        now = fingerprint(seed)
    else:
        now = None  # a secret drawn at random: another one
    changed = {stem: old for stem, old in recorded.items() if old != now}
    if changed:
        which = ", ".join(f"{stem} (secret fingerprint {old})" for stem, old in changed.items())
        now_text = "a newly drawn secret" if now is None else f"the secret with fingerprint {now}"
        raise BuildError(
            path,
            None,
            f"{which} {'was' if len(changed) == 1 else 'were'} exported with another secret than this export "
            f"would use ({now_text}): students already graded would get other hidden cases. Put that secret "
            f"back in {path}, or pass --force to export with this secret (then generate and autograde "
            f"{'it' if len(changed) == 1 else 'them'} again, every student)",
        )


def _record_fingerprints(out_dir: Path, stems: list[str]) -> None:
    records = _fingerprints(out_dir)
    records.update(dict.fromkeys(stems, fingerprint(read_secret(out_dir / SECRET_NAME))))
    _write_private(out_dir / FINGERPRINTS_NAME, json.dumps(records, indent=1, sort_keys=True) + "\n")


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, mode 0600 (the instructor's alone): a fingerprint of a short ``--seed``
    could be tried seed by seed, and the judge's digests say where the course is installed."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def _record_judge_code(out_dir: Path, python: str) -> None:
    """Write ``judge_code.json`` (0600): the course package's folder and its files' digests as ``python``
    imports it, which autograde compares before it grades."""
    path = out_dir / JUDGE_CODE_NAME
    try:
        done = subprocess.run([python, "-I", "-c", BOOTSTRAP, "digest"], capture_output=True, timeout=300)
    except OSError as exc:
        raise BuildError(path, None, f"the judge's Python {python} cannot run: {exc}") from None
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip()[-2000:]
        raise BuildError(path, None, f"the judge's Python {python} could not list the course package: {reason}")
    _write_private(path, json.dumps(json.loads(done.stdout), indent=1, sort_keys=True) + "\n")


def _refuse_edits(out_dir: Path, config_path: Path | None, texts: Mapping[Path, str]) -> None:
    """Raise :class:`BuildError` naming both an edited ``nbgrader_config.py`` and edited source notebooks."""
    reasons = []
    if config_path is not None:
        reasons.append("nbgrader_config.py differs from the configuration this export writes (edited, or from an "
                       "older export: keep your own settings in ~/.jupyter/nbgrader_config.py, which no export writes)")
    try:
        edited_sources(out_dir, texts, False)
    except BuildError as exc:
        if Path(exc.path).name == SOURCE_DIGESTS_NAME:  # the record itself is damaged: name it alone
            raise
        reasons.append(exc.message)
    if reasons:
        more = "" if len(reasons) > 1 else f"; pass --force to replace it (first moved under {out_dir / EDITED_DIR})"
        raise BuildError(out_dir, None, "; ".join(reasons) + (more if config_path else ""))


def export_nbgrader(
    out_dir: str | Path,
    root: str | Path = REPO_ROOT,
    *,
    seed: int | None = None,
    chapters: Mapping[str, object] | None = None,
    force: bool = False,
    python: str = sys.executable,
) -> list[Path]:
    """Write the nbgrader course directory ``out_dir`` and return the files written.

    Args:
        out_dir: the course directory (created if needed, mode 0700; other files in it are left alone).
        root: the course repository. Default: :data:`utils.paths.REPO_ROOT`.
        seed: the secret seed, when ``out_dir`` has none yet. Default: drawn at random.
        chapters: only these notebook stems (e.g. ``{"01_queries_keys_values"}``). Default: every chapter.
        force: replace an ``nbgrader_config.py`` that differs from the export's and source notebooks
            edited since the last export (moving each to ``DIR/edited_source/`` first), and export assignments
            recorded with another secret. Default: raise :class:`BuildError` and leave them.
        python: the Python the judge runs (``COURSE_PYTHON``). Default: this one.

    Returns the source notebooks, ``nbgrader_config.py``, ``nbgrader_hook.py``, when it was created,
    ``grading_secret.txt``, and the edited source notebooks moved under ``force`` (``DIR/edited_source/...``)
    (``secret_fingerprints.json``, ``source_digests.json`` and ``judge_code.json`` are written too).
    """
    root, out_dir = Path(root), Path(out_dir)
    config = load_config(root / "pyproject.toml")
    config_path, config_text = out_dir / "nbgrader_config.py", nbgrader_config(python)
    config_edited = config_path.exists() and config_path.read_text(encoding="utf-8") != config_text
    solutions = [
        path
        for path in sorted((root / "solutions").glob(NOTEBOOK_GLOB))
        if chapters is None or path.stem in chapters
    ]
    texts = {}
    for path in solutions:
        rel = path.relative_to(root).as_posix()
        solution = read_source_notebook(path, rel)
        stamp(solution, config, chapter_path(rel))  # badges open the chapter, as in chapters/
        nb = nbgrader_notebook(solution, rel)
        nbformat.validate(nb)
        texts[out_dir / "source" / path.stem / path.name] = notebook_text(nb)
    if not force:  # every edit named at once (walkthrough W22), before anything is written
        _refuse_edits(out_dir, config_path if config_edited else None, texts)
    if not out_dir.exists():  # private from the start: nbgrader writes grades and feedback readable by all
        out_dir.mkdir(parents=True, mode=0o700)
    _check_same_secret(out_dir, [path.stem for path in solutions], seed, force)
    created = _secret(out_dir, seed)  # before anything is written: a conflicting --seed changes nothing
    kept = edited_sources(out_dir, texts, force) if force else []
    if force and config_edited:  # a late penalty set there must not vanish with the replaced file
        kept.append(keep_aside(out_dir, config_path))
    for target, text in texts.items():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    written = list(texts)
    record_source_digests(out_dir, texts)
    config_path.write_text(config_text, encoding="utf-8")
    hook_path = out_dir / HOOK_NAME
    hook_path.write_text(_HOOK_SOURCE.read_text(encoding="utf-8"), encoding="utf-8")
    _record_fingerprints(out_dir, [path.stem for path in solutions])
    _record_judge_code(out_dir, python)
    return [*written, config_path, hook_path, *([out_dir / SECRET_NAME] if created else []), *kept]
