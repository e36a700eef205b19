"""The Python of an exercise cell that uses IPython's syntax: ``%%time`` on its first line, ``%timeit f(x)`` or
``!pip list`` on a line of their own (red team R20: a correct cell that runs in Jupyter scored 0, "syntax error
on line 1").

The grader runs Python, never IPython. A cell that parses as Python is graded as it is (``a\\n % b`` inside
brackets is Python's modulo). Otherwise a first line ``%%time``, ``%%timeit`` or ``%%capture`` (which run the
rest of the cell as Python) is dropped, and every line that starts, after its indentation, with ``%`` or ``!``
becomes ``pass`` at that indentation, so that line numbers and blocks stay as they were; the result is graded
when it parses, else the cell is, with its own syntax error. No magic and no shell command is ever run.
"""

from __future__ import annotations

import ast
import re

__all__ = ["PYTHON_CELL_MAGICS", "python_of"]

PYTHON_CELL_MAGICS = ("time", "timeit", "capture")
"""The cell magics whose body is Python run once or more: the body is graded, the magic line skipped."""
_CELL_MAGIC = re.compile(r"%%(\w+)[^\n]*")
_LINE_MAGIC = re.compile(r"([ \t]*)[%!][^\n]*")


def _parses(source: str) -> bool:
    try:
        ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def python_of(source: str) -> tuple[str, list[int]]:
    """``(the source to grade, the numbers of the lines skipped as IPython syntax)``.

    >>> python_of("%%time\\ndef f(x):\\n    !echo hi\\n    return x + 1\\n")
    ('\\ndef f(x):\\n    pass\\n    return x + 1\\n', [1, 3])
    >>> python_of("y = (2\\n % 3)\\n")  # Python already: graded as it is
    ('y = (2\\n % 3)\\n', [])
    >>> python_of("%%bash\\necho hi\\n")  # not Python under the magic either: its own syntax error stays
    ('%%bash\\necho hi\\n', [])
    """
    if _parses(source):
        return source, []
    lines = source.split("\n")
    skipped = []
    first = _CELL_MAGIC.fullmatch(lines[0].strip())
    if first:
        if first.group(1) not in PYTHON_CELL_MAGICS:
            return source, []
        lines[0] = ""
        skipped.append(1)
    for number, line in enumerate(lines[1:] if first else lines, start=2 if first else 1):
        match = _LINE_MAGIC.fullmatch(line)
        if match:
            lines[number - 1] = f"{match.group(1)}pass"
            skipped.append(number)
    python = "\n".join(lines)
    return (python, skipped) if skipped and _parses(python) else (source, [])
