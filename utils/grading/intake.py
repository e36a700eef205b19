"""Submissions as they really arrive: folders, nested folders, a Canvas download, one file or zip per student.

``collect(SUBMISSIONS, layout)`` turns a submissions folder into one
:class:`~utils.grading.course.Submission` per student plus an :class:`Unplaced` entry, with its reason,
for everything it does not grade. Nothing is dropped silently: the grader prints those entries and
writes them to ``results.csv`` with the status ``unplaced``.

Layouts (``--layout``):

* ``folders``: ``SUBMISSIONS/<student>/`` holds the student's notebooks, at any depth up to
  :data:`MAX_FOLDER_DEPTH` folders (``<student>/chapters/02_sdpa.ipynb``), and ``SUBMISSIONS/<student>.zip``
  is a student too. A notebook at the top level is an error (whose is it?), reported, not graded.
* ``canvas``: a flat folder as Canvas's "Download Submissions" writes it,
  ``<name>_<user id>_<submission id>_<original name>`` (``<name>_LATE_<user id>_...`` when late); the
  files of one Canvas user are one student, named ``<name>`` (``<name>_<user id>`` when two users share
  a name). Notebooks and zips are read, each named by its download name, so two files that share an
  original name stay two copies (:mod:`utils.grading.copies` says which is graded). A download that is
  not a notebook or zip is reported under its student, so its ``results.csv`` row has their ``student_id``.
* ``flat``: one file per student, ``SUBMISSIONS/<student>.ipynb`` or ``<student>.zip``.
* ``auto`` (the default) picks one from what the folder holds and says why (:attr:`Intake.reason`).

Inside a student's folder or zip, only ``.ipynb`` files (and, in a folder, zips) are read; Jupyter's
``.ipynb_checkpoints``, hidden entries, ``__MACOSX``, links and other files are reported as unplaced.

**A zip is untrusted input.** It is read into memory through :func:`utils.grading.files.read_regular`
(no link, FIFO or device; at most :data:`MAX_ZIP_BYTES`) and never extracted to disk, so a member named
``../../x`` cannot write anywhere; such names, links, FIFOs and devices inside the zip, encrypted or
nested zips are refused with a reason. At most :data:`MAX_ZIP_MEMBERS` entries are listed, every
notebook read stops at :data:`~utils.grading.course.MAX_NOTEBOOK_BYTES` whatever its header claims,
and at most :data:`MAX_ZIP_TOTAL` bytes are unpacked from one zip (a zip bomb stops there).
"""

from __future__ import annotations

import io
import os
import re
import stat
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from utils.grading import files
from utils.grading.course import MAX_NOTEBOOK_BYTES, Submission, mtime, parse_notebook, read_notebook
from utils.grading.report import plural

LAYOUTS = ("auto", "folders", "canvas", "flat")
UNPLACED = "unplaced"
"""The ``results.csv`` status of a file the grader did not grade (the reason is in ``feedback``)."""
NOT_A_NOTEBOOK = "not a notebook (.ipynb) or zip; not graded"
MAX_FOLDER_DEPTH = 6
"""Folders below a student's folder (or inside a zip) that are read."""
MAX_ENTRIES = 2000
"""Entries read from one student's folder; the rest is reported."""
MAX_ZIP_BYTES = 256 * 2**20
MAX_ZIP_MEMBERS = 2000
MAX_ZIP_TOTAL = 512 * 2**20
CANVAS_NAME = re.compile(r"^(?P<name>[^_]+)_(?:LATE_)?(?P<user>\d+)_(?P<submission>\d+)_(?P<original>.+)$")
"""``<name>_[LATE_]<user id>_<submission id>_<original name>``, as Canvas names downloaded submissions."""
_READABLE = (".ipynb", ".zip")
TOP_LEVEL_NOTEBOOK = ("a notebook at the top level, so whose it is is unknown: put each student's notebooks in a "
                      "folder named after the student, or pass --layout flat (one notebook per student, named "
                      "after them) or --layout canvas")


@dataclass(frozen=True)
class Unplaced:
    """A file or folder that is not graded: its path below the submissions folder, and why."""

    path: str
    reason: str
    student: str = ""  # whose folder or zip it was in, when known

    def line(self) -> str:
        return f"{self.path} ({self.reason})"


@dataclass
class Intake:
    """What :func:`collect` found: the layout used (and why, when ``auto`` chose it), the students in
    name order, the files it did not place, and each student's Canvas user id (Canvas layout only)."""

    root: Path
    layout: str
    reason: str
    students: list[Submission]
    unplaced: list[Unplaced] = field(default_factory=list)
    canvas_ids: dict[str, str] = field(default_factory=dict)

    def errors(self) -> list[Unplaced]:
        """Unplaced entries that are the instructor's mistake, not noise: notebooks no student owns."""
        return [u for u in self.unplaced if u.reason == TOP_LEVEL_NOTEBOOK]


def collect(root: str | Path, layout: str = "auto", *, read: bool = True) -> Intake:
    """Read the submissions folder ``root`` in the given layout (one of :data:`LAYOUTS`).

    With ``read=False`` the students' notebooks and zips are only found: each :class:`Submission` reads
    them when its ``load()`` runs (the grader does that for each student under its watchdog), and what
    reading a zip leaves unplaced is in that submission's ``unplaced``. With ``read=True`` (the default)
    every submission is read now and those entries join :attr:`Intake.unplaced`.

    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> (root / "alice" / "chapters").mkdir(parents=True)
    >>> _ = (root / "alice" / "chapters" / "hw.ipynb").write_text('{"cells": [], "metadata": {}, '
    ...     '"nbformat": 4, "nbformat_minor": 5}')
    >>> _ = (root / "stray.ipynb").write_text("{}")
    >>> found = collect(root)
    >>> found.layout, [s.student for s in found.students], [u.path for u in found.errors()]
    ('folders', ['alice'], ['stray.ipynb'])
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    root = Path(root)
    entries = sorted(os.scandir(root), key=lambda e: e.name)
    intake = Intake(root, layout, "", [])
    visible = []
    for entry in entries:
        if entry.name.startswith("."):
            intake.unplaced.append(Unplaced(entry.name, "its name starts with '.'; rename it to grade it"))
        elif entry.is_symlink():
            intake.unplaced.append(Unplaced(entry.name, "a symbolic link; links are not followed"))
        else:
            visible.append(entry)
    if layout == "auto":
        intake.layout, intake.reason = _choose(visible)
    students: dict[str, Submission] = {}

    def student(name: str) -> Submission:
        return students.setdefault(name, Submission(name))

    canvas_users: dict[str, set[str]] = {}
    canvas_files: list[tuple[os.DirEntry, str, str]] = []  # (entry, user id, original name)
    canvas_others: list[tuple[str, str, str]] = []  # Canvas downloads not graded: (file, name, user id)
    for entry in visible:
        is_dir, suffix = entry.is_dir(follow_symlinks=False), Path(entry.name).suffix.lower()
        if intake.layout == "folders" and is_dir:
            _read_folder(Path(entry.path), entry.name, student(entry.name), intake.unplaced)
        elif intake.layout in ("folders", "flat") and suffix == ".zip" and not is_dir:
            _defer_zip(Path(entry.path), entry.name, student(Path(entry.name).stem))
        elif intake.layout == "flat" and suffix == ".ipynb" and not is_dir:
            _add_notebook(student(Path(entry.name).stem), entry.name, Path(entry.path))
        elif intake.layout == "canvas" and not is_dir and (match := CANVAS_NAME.match(entry.name)) and \
                Path(match["original"]).suffix.lower() in _READABLE:
            canvas_users.setdefault(match["name"], set()).add(match["user"])
            canvas_files.append((entry, match["user"], match["original"]))
        elif intake.layout == "canvas" and not is_dir and entry.is_file(follow_symlinks=False) and \
                (match := CANVAS_NAME.match(entry.name)):
            canvas_others.append((entry.name, match["name"], match["user"]))  # whose it is: its name says
        else:
            intake.unplaced.append(Unplaced(entry.name, _why_not(entry, intake.layout, is_dir, suffix)))

    def canvas_student(name: str, user: str) -> str:  # a name two Canvas users share gets the user id
        return name if canvas_users.get(name, {user}) == {user} else f"{name}_{user}"

    for file, name, user in canvas_others:
        intake.unplaced.append(Unplaced(file, NOT_A_NOTEBOOK, canvas_student(name, user)))
    for entry, user, original in canvas_files:
        name = canvas_student(CANVAS_NAME.match(entry.name)["name"], user)
        intake.canvas_ids[name] = user
        if original.lower().endswith(".zip"):
            _defer_zip(Path(entry.path), entry.name, student(name))
        else:
            _add_notebook(student(name), entry.name, Path(entry.path))  # two files may share an original name
    intake.students = [students[name] for name in sorted(students)]
    if read:
        for submission in intake.students:
            submission.load()
            intake.unplaced += submission.unplaced
    return intake


def _add_notebook(submission: Submission, file: str, path: Path) -> None:
    submission.add(file, lambda notes: read_notebook(path, notes), mtime(path))


def _defer_zip(path: Path, label: str, submission: Submission) -> None:
    submission.defer(lambda: _read_zip(path, label, submission, submission.unplaced))


def _choose(entries: list[os.DirEntry]) -> tuple[str, str]:
    folders = [e for e in entries if e.is_dir(follow_symlinks=False)]
    readable = [e for e in entries if not e.is_dir(follow_symlinks=False) and Path(e.name).suffix.lower() in _READABLE]
    canvas = [e for e in readable if CANVAS_NAME.match(e.name)]
    if not folders and canvas and 2 * len(canvas) >= len(readable):
        return "canvas", (f"{len(canvas)} of the {plural(len(readable), 'notebook or zip', 'notebooks and zips')} at "
                          f"the top level are named like "
                          f"Canvas downloads (<name>_<user id>_<submission id>_<file>)")
    if not folders and readable:
        return "flat", f"no folders, and {plural(len(readable), 'notebook or zip', 'notebooks or zips')} at the top " \
                       f"level: one per student"
    zips = sum(Path(e.name).suffix.lower() == ".zip" for e in readable)
    return "folders", plural(len(folders), "folder") + (f" and {plural(zips, 'zip')}" if zips else "") + \
        ", one per student"


def _why_not(entry: os.DirEntry, layout: str, is_dir: bool, suffix: str) -> str:
    if not is_dir and not entry.is_file(follow_symlinks=False):
        return "not a regular file or folder"
    if layout == "folders":
        return TOP_LEVEL_NOTEBOOK if suffix == ".ipynb" else "not a student folder, notebook or zip"
    if layout == "flat":
        return ("a folder; with --layout flat each student is one file, <student>.ipynb or <student>.zip"
                if is_dir else "not a notebook or zip")
    if is_dir:
        return "a folder; a Canvas download is a flat folder of files"
    return "not named like a Canvas download of a notebook or zip (<name>_<user id>_<submission id>_<file>)"


def _ignored(name: str) -> str | None:
    """Why a file or folder inside a student's submission is not read (None: read it)."""
    if name == ".ipynb_checkpoints":
        return "Jupyter's autosave copies, not graded"
    if name == "__MACOSX":
        return "macOS metadata, not graded"
    if name.startswith("."):
        return "its name starts with '.'; not graded"
    return None


def _read_folder(top: Path, label: str, submission: Submission, unplaced: list[Unplaced]) -> None:
    """Every notebook and zip below ``top``, breadth-first, without following links."""
    pending: list[tuple[Path, str, int]] = [(top, "", 0)]
    seen = 0
    while pending:
        folder, prefix, depth = pending.pop(0)
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            unplaced.append(Unplaced(f"{label}/{prefix}".rstrip("/"), f"cannot be listed ({exc.strerror})",
                                     submission.student))
            continue
        for entry in entries:
            rel = f"{prefix}{entry.name}"
            where = f"{label}/{rel}"
            seen += 1
            if seen > MAX_ENTRIES:
                unplaced.append(Unplaced(f"{label}/", f"more than {MAX_ENTRIES} files and folders; the rest "
                                                      f"was not read", submission.student))
                return
            why = _ignored(entry.name)
            if why is None and entry.is_symlink():
                why = "a symbolic link; links are not followed"
            if why is None and entry.is_dir(follow_symlinks=False):
                if depth + 1 >= MAX_FOLDER_DEPTH:
                    why = f"a folder nested deeper than {MAX_FOLDER_DEPTH} levels; not read"
                else:
                    pending.append((Path(entry.path), f"{rel}/", depth + 1))
                    continue
            suffix = Path(entry.name).suffix.lower()
            if why is None and suffix == ".ipynb":  # whatever it is: read_notebook refuses FIFOs and devices
                _add_notebook(submission, rel, Path(entry.path))
                continue
            if why is None and suffix == ".zip":
                _defer_zip(Path(entry.path), where, submission)
                continue
            unplaced.append(Unplaced(where, why or NOT_A_NOTEBOOK, submission.student))


def _member_problem(info: zipfile.ZipInfo, name: str) -> str | None:
    """Why a zip member is not read (None: it is a notebook to read)."""
    parts = PurePosixPath(name).parts
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name) or ".." in parts or "\\" in info.filename:
        return "a path that leaves the zip (absolute, '..' or '\\'); refused"
    mode = info.external_attr >> 16
    if stat.S_ISLNK(mode):
        return "a symbolic link inside the zip; refused"
    if mode and stat.S_IFMT(mode) and not stat.S_ISREG(mode):
        return "not a regular file (a FIFO, device or socket inside the zip); refused"
    why = next((w for w in map(_ignored, parts) if w), None)
    if why:
        return why
    if len(parts) > MAX_FOLDER_DEPTH + 1:
        return f"nested deeper than {MAX_FOLDER_DEPTH} folders in the zip; not read"
    if info.flag_bits & 0x1:
        return "encrypted; submit the zip without a password"
    suffix = PurePosixPath(name).suffix.lower()
    if suffix == ".zip":
        return "a zip inside a zip; unpack it and submit the notebooks"
    if suffix != ".ipynb":
        return "not a notebook (.ipynb); not graded"
    return None


def _read_zip(path: Path, label: str, submission: Submission, unplaced: list[Unplaced]) -> None:
    """The notebooks of one student's zip, read in memory under the limits in this module's docstring."""
    def refuse(reason: str, where: str = label) -> None:
        unplaced.append(Unplaced(where, reason, submission.student))

    try:
        data = files.read_regular(path, MAX_ZIP_BYTES)
    except files.TooLarge as exc:
        return refuse(f"a zip of {exc.size / 2**20:.0f} MB, more than {MAX_ZIP_BYTES // 2**20} MB; not read")
    except files.Refused as exc:
        return refuse(f"{exc}; not read")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError) as exc:
        return refuse(f"not a readable zip file ({type(exc).__name__}); not read")
    if len(members) > MAX_ZIP_MEMBERS:
        return refuse(f"a zip with {len(members)} entries, more than {MAX_ZIP_MEMBERS}; not read")
    budget, names = MAX_ZIP_TOTAL, set()
    for info in members:
        name = info.filename.replace("\\", "/")
        where = f"{label}:{name}"
        if info.is_dir():
            continue
        if submission.stopping():  # the grader's watchdog gave up on this student: stop between members
            return
        why = _member_problem(info, name) or ("a second entry with this name; only the first was read"
                                             if name in names else None)
        if why:
            refuse(why, where)
            continue
        names.add(name)
        try:
            with archive.open(info) as handle:  # read at most the cap, whatever the header says
                content = handle.read(min(MAX_NOTEBOOK_BYTES, budget) + 1)
        except Exception as exc:  # noqa: BLE001  (BadZipFile, zlib.error, NotImplementedError...: it costs itself)
            submission.modified[where] = _zip_time(info)  # so that a newer copy that cannot be read is told
            submission.invalid.append((where, f"cannot be unpacked ({type(exc).__name__})"))
            continue
        if len(content) > budget:
            return refuse(f"the zip unpacks to more than {MAX_ZIP_TOTAL // 2**20} MB; the rest was not read", where)
        budget -= len(content)
        if len(content) > MAX_NOTEBOOK_BYTES:
            submission.modified[where] = _zip_time(info)
            submission.invalid.append((where, f"is too large (more than {MAX_NOTEBOOK_BYTES // 2**20} MB)"))
            continue
        submission.read_now(where, lambda notes, c=content: parse_notebook(c, notes), _zip_time(info))


def _zip_time(info: zipfile.ZipInfo) -> float:
    """The modification time a zip stores for ``info`` (local time, as zip files keep it); 0 if invalid."""
    try:
        return time.mktime((*info.date_time, 0, 0, -1))
    except (OverflowError, ValueError):
        return 0.0


__all__ = ["CANVAS_NAME", "LAYOUTS", "MAX_ENTRIES", "MAX_FOLDER_DEPTH", "MAX_ZIP_BYTES", "MAX_ZIP_MEMBERS",
           "MAX_ZIP_TOTAL", "TOP_LEVEL_NOTEBOOK", "UNPLACED", "Intake", "Unplaced", "collect"]
