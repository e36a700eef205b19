"""Seconds each test file took, so that ``make unit`` hands out the longest files first.

``make unit`` gives whole files to the xdist workers in the order ``tests/conftest.py`` sets
(``--dist loadfile --no-loadscope-reorder``). Handing out the longest first (a longest-processing-time-first
schedule) keeps one long file from starting last while the other workers idle. The seconds live in
``file_seconds.json``; a file missing there counts as :data:`DEFAULT_SLOW` when it holds a slow test,
:data:`DEFAULT_HEAVY` when it uses a module-scoped fixture, else 0. Stale numbers cost speed, never a result.

Refresh them from a run with ``--durations=0``::

    make unit PYTEST_ARGS=--durations=0 > /tmp/unit.txt; python tests/file_seconds.py /tmp/unit.txt
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

FILE = Path(__file__).with_name("file_seconds.json")
DEFAULT_SLOW = 60.0
DEFAULT_HEAVY = 20.0
_LINE = re.compile(r"\s*([\d.]+)s (?:call|setup|teardown)\s+(tests/\S+?\.py)::")


def recorded() -> dict[str, float]:
    """``{"tests/test_x.py": seconds}`` from :data:`FILE` ({} when it is missing or unreadable)."""
    try:
        data = json.loads(FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.items()} if isinstance(data, dict) else {}


def expected_seconds(rel: str, slow: bool, heavy: bool, seconds: dict[str, float]) -> float:
    """How long the file ``rel`` (``tests/test_x.py``) is expected to take.

    >>> expected_seconds("tests/test_a.py", False, False, {"tests/test_a.py": 12.5})
    12.5
    >>> expected_seconds("tests/test_new.py", True, False, {}), expected_seconds("tests/test_b.py", False, True, {})
    (60.0, 20.0)
    """
    if rel in seconds:
        return seconds[rel]
    return DEFAULT_SLOW if slow else DEFAULT_HEAVY if heavy else 0.0


def parse(text: str) -> dict[str, float]:
    """Seconds per file summed from pytest's ``--durations=0`` lines.

    >>> parse("12.00s call     tests/test_a.py::test_x\\n3.50s setup    tests/test_a.py::test_y\\n")
    {'tests/test_a.py': 15.5}
    """
    total: Counter[str] = Counter()
    for line in text.splitlines():
        match = _LINE.match(line)
        if match:
            total[match.group(2)] += float(match.group(1))
    return {name: round(value, 1) for name, value in sorted(total.items())}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python tests/file_seconds.py PYTEST_OUTPUT_WITH_DURATIONS", file=sys.stderr)
        return 2
    found = parse(Path(argv[0]).read_text(encoding="utf-8"))
    if not found:
        print(f"no --durations lines in {argv[0]}", file=sys.stderr)
        return 1
    FILE.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {FILE} ({len(found)} files, {sum(found.values()):.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
