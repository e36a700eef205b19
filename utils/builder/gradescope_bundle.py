"""``python -m utils.grade gradescope-bundle OUT.zip`` writes a Gradescope autograder zip.

The zip holds, at its root (as Gradescope's autograder specification asks):

- ``setup.sh``: run once, as root, when Gradescope builds the image. It makes a venv in
  ``$AUTOGRADER_ROOT/venv`` and installs the course's pinned dependencies (``constraints.txt``) with the
  CPU build of torch, chosen as ``make`` and Binder choose it (``utils/prereqs.py torch-index auto``).
  The course package itself is not installed into the venv: ``run_autograder`` puts ``source/course`` on
  ``PYTHONPATH``. (Installed, the package's folder would be the venv's ``site-packages``, which the
  sandbox does not bring back under its private ``/tmp``, ``/home`` and ``/root``: torch would not import
  there, and the sandbox would fall back to a level without its private mounts, IPC and network.)
- ``run_autograder``: run for every submission. It grades the notebooks in ``$AUTOGRADER_ROOT/submission``
  with the course grader (the same sandbox, cases and judging as ``python -m utils.grade``) and writes
  ``$AUTOGRADER_ROOT/results/results.json`` (:mod:`utils.grading.gradescope`: the student's code runs as an
  unprivileged uid, or grading is refused). ``AUTOGRADER_ROOT`` moves ``/autograder`` and
  ``AUTOGRADER_PYTHON`` the interpreter (default ``$AUTOGRADER_ROOT/venv/bin/python``); the tests set
  both. Run before ``setup.sh`` (no venv), it says in one line that the autograder's environment is
  missing, names the interpreter it looked for, and exits 1.
- ``gradescope.json``: the grading settings (seed, timeout, budget, memory, hidden tests' visibility, language,
  chapters, whether weak isolation is accepted), drawn or given when the bundle is made. ``setup.sh``, and
  the runner again before each submission, make it readable by root only: the student's code, run as
  another uid, cannot read the seed.
- ``course/``: the course package, its pins, and ``course/solutions/``: the chapter notebooks (only the
  bundle's chapters, with ``--chapters``) with their solutions stripped and outputs cleared (the grader
  reads only the exercise ids and points from them), and ``exercise_chapters.json``: every exercise id of
  the course and its chapter, no code, so that a notebook of a chapter the bundle does not carry (chapter 7
  uploaded to the chapter 2 assignment) is named as such.

What ``run_autograder`` runs, and the ``results.json`` it writes, are :mod:`utils.grading.gradescope`'s.

The zip holds the seed, so it is written mode 0600, and an existing zip (the seed students were graded
with) is never replaced unless asked (``--overwrite``). A replaced zip whose seed differs from the new one
is kept beside it (``<name>.previous.zip``, mode 0600) with a warning: a regrade with the new zip draws other
hidden cases, and the kept zip is where the old seed can still be read. A seed drawn now is not printed;
``bundle_main`` says where it is stored.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import stat
import subprocess
import sys
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from utils.builder.course import render
from utils.grading.course import (
    EXERCISE_CHAPTERS,
    ChapterError,
    chapter_of,
    chapters_text,
    course_chapters,
    exercise_chapters_text,
    parse_chapters,
)
from utils.grading.course_secret import SecretError, read_secret
from utils.grading.gradescope import CONFIG_FILE, DEFAULT_BUDGET, HIDDEN_VISIBILITIES, check_budget, check_visibility
from utils.i18n.messages import LANGUAGES, normalize_language
from utils.paths import REPO_ROOT

__all__ = ["RUN_AUTOGRADER", "SETUP_SH", "bundle_main", "write_gradescope_bundle"]

_COURSE_FILES = ("pyproject.toml", "README.md", "constraints.txt", "requirements.txt")

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image (made by
# `python -m utils.grade gradescope-bundle`). AUTOGRADER_ROOT moves /autograder (tests).
set -euo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
COURSE="$ROOT/source/course"
if ! python3 -c "import ensurepip, venv" 2>/dev/null; then  # Ubuntu ships venv separately
    apt-get update && apt-get install -y --no-install-recommends python3 python3-venv python3-pip
fi
python3 -m venv "$ROOT/venv"
PY="$ROOT/venv/bin/python"
# torch, CPU build: PyTorch's CPU index unless the configured index already offers the CPU wheel
# (utils/prereqs.py, the rule `make TORCH_INDEX=auto` and binder/postBuild follow).
"$PY" -m pip install --no-cache-dir $("$PY" "$COURSE/utils/prereqs.py" torch-index auto) \\
    -c "$COURSE/constraints.txt" -r "$COURSE/requirements.txt"
# The course package is not installed: run_autograder puts $COURSE on PYTHONPATH (see the bundle's docs).
# The seed is root's alone; the student's code runs as an unprivileged uid.
chown root:root "$ROOT/source/gradescope.json"
chmod 600 "$ROOT/source/gradescope.json"
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for every submission: grades $ROOT/submission into $ROOT/results/results.json.
# AUTOGRADER_ROOT moves /autograder and AUTOGRADER_PYTHON the interpreter (tests). Arguments are passed on
# (--allow-weak-isolation).
set -uo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
PY="${AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}"
if ! command -v "$PY" >/dev/null 2>&1; then  # one clear line, not bash's "No such file or directory"
    if [ -n "${AUTOGRADER_PYTHON:-}" ]; then
        echo "run_autograder: AUTOGRADER_PYTHON=$PY: that Python was not found" >&2
    else
        echo "run_autograder: the autograder's environment is missing: run setup.sh first" \\
             "($PY does not exist; setup.sh makes $ROOT/venv)" >&2
    fi
    exit 1
fi
export PYTHONPATH="$ROOT/source/course${PYTHONPATH:+:$PYTHONPATH}"
cd "$ROOT"
exec "$PY" -m utils.grading.gradescope --root "$ROOT" "$@"
"""


def _add(archive: zipfile.ZipFile, name: str, data: str | bytes, executable: bool = False) -> None:
    info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))  # fixed: the same course gives the same zip
    info.external_attr = ((0o755 if executable else 0o644) | stat.S_IFREG) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(info, data)


def bundle_chapters(chapters: str | Iterable[int] | None, root: Path) -> list[int] | None:
    """The chapters a bundle grades, sorted, or None for every chapter: ``"2"``, ``"2-3"``, ``"1,3"`` (as
    ``--chapters``) or chapter numbers; each must have exercises in ``root/solutions``, else
    :class:`~utils.grading.course.ChapterError` naming the course's chapters."""
    if chapters is None:
        return None
    available = course_chapters(root)
    if isinstance(chapters, str):
        return sorted(parse_chapters(chapters, available))
    chosen = list(chapters)
    wrong = [n for n in chosen if type(n) is not int or n not in available]
    if wrong or not chosen:
        problem = f"not in this course: {wrong}" if wrong else "no chapter given"
        raise ChapterError(f"chapters={chosen!r}: {problem}; its chapters are {chapters_text(available)}")
    return sorted(set(chosen))


def write_gradescope_bundle(
    out_zip: str | Path,
    *,
    root: str | Path = REPO_ROOT,
    seed: int | None = None,
    hidden_visibility: str = "after_published",
    timeout: float = 30.0,
    budget: float | None = DEFAULT_BUDGET,
    memory_mb: int = 2048,
    lang: str = "en",
    chapters: str | Iterable[int] | None = None,
    allow_weak_isolation: bool = False,
    overwrite: bool = False,
) -> Path:
    """Write the autograder zip (see the module docstring) and return its path.

    Args:
        out_zip: where to write it.
        root: the course repository. Default: :data:`utils.paths.REPO_ROOT`.
        seed: the seed of the random cases; keep it secret. Default: ``None`` (drawn now, stored in the zip).
        hidden_visibility: when students see the tests that carry points: ``"after_published"`` (default),
            ``"after_due_date"`` or ``"visible"`` (at once, hidden cases' verdicts included).
        timeout: CPU seconds per exercise (with a wall-clock backstop). Default: ``30.0``.
        budget: wall-clock seconds to grade one submission, all its exercises together; once spent, the
            exercises left are ``timeout`` rows and ``results.json`` is still written. Keep it below
            Gradescope's autograder timeout (10 minutes by default) with a few minutes to spare. ``None``: no
            budget. Default: :data:`~utils.grading.gradescope.DEFAULT_BUDGET` (420).
        memory_mb: MiB of RAM per student: all of a student's processes together. Default: ``2048``.
        lang: the language of the feedback students read: ``"en"`` (default) or ``"zh"``.
        chapters: grade only these chapters, as one assignment out of their own points (``"2"``, ``"2-3"``
            or numbers; :func:`bundle_chapters`). Default: ``None``, every chapter.
        allow_weak_isolation: grade even where the sandbox cannot run the student's code as an unprivileged
            uid (it could then read the seed and rewrite results.json). Default: ``False``: refuse.
        overwrite: replace an existing ``out_zip`` (and the seed it holds). Default: ``False``: raise
            :class:`FileExistsError` before anything is written.

    The zip is written mode 0600 (it holds the seed), whole or not at all.
    """
    check_visibility(hidden_visibility)
    budget = check_budget(budget)
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise TypeError(f"seed must be an integer or None, got {type(seed).__name__}")
    if not isinstance(allow_weak_isolation, bool):
        raise TypeError(f"allow_weak_isolation must be True or False, got {allow_weak_isolation!r}")
    root, out_zip = Path(root), Path(out_zip)
    if not overwrite and (out_zip.exists() or out_zip.is_symlink()):
        raise FileExistsError(_exists(out_zip))
    chosen = bundle_chapters(chapters, root)
    config = {
        "seed": secrets.randbelow(2**31) if seed is None else seed,
        "timeout": float(timeout),
        "budget": budget,
        "memory_mb": int(memory_mb),
        "hidden_visibility": hidden_visibility,
        "course": "course",
        "lang": normalize_language(lang),
        "chapters": chosen,
        "allow_weak_isolation": allow_weak_isolation,
    }
    rendered = {path.name: text for path, text in render(root).items() if path.parent == root / "chapters"}
    notebooks = {name: text for name, text in rendered.items() if chosen is None or chapter_of(name) in chosen}
    out_zip.parent.mkdir(parents=True, exist_ok=True)
    # written new (O_EXCL: never over a zip that appeared meanwhile) or, with overwrite, beside it and moved over
    target = out_zip.with_name(f".{out_zip.name}.{secrets.token_hex(4)}.partial") if overwrite else out_zip
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except FileExistsError:
        raise FileExistsError(_exists(out_zip)) from None
    done = False
    try:
        os.fchmod(fd, 0o600)  # whatever the umask: the zip holds the seed
        with os.fdopen(fd, "wb") as handle:
            _write_zip(handle, root, config, notebooks)
        if overwrite:
            _keep_if_seed_changes(out_zip, config["seed"])
            os.replace(target, out_zip)
        done = True
    finally:
        if not done:
            target.unlink(missing_ok=True)  # no partial zip is left behind
    return out_zip


def _seed_in(path: Path) -> int | None:
    """The seed in the bundle ``path``'s ``gradescope.json``, or None when it is not a readable bundle."""
    try:
        with zipfile.ZipFile(path) as archive:
            seed = json.loads(archive.read(CONFIG_FILE))["seed"]
    except (OSError, KeyError, ValueError, TypeError, zipfile.BadZipFile):
        return None
    return seed if isinstance(seed, int) else None


def _keep_if_seed_changes(out_zip: Path, seed: int) -> None:
    """Before ``out_zip`` is replaced: when it holds another seed than ``seed``, keep it as
    ``<name>.previous.zip`` (``-2``, ``-3``... when taken; never over a file) and warn on stderr."""
    old = _seed_in(out_zip) if out_zip.is_file() and not out_zip.is_symlink() else None
    if old is None or old == seed:
        return
    for number in range(1, 1000):
        kept = out_zip.with_name(f"{out_zip.stem}.previous{'' if number == 1 else f'-{number}'}{out_zip.suffix}")
        try:
            os.link(out_zip, kept)  # the same file under a second name: its mode (0600) and content
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(f"{out_zip}: 999 earlier zips are kept beside it; remove the ones you do not need")
    print(f"gradescope-bundle: warning: {out_zip} held another seed, so the hidden cases change: every submission "
          f"graded or regraded with the new zip (Gradescope's \"Regrade all\" too) gets other hidden cases than "
          f"before. The replaced zip is kept as {kept} (mode 0600): unzip -p {kept} gradescope.json shows its seed; "
          f"to grade with it again, write that number into a file of its own (chmod 600) and build again with "
          f"--seed-file FILE --overwrite; otherwise delete {kept}", file=sys.stderr)


def _exists(out_zip: Path) -> str:
    return (f"{out_zip} exists, and it holds the seed its students' hidden cases were drawn with: pass --overwrite "
            f"to replace it (with the same --seed-file its seed is kept; with another one the old zip is kept as "
            f"{out_zip.stem}.previous.zip), or choose another name")


def _write_zip(handle, root: Path, config: dict, notebooks: dict[str, str]) -> None:
    with zipfile.ZipFile(handle, "w") as archive:
        _add(archive, "setup.sh", SETUP_SH, executable=True)
        _add(archive, "run_autograder", RUN_AUTOGRADER, executable=True)
        _add(archive, CONFIG_FILE, json.dumps(config, indent=1) + "\n")
        for name in _COURSE_FILES:
            _add(archive, f"course/{name}", (root / name).read_bytes())
        for path in sorted((root / "utils").rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                _add(archive, f"course/{path.relative_to(root).as_posix()}", path.read_bytes())
        for name, text in sorted(notebooks.items()):
            _add(archive, f"course/solutions/{name}", text)
        # every exercise's chapter, the chapters not carried included: ids and numbers, no code
        _add(archive, f"course/solutions/{EXERCISE_CHAPTERS}", exercise_chapters_text(root))


def bundle_main(argv: Sequence[str]) -> int:
    """``python -m utils.grade gradescope-bundle OUT.zip [--seed N | --seed-file FILE] [--hidden-visibility V]
    [--chapters 2] ...``."""
    parser = argparse.ArgumentParser(
        prog="python -m utils.grade gradescope-bundle", description="Write a Gradescope autograder zip for the course."
    )
    parser.add_argument("out", type=Path, help="the zip to write, e.g. autograder.zip")
    seeds = parser.add_mutually_exclusive_group()
    seeds.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed of the random cases, stored in the zip (default: drawn now; keep it secret)",
    )
    seeds.add_argument("--seed-file", type=Path, default=None, metavar="FILE", help=(
        "read the seed from FILE, mode 0600, as python -m utils.grade --seed-file does: one non-negative integer "
        "on a line of its own, '#' comment lines and blank lines skipped; unlike --seed it is not on the command "
        "line, which any process on this machine can read (regrade with the seed the students were graded with)"))
    parser.add_argument(
        "--hidden-visibility",
        choices=HIDDEN_VISIBILITIES,
        default="after_published",
        help="when students see their points and the hidden cases' feedback (default: "
        "after_published; the public cases' status is shown at once)",
    )
    parser.add_argument(
        "--chapters",
        default=None,
        metavar="LIST",
        help=(
            "grade only these chapters, as one assignment out of their own points: a number, a range or a list "
            "(2, 2-3, 1,3,5-6); other chapters' exercises are not graded or shown (default: every chapter)"
        ),
    )
    parser.add_argument("--timeout", type=float, default=30.0, help="CPU seconds per exercise (default: 30)")
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET, metavar="SECONDS", help=(
        f"wall-clock seconds to grade one submission, all its exercises together (default: {DEFAULT_BUDGET:g}); once "
        "spent, the exercises left score 0 as timeouts and results.json is still written. Set Gradescope's "
        "autograder timeout at least 3 minutes above it (its default, 10 minutes, fits the default budget)"))
    parser.add_argument("--memory", type=int, default=2048, help=(
        "MiB of RAM per student: all of a student's processes together, above what its worker holds once torch is "
        "imported (default: 2048)"))
    parser.add_argument("--overwrite", action="store_true", help=(
        "replace OUT if it exists (it holds the seed the students were graded with: pass it again in a "
        "--seed-file); when the seed changes, the old zip is kept as NAME.previous.zip, with a warning; without "
        "--overwrite an existing OUT is refused"))
    parser.add_argument(
        "--lang",
        choices=tuple(LANGUAGES),
        default="en",
        help="language of the feedback students read: en (default) or zh (简体中文)",
    )
    parser.add_argument(
        "--allow-weak-isolation",
        action="store_true",
        help=(
            "grade even where the sandbox cannot run the student's code as an unprivileged uid (it could then "
            "read the seed and earlier results and rewrite results.json); default: refuse to grade there"
        ),
    )
    parser.add_argument("--course", type=Path, default=REPO_ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(list(argv))
    seed = args.seed
    if args.seed_file is not None:
        try:
            seed = read_secret(args.seed_file)
        except SecretError as exc:
            print(f"gradescope-bundle: --seed-file: {exc}", file=sys.stderr)
            return 2
    try:
        path = write_gradescope_bundle(
            args.out,
            root=args.course,
            seed=seed,
            hidden_visibility=args.hidden_visibility,
            timeout=args.timeout,
            budget=args.budget,
            memory_mb=args.memory,
            lang=args.lang,
            chapters=args.chapters,
            allow_weak_isolation=args.allow_weak_isolation,
            overwrite=args.overwrite,
        )
    except (ChapterError, FileExistsError, ValueError) as exc:
        print(f"gradescope-bundle: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {path}: upload it as the autograder of a Gradescope programming assignment")
    if seed is None:  # not printed: a console or a log is no place for it; the zip is 0600
        print(f"gradescope-bundle: the seed was drawn now and is stored only in {path}'s gradescope.json (unzip -p "
              f"{path} gradescope.json shows it); to rebuild with it (a regrade must draw the same hidden cases), "
              f"write it into a file of its own (chmod 600) and pass --seed-file FILE")
    for warning in checkout_warnings(path, args.course):
        print(f"gradescope-bundle: warning: {warning}", file=sys.stderr)
    return 0


def checkout_warnings(out_zip: str | Path, root: str | Path = REPO_ROOT) -> list[str]:
    """What an instructor should know about where the zip was written and what it packed (W6, issue 35).

    - ``out_zip`` inside the course checkout: it holds the seed, and a checkout's files get committed and
      shared by mistake.
    - uncommitted changes, in a git checkout, to what the zip packs (``utils/``, ``solutions/`` and the
      course files): the zip packs the files as they are on disk, so the autograder is not the course's
      committed code. Nothing is said where git or the repository is not there.
    """
    root, out_zip = Path(root).resolve(), Path(out_zip).resolve()
    warnings = []
    if out_zip.is_relative_to(root):
        warnings.append(f"{out_zip} is inside the course checkout {root}, and it holds the grading seed: move it "
                        f"outside (e.g. ~/grading/), where it cannot be committed or shared with the course")
    try:
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all", "--", "utils", "solutions",
                                 *_COURSE_FILES], cwd=root, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return warnings
    changed = sorted({line[3:].split(" -> ")[-1] for line in status.stdout.splitlines()
                      if len(line) > 3 and "__pycache__" not in line}) if status.returncode == 0 else []
    if changed:
        shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
        warnings.append(f"the zip packs the checkout's files as they are on disk, and {len(changed)} of them differ "
                        f"from its last commit ({shown}): commit or undo those changes and build again, unless "
                        f"you meant to grade with them")
    return warnings
