"""The command line of the builder: ``python -m utils.build [--check | --execute PATH ... | --nbgrader DIR [--seed N]]
[--force]``.

Every problem is a :class:`BuildError` naming the file, the cell and what to fix; it exits with 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from utils.builder.course import build, outdated
from utils.builder.execution import execute
from utils.notebook_files import BuildError
from utils.paths import REPO_ROOT

__all__ = ["main"]

DESCRIPTION = "Build the student notebooks: solutions/NN_*.ipynb -> chapters/NN_*.ipynb."


def _report_translations(root: Path) -> int:
    """Print every English cell and message without a current translation; return how many."""
    from utils.i18n.cli import report  # Babel: only where catalogues are built

    return report(root)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m utils.build", description=DESCRIPTION)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--check", action="store_true", help="exit 1 if solutions' stamps, chapters/ or a translation are out of date"
    )
    mode.add_argument(
        "--execute", nargs="+", metavar="PATH", help="execute these solution notebooks in place, then build"
    )
    mode.add_argument(
        "--nbgrader", metavar="DIR", help="export the course as an nbgrader course directory in DIR (source/...)"
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help=("overwrite chapter notebooks even if edited or not generated; with --nbgrader: overwrite "
              "nbgrader_config.py and edited source/ notebooks (moved to DIR/edited_source/), and record assignments "
              "exported earlier with another secret under this one "
              "(generate and autograde them again)"),
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help=(
            "with --nbgrader: the course's secret seed of the hidden cases, when DIR has none yet (default: drawn at "
            "random); it is stored in DIR/grading_secret.txt only"
        ),
    )
    parser.add_argument("--root", default=str(REPO_ROOT), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    root = Path(args.root)
    if args.seed is not None and not args.nbgrader:
        parser.error("--seed is the secret of an nbgrader export: use it with --nbgrader DIR")
    try:
        if args.check:
            from utils.i18n.readme import README_TARGET, readme_status

            stale = outdated(root) + ([root / README_TARGET] if readme_status(root)[1] else [])
            for path in stale:
                print(f"out of date: {path.relative_to(root)}")
            untranslated = _report_translations(root)
            if stale:
                print("run `python -m utils.build` (make chapters) and commit the result", file=sys.stderr)
            if untranslated:
                print(
                    "translate these in i18n/zh_CN/ and utils/i18n/locale/zh_CN/, or execute what is named "
                    "(see CONTRIBUTING, Translations)",
                    file=sys.stderr,
                )
            if stale or untranslated:
                return 1
            print("chapters/, the solutions' stamps and the translations are up to date")
            return 0
        if args.nbgrader:
            from utils.builder.nbgrader import SECRET_NAME, export_nbgrader

            written = export_nbgrader(args.nbgrader, root, seed=args.seed, force=args.force)
            from utils.builder.nbgrader_sources import EDITED_DIR

            kept = [path for path in written if EDITED_DIR in path.parts]
            assignments = sum(path.suffix == ".ipynb" for path in written if path not in kept)
            for path in kept:
                print(f"moved your edited {'configuration' if path.suffix == '.py' else 'source notebook'} to {path} "
                      "(--force replaced it)")
            secret = next((path for path in written if path.name == SECRET_NAME), None)
            print(f"wrote {assignments} assignments, nbgrader_config.py and nbgrader_hook.py in {args.nbgrader}")
            print(
                f"a new grading secret is in {secret} (mode 0600): keep it private and keep a copy"
                if secret
                else f"kept the grading secret in {Path(args.nbgrader) / SECRET_NAME}"
            )
            if Path(args.nbgrader).stat().st_mode & 0o077:  # nbgrader's gradebook.db and feedback/ would be too
                print(f"{args.nbgrader} is open to other users of this machine: chmod 700 {args.nbgrader}",
                      file=sys.stderr)
            return 0
        if args.execute:
            execute(args.execute, root)
        from utils.i18n.readme import write_readme

        changed = build(root, force=args.force)
        changed = write_readme(root) or changed
        if not changed:
            print("chapters/ is up to date")
        _report_translations(root)  # a warning here; --check fails on it
        return 0
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        if type(exc).__name__ == "CellExecutionError":
            print(f"error: executing failed:\n{exc}", file=sys.stderr)
            return 1
        raise
