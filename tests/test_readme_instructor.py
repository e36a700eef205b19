"""The README's instructor section has the shape issue 35 asked for: a quick start per workflow, each a short
block of commands before any detail, the sections an instructor looks for, and the sandbox's details last.

A README edit that drops a section, grows a quick start's commands past a screenful or moves the sandbox's
details above the quick starts fails here, naming the section.
"""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
QUICK_STARTS = ("plain CSV (any gradebook)", "Canvas", "Gradescope", "nbgrader")
WANTED = ("What to tell students about the exercise cells", "Late and duplicate submissions",
          "Returning feedback through Canvas", "Run time per student",
          "nbgrader: the kernel, what it guarantees, partial credit", "Gradescope: what the autograder guarantees")
MAX_COMMAND_LINES = 12


def _sections() -> list[tuple[str, str]]:
    text = README.read_text(encoding="utf-8")
    instructors = text.split("## Instructors: handing out and grading", 1)[1].split("\n## ", 1)[0]
    parts = re.split(r"^### (.+)$", instructors, flags=re.MULTILINE)
    return list(zip(parts[1::2], parts[2::2]))


def test_each_workflow_has_a_short_quick_start_before_any_detail():
    sections = _sections()
    titles = [title for title, _ in sections]
    for name in QUICK_STARTS:
        title = f"Quick start: {name}"
        assert title in titles, f"README: no section '### {title}'"
        body = dict(sections)[title]
        block = re.search(r"```bash\n(.*?)```", body, flags=re.DOTALL)
        before = body[:block.start()].strip().splitlines() if block else []
        assert block and len(before) <= 2, f"'{title}' does not start with its commands"
        commands = [line for line in block.group(1).splitlines() if line.strip()]
        assert len(commands) <= MAX_COMMAND_LINES, f"'{title}': {len(commands)} lines of commands"
    assert titles.index("The sandbox") > max(titles.index(f"Quick start: {name}") for name in QUICK_STARTS)


def test_the_sections_an_instructor_looks_for_are_there():
    titles = [title for title, _ in _sections()]
    missing = [name for name in WANTED if name not in titles]
    assert not missing, f"README's instructor section lacks: {missing}"
    kernel = dict(_sections())["nbgrader: the kernel, what it guarantees, partial credit"]
    assert "ipykernel install --prefix" in kernel and "JUPYTER_PATH" in kernel  # the kernel recipe
    assert "partial credit" in kernel
