"""Which copy of an exercise is graded when a student handed it in more than once.

**One tie rule, for every layout** (a folder, a zip, a Canvas download, Gradescope's upload): the copies
are the notebooks holding the exercise, never cells merged across notebooks, and they are ordered by

1. the file's modification time (a zip's member: the time the zip stores): the newest is graded;
2. at equal times, Canvas's submission id, the second number of a download's name
   (``<name>_[LATE_]<user id>_<submission id>_<file>``): the higher is the later submission;
3. then Canvas's resubmission suffix (``02_x-1.ipynb`` beside ``02_x.ipynb``): the higher ``-N`` is newer;
4. then the notebook named like the chapter's own, then the name that sorts first.

Every copy not graded is reported with the rule that decided (an ``unplaced`` row). Of several cells
for the exercise inside the one notebook graded, the last is graded, as running it from the top would
define it last.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import PurePosixPath
from typing import Any

from utils.grading.intake import CANVAS_NAME
from utils.i18n.messages import tr


def choose_copy(cells: list[tuple[str, str]], modified: Mapping[str, float], ex: Any
                ) -> tuple[str, list[tuple[str, str]]]:
    """The source to grade when a student handed ``ex`` in more than once (``cells``: ``(file, source)``),
    and ``(file, why)`` for each copy that is not graded (the module's docstring gives the rule)."""
    files = by_preference(cells, modified, ex)
    chosen = files[0]
    mine = [source for file, source in cells if file == chosen]
    others = []
    for file in files[1:]:
        if modified.get(file, 0.0) < modified.get(chosen, 0.0):
            others.append((file, tr("{file} holds it too and was modified later; the newest copy is graded",
                                    file=chosen)))
        elif canvas_submission(file) < canvas_submission(chosen):
            others.append((file, tr("{file} holds it too, with the same file time, and is Canvas's later submission "
                                    "(a higher submission id, the second number in its name); the newest copy is "
                                    "graded", file=chosen)))
        elif resubmission(file, files, ex) < resubmission(chosen, files, ex):
            others.append((file, tr("{file} holds it too and is Canvas's later resubmission of it (same file time, "
                                    "a higher -N in its name); the newest copy is graded", file=chosen)))
        else:
            others.append((file, tr("{file} holds it too, modified at the same time; the copy in the notebook "
                                    "named like the chapter, else the first by name, is graded", file=chosen)))
    if len(mine) > 1:
        others.append((chosen, tr("this notebook has {count} cells for it; the last one is graded, as running the "
                                  "notebook from the top would define it last", count=len(mine))))
    return mine[-1], others


def by_preference(cells: list[tuple[str, str]], modified: Mapping[str, float], ex: Any) -> list[str]:
    """The files holding ``cells``, the one :func:`choose_copy` grades first."""
    files = {file for file, _source in cells}
    return sorted(files, key=lambda file: (-modified.get(file, 0.0), -canvas_submission(file),
                                           -resubmission(file, files, ex), base_name(file) != ex.notebook, file))


def chosen_file(cells: list[tuple[str, str]], modified: Mapping[str, float], ex: Any) -> str:
    """The file whose copy of ``ex`` :func:`choose_copy` grades."""
    return by_preference(cells, modified, ex)[0]


def _canvas(file: str) -> re.Match | None:
    """The Canvas download name ``file`` is, or is a zip member of (a download is one flat folder)."""
    label = file.split(":", 1)[0]
    return CANVAS_NAME.match(label) if "/" not in label and "\\" not in label else None


def canvas_submission(file: str) -> int:
    """Canvas's submission id in ``file``'s download name (``bob_102_10020_02_x.ipynb``: 10020), else -1."""
    found = _canvas(file)
    return int(found["submission"]) if found else -1


def resubmission(file: str, files: Iterable[str], ex: Any) -> int:
    """N for Canvas's ``02_x-N.ipynb`` beside a copy named ``02_x.ipynb`` (or named like the chapter), else 0."""
    m = re.fullmatch(r"(.+)-(\d{1,4})(\.ipynb)", base_name(file), re.IGNORECASE)
    return int(m[2]) if m and m[1] + m[3] in {ex.notebook, *map(base_name, files)} else 0


def base_name(file: str) -> str:
    """``02_sdpa.ipynb`` for ``alice.zip:work/02_sdpa.ipynb``, ``chapters/02_sdpa.ipynb`` or Canvas's
    ``bob_102_10020_02_sdpa.ipynb``: the name the student gave the notebook."""
    if ":" not in file and (found := _canvas(file)):
        return found["original"]
    return PurePosixPath(file.rsplit(":", 1)[-1].replace("\\", "/")).name


__all__ = ["base_name", "by_preference", "canvas_submission", "choose_copy", "chosen_file", "resubmission"]
