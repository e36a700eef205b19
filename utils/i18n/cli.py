"""The command line of the translations: ``python -m utils.i18n update [STEM ...] | check``.

``update`` brings every catalogue (or the named ones) in step with its English notebook, and (with no
STEM) ``i18n/zh_CN/README.po`` with ``README.md`` (:mod:`utils.i18n.readme`) and every message catalogue
of ``utils/i18n/locale/`` with the source (:mod:`utils.i18n.message_catalog`); a notebook
without a catalogue gets one only when named (``python -m utils.i18n update 02_scaled_dot_product_attention``).
``check`` lists the cells and messages that lack a current translation and exits 1 if there is one.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from utils.files import write_if_changed
from utils.i18n.catalog import (
    catalogue_path,
    catalogue_text,
    markdown_entries,
    new_catalogue,
    read_catalogue,
    update_catalogue,
)
from utils.i18n.message_catalog import message_status, update_message_catalogues
from utils.i18n.messages import LOCALE_DIR
from utils.i18n.notebooks import translation_status
from utils.i18n.readme import readme_status, update_readme_catalogue
from utils.notebook_files import NOTEBOOK_GLOB, BuildError, read_source_notebook
from utils.paths import REPO_ROOT

__all__ = ["main", "report", "update"]


def update(root: str | Path = REPO_ROOT, stems: Sequence[str] = (), log=print) -> list[Path]:
    """Update the catalogues of ``stems`` (default: every notebook that has one); return those written.

    A file is written only when its text changes, so an update with nothing to do writes nothing.
    """
    root = Path(root)
    solutions = {p.stem: p for p in sorted((root / "solutions").glob(NOTEBOOK_GLOB))}
    unknown = [stem for stem in stems if stem not in solutions]
    if unknown:
        raise BuildError(f"solutions/{unknown[0]}.ipynb", None, f"no such notebook; there are {sorted(solutions)}")
    chosen = list(stems) or [stem for stem in solutions if catalogue_path(root, stem).is_file()]
    written = []
    for stem in chosen:
        rel = f"solutions/{stem}.ipynb"
        po = catalogue_path(root, stem)
        old = read_catalogue(po) if po.is_file() else new_catalogue(stem)
        text = catalogue_text(update_catalogue(old, markdown_entries(read_source_notebook(solutions[stem], rel))))
        if write_if_changed(po, text):
            written.append(po)
            log(f"wrote {po.relative_to(root)}")
    return written


def report(root: str | Path = REPO_ROOT, log=print) -> int:
    """Print every English cell and message without a current translation (and the notebooks with no
    catalogue yet); return how many there are. The messages are the package's own: they are checked
    only when ``root`` is the checkout this package lives in (not a scratch course in a test)."""
    root = Path(root)
    untranslated, without = translation_status(root)
    untranslated += readme_status(root)[0]
    for problem in untranslated:
        log(f"untranslated: {problem}")
    if without:
        log(f"not yet translated: {' '.join(stem[:2] for stem in without)} (no catalogue in i18n/zh_CN/)")
    if (root / "utils" / "i18n").resolve() != LOCALE_DIR.parent:
        return len(untranslated)
    messages, unreadable = message_status()
    for problem in messages:
        log(f"untranslated message: {problem}")
    for problem in unreadable:
        log(f"unreadable tr() call: {problem}")
    return len(untranslated) + len(messages) + len(unreadable)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m utils.i18n", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("update", help="update the catalogues from the English notebooks")
    up.add_argument("stems", nargs="*", metavar="STEM", help="notebook stems (default: those with a catalogue)")
    commands.add_parser("check", help="exit 1 if an English cell lacks a current translation")
    parser.add_argument("--root", default=str(REPO_ROOT), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    root = Path(args.root)
    try:
        if args.command == "update":
            written = update(root, args.stems)
            if not args.stems:  # the README and the message catalogues of utils/ follow their own sources
                written += [root / "i18n/zh_CN/README.po"] if update_readme_catalogue(root) else []
                written += update_message_catalogues()
            if not written:
                print("the catalogues are up to date")
            return 0
        return 1 if report(root) else 0
    except BuildError as exc:
        print(f"error: {exc}")
        return 2
