"""The README's points-per-chapter table (what an instructor types into Canvas's or Gradescope's points)
equals the course's points: the sum of each chapter's exercises in utils/grading/exercises.json."""

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
HEADER = "| Chapter (Canvas assignment name) | Points |"


def course_points() -> dict[str, int]:
    """Chapter notebook without ``.ipynb`` -> the sum of its exercises' points, in course order."""
    manifest = json.loads((ROOT / "utils" / "grading" / "exercises.json").read_text(encoding="utf-8"))
    points: dict[str, int] = {}
    for exercise in manifest["exercises"]:
        chapter = exercise["notebook"].removesuffix(".ipynb")
        points[chapter] = points.get(chapter, 0) + exercise["points"]
    return points


def readme_points(text: str = README) -> tuple[dict[str, int], int | None]:
    """The table's rows (chapter -> points, in README order) and its total row's points."""
    assert text.count(HEADER) == 1, f"README.md needs one points table headed {HEADER!r}"
    lines = text.split(HEADER, 1)[1].splitlines()[2:]  # past the header and its |---| line
    rows: dict[str, int] = {}
    total = None
    for line in lines:
        if not line.startswith("|"):
            break
        name, value = (cell.strip() for cell in line.strip("|").split("|"))
        if found := re.fullmatch(r"`(\d\d_[a-z0-9_]+)`", name):
            assert found[1] not in rows, f"README points table names {found[1]} twice"
            rows[found[1]] = int(value)
        else:
            assert name.lower().startswith("all"), f"README points table: unexpected row {line!r}"
            total = int(value)
    return rows, total


def test_readme_points_table_equals_the_course_s_points():
    rows, total = readme_points()
    points = course_points()
    assert list(rows.items()) == list(points.items()), f"README table {rows} != the course's points {points}"
    assert total == sum(points.values()), f"README table's total {total} != {sum(points.values())}"


def test_the_table_reader_sees_a_wrong_row():
    """The check above cannot pass by reading nothing: one changed number is found."""
    rows, _total = readme_points()
    first = next(iter(rows))
    wrong = README.replace(f"| `{first}` | {rows[first]} |", f"| `{first}` | {rows[first] + 1} |")
    assert wrong != README, f"the row of {first} is not written as | `{first}` | N |"
    assert readme_points(wrong)[0][first] == rows[first] + 1
