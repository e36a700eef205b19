"""The grader's outputs: ``results.csv``, ``grades.csv``, ``feedback/<student>.md``,
``feedback/index.csv`` and the summary.

Every file is written atomically (a temporary file in the same folder, then ``os.replace``), so a
crash never leaves a half-written grades file. Every CSV display cell is escaped against formula
injection: a cell starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return gets a leading
``'`` so that spreadsheets show it as text, and its control and invisible format characters (ESC,
``\r``, ``\n``, a bidirectional override such as U+202E) are written as Python escapes, as on the
console (:func:`console`), so that a file or folder name cannot recolour a terminal that shows the file
or reverse how a name reads; so are the feedback files. The one exception is the ``student_id`` column
(the last one of both CSVs, and in ``feedback/index.csv``): the student's name exactly as the
submission gave it, so that gradebook joins work (:class:`Raw`).

**Parts.** ``results.csv`` has one line per student × exercise × part (column ``part``): the part's
points, status and reason, in the batch's ``--feedback`` mode. A verdict about the whole exercise
(missing, forbidden, not attempted, a timeout, ...) gives every part 0 points and that reason.
``grades.csv`` keeps one total per exercise. Points are exact (parts are in hundredths) and written as
short decimals (``1.5``).
"""

from __future__ import annotations

import csv
import io
import os
import tempfile
import unicodedata
from collections.abc import Mapping, Sequence
from pathlib import Path

from utils.exercises.common import FAIL, PASS, Status
from utils.exercises.credit import part_text, status_text
from utils.exercises.definition import points_text
from utils.i18n.messages import tr

RESULTS_HEADER = ("student", "exercise", "part", "points", "max_points", "status", "feedback", "student_id")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


class Raw(str):
    """A CSV cell written exactly as it is (an identifier to join on), never escaped."""


def escape_cell(value: object) -> object:
    """``'=HYPERLINK(...)`` instead of ``=HYPERLINK(...)``, control characters escaped (:func:`console`);
    numbers and :class:`Raw` cells pass unchanged.

    >>> escape_cell("-2+3"), escape_cell(Raw("-2+3")), escape_cell(4), escape_cell("a\\x1b[2K\\r")
    ("'-2+3", '-2+3', 4, 'a\\\\x1b[2K\\\\r')
    """
    if not isinstance(value, str) or isinstance(value, Raw):
        return value
    return "'" + console(value) if value.startswith(_FORMULA_START) else console(value)


def console(text: object) -> str:
    """``text`` safe to print as one terminal line: control characters (escape sequences, ``\\r``, ``\\n``)
    and invisible format characters (bidirectional overrides) are written as Python escapes, so a file
    name cannot move the cursor, recolour the terminal or forge a line of its own.

    >>> print(console("bob\\x1b[2K\\r\\ngrader: 0 errors"), console("José 张伟"))
    bob\\x1b[2K\\r\\ngrader: 0 errors José 张伟
    """
    return "".join(ascii(ch)[1:-1] if unicodedata.category(ch) in _UNPRINTABLE else ch for ch in str(text))


_UNPRINTABLE = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # a new --out and feedback/: the instructor's (W27)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # surrogateescape: a folder name that is not UTF-8 is written back as the very bytes it had
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _csv(rows: Sequence[Sequence[object]]) -> str:
    buffer = io.StringIO()
    plain = csv.writer(buffer, lineterminator="\n")
    quoted = csv.writer(buffer, lineterminator="\n", quoting=csv.QUOTE_ALL)
    for row in rows:
        cells = [escape_cell(v) for v in row]
        # csv quotes a cell holding "\n" but not one holding "\r", which would split its row when read
        (quoted if any(isinstance(c, str) and "\r" in c for c in cells) else plain).writerow(cells)
    return buffer.getvalue()


def part_lines(row) -> list[tuple[object, ...]]:
    """``(part, points, max_points, status, feedback)`` per part of ``row`` (the whole exercise when it
    has no parts)."""
    if not row.parts:
        return [("", points_text(row.points), points_text(row.max_points), row.status, row.feedback)]
    return [(p.part, points_text(p.points), points_text(p.max_points), p.status, p.feedback) for p in row.parts]


def results_csv(rows: Sequence) -> str:
    return _csv([RESULTS_HEADER] + [(r.student, r.exercise, *line, Raw(r.student))
                                    for r in rows for line in part_lines(r)])


def grades_csv(rows: Sequence, students: Sequence[str], exercise_ids: Sequence[str]) -> str:
    table = {(r.student, r.exercise): r for r in rows}
    lines: list[Sequence[object]] = [("student", *exercise_ids, "total", "max_total", "student_id")]
    for student in students:
        points = [table[(student, e)].points for e in exercise_ids]
        maxima = [table[(student, e)].max_points for e in exercise_ids]
        lines.append((student, *map(points_text, points), points_text(sum(points)), points_text(sum(maxima)),
                      Raw(student)))
    return _csv(lines)


def _md(text: str) -> str:
    return " ".join(console(text).split()).replace("|", "\\|").replace("<", "&lt;")


def feedback_md(student: str, rows: Sequence) -> str:
    """``feedback/<student>.md``, in the current language (``python -m utils.grade --lang``)."""
    mine = [r for r in rows if r.student == student]
    total, maximum = sum(r.points for r in mine), sum(r.max_points for r in mine)
    lines = [tr("# Feedback for {student}", student=_md(student)), "",
             tr("**Total: {points} / {maximum} points**", points=points_text(total), maximum=points_text(maximum)),
             "", tr("| exercise | points | status | what to do |"), "|---|---|---|---|"]
    for r in mine:
        mark = PASS if r.status == Status.PASSED else FAIL
        name = f"`{r.exercise}`" if r.exercise else tr("(a file not graded)")  # an unplaced row has no exercise
        lines.append(f"| {name} | {points_text(r.points)} / {points_text(r.max_points)} | {mark} "
                     f"{status_text(r.status)} | {_md(r.feedback)} |")
        lines.extend(_part_md(r))
    return "\n".join(lines) + "\n"


def _part_md(row) -> list[str]:
    """The table lines of ``row``'s parts, under the exercise's line (none for a one-part exercise)."""
    if len(row.parts) < 2:
        return []
    return [f"| &nbsp;&nbsp;↳ {_md(part_text(p.part))} | {points_text(p.points)} / {points_text(p.max_points)} | "
            f"{PASS if p.status == Status.PASSED else FAIL} {status_text(p.status)} | {_md(p.feedback)} |"
            for p in row.parts]


def feedback_files(students: Sequence[str]) -> dict[str, str]:
    """Student -> the name of their feedback file: readable (:func:`file_stem`) and unique even on a disk
    that ignores case or Unicode normalization (macOS, Windows), where ``Alice`` and ``alice`` are one file.

    >>> feedback_files(["a b", "a_b", "-2+3", "Alice", "alice", "José Núñez", "张伟"])
    {'a b': 'a_b.md', 'a_b': 'a_b_.md', '-2+3': '-2_3.md', 'Alice': 'Alice.md', 'alice': 'alice_.md', \
'José Núñez': 'José_Núñez.md', '张伟': '张伟.md'}
    """
    used: set[str] = set()
    names = {}
    for student in students:
        name = file_stem(student)
        while _disk_key(name) in used:  # two names that are one file on some disk
            name += "_"
        used.add(_disk_key(name))
        names[student] = f"{name}.md"
    return names


def file_stem(text: str) -> str:
    """A file name for ``text`` that every common disk accepts: letters, marks and digits of any script
    are kept (NFC), every other character becomes ``_``; no leading or trailing dot, no name Windows
    reserves (``CON``, ``NUL``, ...), at most :data:`MAX_NAME_BYTES` bytes of UTF-8.

    >>> file_stem("../x\\nCON"), file_stem("nul"), file_stem("Zoë (2)"), file_stem("..")
    ('_x_CON', 'nul_', 'Zoë__2_', '_')
    """
    kept = "".join(ch if ch in "._-" or unicodedata.category(ch)[0] in "LMN" else "_"
                   for ch in unicodedata.normalize("NFC", str(text)))
    kept = kept.strip(".") or "_"
    while len(kept.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        kept = kept[:-1]
    if kept.split(".")[0].upper() in _RESERVED:
        kept += "_"
    return kept


MAX_NAME_BYTES = 120
"""A feedback file's name, in UTF-8 bytes (disks allow 255; a Chinese character takes 3)."""
_RESERVED = frozenset({"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(10)), *(f"LPT{i}" for i in range(10))})


def _disk_key(name: str) -> str:
    return unicodedata.normalize("NFC", name).casefold()


def feedback_index_csv(names: dict[str, str], canvas_ids: Mapping[str, str] | None = None) -> str:
    """``feedback/index.csv``: which feedback file belongs to which student (the raw ``student_id``), and, for a
    Canvas download, the student's Canvas user id (SpeedGrader finds a student by it; walkthrough W25)."""
    # a file name has only letters, marks, digits and ._- (file_stem): raw as well, so it names the file exactly
    if not canvas_ids:
        return _csv([("file", "student_id"), *((Raw(file), Raw(student)) for student, file in names.items())])
    return _csv([("file", "student_id", "canvas_user_id"),
                 *((Raw(file), Raw(student), canvas_ids.get(student, "")) for student, file in names.items())])


def write_all(out_dir: Path, rows: Sequence, students: Sequence[str], exercise_ids: Sequence[str],
              canvas_ids: Mapping[str, str] | None = None) -> None:
    """Write every report into ``out_dir``. The feedback files an earlier run wrote there (those its
    ``feedback/index.csv`` lists) for students who are not in this run are removed, so that no stale
    feedback stays beside the new; a file the index does not list is never touched."""
    atomic_write(out_dir / "results.csv", results_csv(rows))
    atomic_write(out_dir / "grades.csv", grades_csv(rows, students, exercise_ids))
    names = feedback_files(students)
    for stale in earlier_feedback(out_dir / "feedback") - set(names.values()):
        (out_dir / "feedback" / stale).unlink(missing_ok=True)
    for student, file in names.items():
        atomic_write(out_dir / "feedback" / file, feedback_md(student, rows))
    atomic_write(out_dir / "feedback" / "index.csv", feedback_index_csv(names, canvas_ids))


def earlier_feedback(folder: Path) -> set[str]:
    """The feedback file names ``folder/index.csv`` lists (an earlier run's), each a plain ``.md`` name."""
    try:
        table = list(csv.reader(io.StringIO((folder / "index.csv").read_text(encoding="utf-8",
                                                                             errors="surrogateescape"))))
    except OSError:
        return set()
    return {line[0] for line in table[1:] if line and line[0].endswith(".md") and line[0] == Path(line[0]).name
            and not line[0].startswith(".") and (folder / line[0]).is_file()}


def plural(count: int, word: str, many: str | None = None) -> str:
    """``"1 student"``, ``"2 students"``.

    >>> plural(1, "student"), plural(2, "student"), plural(0, "entry", "entries")
    ('1 student', '2 students', '0 entries')
    """
    return f"{count} {word if count == 1 else (many or word + 's')}"


def summary_table(rows: Sequence, exercise_ids: Sequence[str]) -> str:
    """Per exercise: how many students got each status, and the mean points."""
    statuses = tuple(Status)
    header = ["exercise", *statuses, "mean"]
    body = []
    for exercise_id in exercise_ids:
        mine = [r for r in rows if r.exercise == exercise_id]
        counts = [sum(r.status == s for r in mine) for s in statuses]
        mean = float(sum(r.points for r in mine)) / len(mine) if mine else 0.0
        maximum = mine[0].max_points if mine else 0
        body.append([exercise_id, *map(str, counts), f"{mean:.2f}/{maximum}"])
    widths = [max(len(str(x)) for x in column) for column in zip(header, *body)]
    fmt = "  ".join(f"{{:<{w}}}" if i == 0 else f"{{:>{w}}}" for i, w in enumerate(widths))
    return "\n".join([fmt.format(*header), *(fmt.format(*line) for line in body)])
