"""The learner's work folder: their own copies of the chapters, which the course never overwrites.

``make lab`` calls :func:`sync` before it starts JupyterLab on the folder (``work/`` by default, which
git ignores). The model, in three rules:

1. A chapter that is not in the work folder yet is copied there.
2. A copy the learner has not changed since it was copied is replaced when the course's chapter changes.
3. A copy the learner has changed is never touched: when the course's chapter is newer, the new version
   is written beside it as ``NN_name.updated.ipynb``, and :func:`sync` says so.

What was copied is remembered in ``.course-versions.json`` inside the folder: one digest per chapter of
the version copied, so "changed by the learner" and "changed by the course" are told apart.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from utils.i18n.messages import tr
from utils.notebook_files import NOTEBOOK_GLOB
from utils.paths import REPO_ROOT

__all__ = ["MANIFEST", "UPDATED_SUFFIX", "SyncReport", "sync"]

MANIFEST = ".course-versions.json"
UPDATED_SUFFIX = ".updated.ipynb"


@dataclass
class SyncReport:
    """What :func:`sync` did, chapter file names in each list."""

    copied: list[str] = field(default_factory=list)
    refreshed: list[str] = field(default_factory=list)  # unchanged by the learner, replaced by the new version
    updates_beside: list[str] = field(default_factory=list)  # "NN.ipynb -> NN.updated.ipynb": yours kept

    def lines(self) -> list[str]:
        """What ``make lab`` prints, in the current language (:mod:`utils.i18n.messages`)."""
        out = []
        if self.copied:
            out.append(tr("Copied into your work folder: {names}", names=", ".join(self.copied)))
        if self.refreshed:
            out.append(tr("Updated (you had not changed them): {names}", names=", ".join(self.refreshed)))
        for pair in self.updates_beside:
            name, new = pair.split(" -> ")
            out.append(tr("The course has a newer {name}. Your copy is untouched; the new version is {new}",
                          name=name, new=new))
        return out


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _offer_beside(target: Path, source: Path, digest: str) -> Path:
    """Where the new version of ``target`` lies beside it: an ``.updated`` file that already holds it,
    else the first free name. An ``.updated`` file is never overwritten: the learner may have begun it."""
    stem = target.name.removesuffix(".ipynb")
    for number in range(1, 1000):
        beside = target.with_name(stem + (UPDATED_SUFFIX if number == 1 else f".updated-{number}.ipynb"))
        if not beside.exists():
            shutil.copyfile(source, beside)
            return beside
        if _digest(beside) == digest:
            return beside
    raise RuntimeError(f"too many updated copies of {target.name} in {target.parent}")


def _read_manifest(work: Path) -> dict[str, str]:
    try:
        data = json.loads((work / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def sync(work: str | Path, chapters: str | Path = REPO_ROOT / "chapters") -> SyncReport:
    """Bring the work folder ``work`` up to date with ``chapters`` by the three rules above.

    Args:
        work: the learner's folder; created when missing.
        chapters: the generated student notebooks. Default: the course's ``chapters/``.

    Returns:
        A :class:`SyncReport`; its :meth:`~SyncReport.lines` are what ``make lab`` prints.
    """
    work, chapters = Path(work), Path(chapters)
    work.mkdir(parents=True, exist_ok=True)
    manifest = _read_manifest(work)
    report = SyncReport()
    for source in sorted(chapters.glob(NOTEBOOK_GLOB)):
        target = work / source.name
        new = _digest(source)
        if not target.exists():
            shutil.copyfile(source, target)
            report.copied.append(source.name)
        elif _digest(target) == new:
            pass  # already this version
        elif manifest.get(source.name) == new:
            continue  # the learner changed their copy; the course has not changed since it was copied
        elif source.name in manifest and _digest(target) == manifest[source.name]:
            shutil.copyfile(source, target)  # the learner had not touched it
            report.refreshed.append(source.name)
        else:  # the learner's own work, and a newer chapter: keep theirs, offer the new one beside it
            beside = _offer_beside(target, source, new)
            report.updates_beside.append(f"{source.name} -> {beside.name}")
            continue  # the manifest keeps the version the learner's copy started from
        manifest[source.name] = new
    (work / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return report
