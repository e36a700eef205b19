"""The ``source/`` notebooks of an nbgrader export, told apart from an instructor's edits.

``source/`` is generated from ``solutions/`` by ``python -m utils.build --nbgrader DIR``
(:mod:`utils.builder.nbgrader`). Each export records the digest of every source notebook it writes in
``DIR/source_digests.json``; the next export replaces a notebook only when it is still as an export left it.
One edited since (or not written by an export) is refused, naming it, unless ``--force``, which first moves
it to ``DIR/edited_source/<assignment>/``: nothing an instructor wrote is lost without asking. Never beside the
notebook: ``nbgrader generate_assignment`` releases every other file of ``source/<assignment>/`` to the
students, and the edited notebook holds the solutions (walkthrough W20).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

from utils.notebook_files import BuildError

__all__ = [
    "EDITED_DIR",
    "SOURCE_DIGESTS_NAME",
    "edited_sources",
    "keep_aside",
    "read_string_map",
    "record_source_digests",
]

SOURCE_DIGESTS_NAME = "source_digests.json"
"""The digest of each ``source/`` notebook as the export wrote it, to tell an instructor's edit from it."""
EDITED_DIR = "edited_source"
"""``--force`` moves an edited source notebook to ``DIR/edited_source/<assignment>/NAME.ipynb`` (``NAME-2.ipynb``...
when one is there already) before it writes the export's: outside ``source/``, which nbgrader releases."""


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_string_map(path: Path, what: str) -> dict[str, str]:
    """The JSON object of strings an export recorded in ``path`` ({} when there is none yet); one that
    cannot be read, or is not such a map, is refused naming it (``what``: "each assignment to a fingerprint")."""
    if not path.exists():
        return {}
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BuildError(path, None, f"cannot be read ({exc}); fix it or move it away") from None
    if not isinstance(records, dict) or not all(isinstance(v, str) for v in records.values()):
        raise BuildError(path, None, f"should map {what}; fix it or move it away")
    return records


def _source_digests(out_dir: Path) -> dict[str, str]:
    return read_string_map(out_dir / SOURCE_DIGESTS_NAME, "each source notebook to a digest")


def edited_sources(out_dir: Path, texts: Mapping[Path, str], force: bool) -> list[Path]:
    """The source notebooks the export would replace although an instructor (or something other than an
    export) wrote them: refused, naming them, unless ``force``; with ``force`` each is first moved to
    :data:`EDITED_DIR`, and those copies are returned."""
    records = _source_digests(out_dir)
    edited = []
    for target, text in texts.items():
        if not target.exists() and not target.is_symlink():
            continue
        try:
            old = target.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            old = None
        rel = target.relative_to(out_dir).as_posix()
        if old is None or (old != text and records.get(rel) != _digest(old)):
            edited.append(target)
    if not edited:
        return []
    if not force:
        names = ", ".join(path.relative_to(out_dir).as_posix() for path in edited)
        raise BuildError(
            edited[0],
            None,
            f"{names} {'was' if len(edited) == 1 else 'were'} edited since the last export (or not written by "
            "one), and this export would replace "
            f"{'it' if len(edited) == 1 else 'them'}: source/ is generated from solutions/. Make the change "
            "in solutions/ and export again, or pass --force to replace "
            f"{'it' if len(edited) == 1 else 'them'} (each edited file is first moved to {out_dir / EDITED_DIR})",
        )
    return [keep_aside(out_dir, target, target.parent.name) for target in edited]


def keep_aside(out_dir: Path, target: Path, folder: str = "") -> Path:
    """Move ``target`` to ``out_dir/edited_source/<folder>/`` under its name (``NAME-2.ext``... when an earlier
    one is there: it stays) and return where it went: what ``--force`` does with an instructor's edit."""
    place = out_dir / EDITED_DIR / folder if folder else out_dir / EDITED_DIR
    place.mkdir(parents=True, exist_ok=True)
    backup, number = place / target.name, 1
    while backup.exists() or backup.is_symlink():
        number += 1
        backup = place / f"{target.stem}-{number}{target.suffix}"
    os.replace(target, backup)
    return backup


def record_source_digests(out_dir: Path, texts: Mapping[Path, str]) -> None:
    records = _source_digests(out_dir)
    records.update({target.relative_to(out_dir).as_posix(): _digest(text) for target, text in texts.items()})
    path = out_dir / SOURCE_DIGESTS_NAME
    path.write_text(json.dumps(records, indent=1, sort_keys=True) + "\n", encoding="utf-8")
