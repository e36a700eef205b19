"""Reading notebooks: the course's exercise list (trusted) and a student's exercise cells (hostile).

Exercises are found by the id in the cell metadata (``{"course": {"exercise": "ch2.causal_mask",
"points": 2}}``), never by file name, so a renamed notebook still grades. Points always come from the
course: its source notebooks in ``solutions/`` when they are there (a checkout), else the exercise list
shipped with the package (:mod:`utils.grading.manifest`, for a pip-installed grader).

How submissions are found and unpacked is :mod:`utils.grading.intake`; this module reads notebooks.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# nbformat imports jsonschema, which builds an Earley parser for the "iri" string format at import whenever
# rfc3987_syntax is installed (Jupyter's own dependencies install it): about 1.4 s of CPU at every start of
# the grader and of each Gradescope run, for a format the notebook schema never uses. Marked absent before
# jsonschema loads, in the grader's process only (no kernel imports this module), jsonschema skips it.
if "jsonschema" not in sys.modules:
    sys.modules.setdefault("rfc3987_syntax", None)
import nbformat  # noqa: E402

from utils.grading import files
from utils.grading.manifest import MANIFEST_PATH, load_manifest

MAX_NOTEBOOK_BYTES = 20 * 2**20
MAX_CELL_CHARS = 200_000
EXERCISE_CHAPTERS = "exercise_chapters.json"
"""In ``solutions/``: every course exercise's chapter, ids and numbers only (:func:`exercise_chapters`)."""


@dataclass(frozen=True)
class CourseExercise:
    id: str
    points: int
    notebook: str  # the solutions/ notebook it comes from
    exercise: Any  # utils.exercises.definition.Exercise

    @property
    def chapter(self) -> int | None:
        return chapter_of(self.notebook, self.id)


class ChapterError(ValueError):
    """A ``--chapters`` value that names no chapter of the course; ``str()`` says which chapters there are."""


def chapter_of(notebook: str, exercise_id: str = "") -> int | None:
    """The chapter an exercise belongs to: the number its notebook's name starts with (``02_sdpa.ipynb``
    is chapter 2), else the ``ch<N>.`` of its id, else None.

    >>> chapter_of("02_scaled_dot_product_attention.ipynb"), chapter_of("toy.ipynb", "ch3.x"), chapter_of("a", "b")
    (2, 3, None)
    """
    found = re.match(r"(\d+)", Path(notebook).name) or re.match(r"ch(\d+)\.", exercise_id)
    return int(found[1]) if found else None


def chapters_text(chapters: Iterable[int]) -> str:
    """``1-3, 5``: chapter numbers with runs written as ranges.

    >>> chapters_text([5, 1, 2, 3]), chapters_text([])
    ('1-3, 5', 'none')
    """
    runs: list[list[int]] = []
    for n in sorted(set(chapters)):
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs) or "none"


def parse_chapters(text: str, available: Iterable[int]) -> frozenset[int]:
    """The chapters ``--chapters`` names: a number, a range or a comma-separated list of both (``2``,
    ``2-3``, ``1,3,5-6``). ``available`` are the course's chapters; anything else raises
    :class:`ChapterError` naming ``--chapters`` and the valid chapters.

    >>> sorted(parse_chapters("1, 3,5-6", range(1, 7)))
    [1, 3, 5, 6]
    >>> try:
    ...     parse_chapters("7", [1, 2])
    ... except ChapterError as exc:
    ...     print(exc)
    --chapters '7': chapter 7 is not in this course; its chapters are 1-2
    """
    valid = frozenset(available)
    where = f"--chapters {str(text)[:60]!r}"
    allowed = f"its chapters are {chapters_text(valid)}"
    chosen: set[int] = set()
    for piece in str(text).split(","):
        found = re.fullmatch(r"\s*(\d{1,4})\s*(?:-\s*(\d{1,4})\s*)?", piece)
        if found is None:
            raise ChapterError(f"{where}: expected chapter numbers and ranges such as 2, 2-3 or 1,3,5-6; "
                               f"{allowed}")
        first, last = int(found[1]), int(found[2] or found[1])
        if last < first:
            raise ChapterError(f"{where}: the range {first}-{last} runs backwards (write {last}-{first}); {allowed}")
        chosen.update(range(first, last + 1))
    unknown = sorted(chosen - valid)
    if unknown:
        raise ChapterError(f"{where}: {'chapter' if len(unknown) == 1 else 'chapters'} {chapters_text(unknown)} "
                           f"{'is' if len(unknown) == 1 else 'are'} not in this course; {allowed}")
    return frozenset(chosen)


def select_chapters(exercises: list[CourseExercise], chapters: Iterable[int] | None) -> list[CourseExercise]:
    """The exercises of ``chapters`` (None: all of them), in course order. A chapter with no exercise
    raises :class:`ChapterError`."""
    if chapters is None:
        return list(exercises)
    wanted = frozenset(chapters)
    available = {e.chapter for e in exercises} - {None}
    unknown = sorted(wanted - available)
    if unknown:
        raise ChapterError(f"--chapters: {'chapter' if len(unknown) == 1 else 'chapters'} {chapters_text(unknown)} "
                           f"{'has' if len(unknown) == 1 else 'have'} no exercise in this course; its chapters are "
                           f"{chapters_text(available)}")
    return [e for e in exercises if e.chapter in wanted]


def course_chapters(course_root: Path | None) -> frozenset[int]:
    """The chapters that have exercises in the course at ``course_root`` (None: the exercise list shipped
    with the package), without loading the exercises' definitions."""
    found = (chapter_of(notebook, exercise_id) for notebook, exercise_id, _p in course_entries(course_root)[0])
    return frozenset(n for n in found if n is not None)


class InvalidNotebook(ValueError):
    pass


def too_large(size: int) -> InvalidNotebook:
    return InvalidNotebook(f"is too large ({size / 2**20:.0f} MB > {MAX_NOTEBOOK_BYTES // 2**20} MB)")


def read_notebook(path: Path, notes: list[str] | None = None) -> Any:
    """Parse a notebook with a size cap; raises :class:`InvalidNotebook` with a readable reason (``notes``:
    see :func:`parse_notebook`)."""
    try:  # through one descriptor, without following links or blocking: a FIFO or device is refused
        data = files.read_regular(path, MAX_NOTEBOOK_BYTES)
    except files.TooLarge as exc:
        raise too_large(exc.size) from None
    except files.Refused as exc:
        raise InvalidNotebook(str(exc)) from None
    return parse_notebook(data, notes)


def parse_notebook(data: bytes, notes: list[str] | None = None) -> Any:
    """A notebook from its bytes (e.g. a zip member); raises :class:`InvalidNotebook` with a reason.

    Cells that repeat an earlier cell's id get fresh ids here, as Jupyter would, and one line is added
    to ``notes`` saying how many, instead of one warning per cell."""
    if len(data) > MAX_NOTEBOOK_BYTES:
        raise too_large(len(data))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidNotebook("is not UTF-8 text") from None
    try:
        text, renumbered = _renumber_cell_ids(text)
        notebook = nbformat.reads(text, as_version=4)
    except Exception as exc:  # nbformat raises many kinds (NotJSONError, ValueError, KeyError...)
        if isinstance(exc, RecursionError):  # valid JSON, perhaps, but deeper than Python's reader goes
            reason = "is JSON nested too deeply to read (a notebook nests a few levels)"
        elif "JSON" in type(exc).__name__ or "JSON" in str(exc)[:200]:
            reason = "is not valid JSON"
        else:
            reason = f"is not a Jupyter notebook ({type(exc).__name__})"
        raise InvalidNotebook(reason) from None
    cells = notebook.get("cells") if isinstance(notebook, Mapping) else None
    if not isinstance(cells, list):
        raise InvalidNotebook("is not a Jupyter notebook (no cells)")
    if renumbered and notes is not None:
        notes.append(f"{renumbered} {'cell repeats' if renumbered == 1 else 'cells repeat'} an earlier cell's id; "
                     f"the grader gave {'it a fresh id' if renumbered == 1 else 'them fresh ids'}, as Jupyter does")
    return notebook


def _renumber_cell_ids(text: str) -> tuple[str, int]:
    """``text`` with every repeated cell id replaced by a fresh one, and how many were replaced (nbformat
    would warn once per cell: 3,000 lines for one careless notebook)."""
    try:
        raw = json.loads(text)
    except ValueError:
        return text, 0  # nbformat says why
    cells = raw.get("cells") if isinstance(raw, dict) else None
    ids = [c.get("id") if isinstance(c, dict) else None for c in cells] if isinstance(cells, list) else []
    taken = {i for i in ids if isinstance(i, str)}
    seen: set[str] = set()
    count = 0
    for cell, cell_id in zip(cells or [], ids):
        if not isinstance(cell_id, str):
            continue
        if cell_id in seen:
            count += 1
            fresh = f"renumbered-{count}"
            while fresh in taken:
                fresh += "-"
            cell["id"] = fresh
            taken.add(fresh)
        seen.add(cell_id)
    return (json.dumps(raw), count) if count else (text, 0)


def exercise_cells(notebook: Any) -> list[tuple[str, str, Any]]:
    """``(exercise id, source, points metadata)`` for every code cell tagged as an exercise."""
    found = []
    for cell in notebook.get("cells", []):
        if not isinstance(cell, Mapping) or cell.get("cell_type") != "code":
            continue
        metadata = cell.get("metadata")
        course = metadata.get("course") if isinstance(metadata, Mapping) else None
        exercise_id = course.get("exercise") if isinstance(course, Mapping) else None
        if not isinstance(exercise_id, str):
            continue
        source = cell.get("source", "")
        if isinstance(source, list):
            source = "".join(s for s in source if isinstance(s, str))
        if not isinstance(source, str):
            source = ""
        found.append((exercise_id[:100], source, course.get("points")))
    return found


def course_entries(course_root: Path | None) -> tuple[list[tuple[str, str, Any]], str]:
    """``(notebook, exercise id, points)`` in course order, and where they were read: the notebooks in
    ``course_root/solutions``, or, when ``course_root`` is None, the exercise list shipped with the package."""
    if course_root is None:
        entries = [(e["notebook"], e["id"], e["points"]) for e in load_manifest()]
        return entries, f"the exercise list shipped with the package ({MANIFEST_PATH})"
    entries = []
    for path in sorted((Path(course_root) / "solutions").glob("*.ipynb")):
        entries += [(path.name, exercise_id, points) for exercise_id, _source, points in
                    exercise_cells(read_notebook(path))]
    return entries, f"the notebooks in {Path(course_root) / 'solutions'}"


def load_course(course_root: Path | None, registry: Mapping[str, Any]) -> list[CourseExercise]:
    """Every exercise of every chapter present in ``course_root/solutions`` (None: the exercise list
    shipped with the package, :mod:`utils.grading.manifest`), in course order."""
    exercises: list[CourseExercise] = []
    seen: set[str] = set()
    for name, exercise_id, points in course_entries(course_root)[0]:
        if exercise_id in seen:
            raise ValueError(f"{name}: exercise {exercise_id!r} appears twice in the course")
        if exercise_id not in registry:
            print(f"grader: {name} has exercise {exercise_id!r} with no definition in "
                  f"utils.exercises; skipped", file=sys.stderr)
            continue
        if not isinstance(points, int) or isinstance(points, bool) or points < 0:
            raise ValueError(f"{name}: exercise {exercise_id!r} has no valid integer points")
        seen.add(exercise_id)
        exercises.append(CourseExercise(exercise_id, points, name, registry[exercise_id]))
    return exercises


def exercise_chapters(course_root: Path | None, exercises: Iterable[CourseExercise]) -> dict[str, int]:
    """Every course exercise's chapter: those of ``exercises`` (the course's, as loaded) and those listed in
    ``course_root/solutions/`` :data:`EXERCISE_CHAPTERS`, which a Gradescope bundle of some chapters ships
    in place of the other chapters' notebooks, so that a notebook of another chapter is named as such."""
    found: dict[str, int] = {}
    path = None if course_root is None else Path(course_root) / "solutions" / EXERCISE_CHAPTERS
    if path is not None and path.is_file():
        listed = json.loads(path.read_text(encoding="utf-8")).get("chapters")
        if not isinstance(listed, dict) or not all(isinstance(k, str) and type(v) is int for k, v in listed.items()):
            raise ValueError(f"{path}: 'chapters' must map each exercise id to its chapter number, got {listed!r}")
        found.update(listed)
    found.update({e.id: e.chapter for e in exercises if e.chapter is not None})
    return found


def exercise_chapters_text(course_root: Path) -> str:
    """The :data:`EXERCISE_CHAPTERS` file of the course at ``course_root``: every exercise id and its chapter,
    in course order; no code, no points."""
    chapters = {exercise_id: chapter_of(name, exercise_id) for name, exercise_id, _points in
                course_entries(course_root)[0]}
    about = "Every exercise of the course and its chapter (the grader names a notebook of another chapter)."
    return json.dumps({"about": about, "chapters": {k: v for k, v in chapters.items() if v is not None}},
                      indent=1) + "\n"


@dataclass
class Submission:
    """One student's exercise cells, keyed by id, and the notebooks that could not be read.

    Notebooks are read when :meth:`load` runs (the grader does it under its per-student watchdog), not
    when they are found: checking a notebook costs about 5 s per MB. ``modified`` says when each file was
    last modified (a file's time, or the time stored in a zip) so that of two copies of an exercise the
    newer can be graded; ``unplaced`` (:class:`~utils.grading.intake.Unplaced`) and ``notes`` are what
    reading found to report."""

    student: str
    cells: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # id -> [(file, source)]
    invalid: list[tuple[str, str]] = field(default_factory=list)  # (file, reason)
    modified: dict[str, float] = field(default_factory=dict)  # file -> its modification time
    unplaced: list[Any] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    pending: list[Callable[[], None]] = field(default_factory=list, repr=False)

    @property
    def name(self) -> str:  # the planner names a student by ``.name``, as it did a folder
        return self.student

    def add(self, file: str, read: Callable[[list[str]], Any], modified: float = 0.0) -> None:
        """Read, when :meth:`load` runs, the notebook ``read(notes)`` returns: add its exercise cells, or
        record why it cannot be read."""
        self.modified[file] = modified
        self.pending.append(lambda: self._read(file, read))

    def defer(self, step: Callable[[], None]) -> None:
        """Run ``step`` (e.g. reading a zip) when :meth:`load` runs."""
        self.pending.append(step)

    def load(self, stop: Callable[[], bool] | None = None) -> bool:
        """Read every pending notebook, in the order found; False when ``stop()`` said to stop before the
        last (it is asked before each notebook, a zip's members included)."""
        self._stop = stop
        try:
            while self.pending and not self.stopping():
                self.pending.pop(0)()
        finally:
            self._stop = None
        return not self.pending

    def stopping(self) -> bool:
        """Whether the :meth:`load` under way was told to stop."""
        stop = getattr(self, "_stop", None)
        return stop is not None and bool(stop())

    def read_now(self, file: str, read: Callable[[list[str]], Any], modified: float = 0.0) -> None:
        """:meth:`add`, read at once (a zip's member, while the zip is open)."""
        self.modified[file] = modified
        self._read(file, read)

    def _read(self, file: str, read: Callable[[list[str]], Any]) -> None:
        notes: list[str] = []
        try:
            notebook = read(notes)
        except InvalidNotebook as exc:
            self.invalid.append((file, str(exc)))
            return
        self.notes += [f"{file}: {note}" for note in notes]
        for exercise_id, source, _points in exercise_cells(notebook):
            self.cells.setdefault(exercise_id, []).append((file, source))


def find_students(submissions: Any) -> list[Any]:
    """Student folders of ``submissions`` (a folder), or the :class:`Submission` s an intake found
    (anything with ``.students``, see :func:`utils.grading.intake.collect`)."""
    if not isinstance(submissions, (str, Path)):
        return list(submissions.students)
    return sorted(p for p in Path(submissions).iterdir()
                  if p.is_dir() and not p.is_symlink() and not p.name.startswith("."))


def skipped_entries(submissions: Path) -> list[str]:
    """``"name (why)"`` for every entry of ``submissions`` that is not graded as a student, so that the
    grader can say so instead of dropping it silently."""
    skipped = []
    for path in sorted(submissions.iterdir()):
        if path.is_symlink():
            skipped.append(f"{path.name} (a symbolic link)")
        elif not path.is_dir():
            skipped.append(f"{path.name} (not a folder)")
        elif path.name.startswith("."):
            skipped.append(f"{path.name} (a folder whose name starts with '.')")
    return skipped


def read_submission(folder: Path | Submission) -> Submission:
    """The notebooks directly in ``folder``; a :class:`Submission` an intake already read is returned as is."""
    if isinstance(folder, Submission):
        return folder
    submission = Submission(folder.name)
    for path in sorted(folder.glob("*.ipynb")):
        submission.add(path.name, lambda notes, p=path: read_notebook(p, notes), mtime(path))
    submission.load()
    return submission


def mtime(path: Path) -> float:
    """When ``path`` (not a link's target) was last modified; 0 when that cannot be read."""
    try:
        return path.lstat().st_mtime
    except OSError:
        return 0.0


def syntax_problem(source: str) -> str | None:
    """A one-line description of a syntax error in the cell, or None. Parsing never runs code."""
    if len(source) > MAX_CELL_CHARS:
        return f"the cell is too long ({len(source)} characters)"
    try:
        ast.parse(source)
    except SyntaxError as exc:
        if exc.lineno == 1 and source.startswith("%%"):  # a cell magic other than utils.exercises.magics' (%%bash)
            return f"the cell starts with the IPython cell magic {source.split()[0]}, which is not Python: remove it"
        return f"syntax error on line {exc.lineno}: {exc.msg}"
    except (ValueError, RecursionError, MemoryError) as exc:
        return f"the cell cannot be parsed ({type(exc).__name__})"
    return None
