"""``make unit`` hands out the longest test files first (tests/conftest.py, tests/file_seconds.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import file_seconds

REPO = Path(__file__).resolve().parents[1]


def test_durations_are_summed_per_file_and_unknown_files_get_a_default():
    text = ("10.00s call     tests/test_a.py::test_x\n2.50s setup    tests/test_a.py::test_y\n"
            "1.00s call     tests/test_b.py::test_z[1]\n(3 durations < 0.005s hidden.)\n")
    assert file_seconds.parse(text) == {"tests/test_a.py": 12.5, "tests/test_b.py": 1.0}
    assert file_seconds.expected_seconds("tests/test_a.py", True, True, {"tests/test_a.py": 3.0}) == 3.0
    assert file_seconds.expected_seconds("tests/test_c.py", True, False, {}) == file_seconds.DEFAULT_SLOW
    assert file_seconds.expected_seconds("tests/test_c.py", False, True, {}) == file_seconds.DEFAULT_HEAVY
    assert file_seconds.expected_seconds("tests/test_c.py", False, False, {}) == 0.0


def test_every_recorded_file_exists_and_the_record_is_read():
    seconds = file_seconds.recorded()
    assert len(seconds) > 50 and all(value >= 0 for value in seconds.values())
    assert [name for name in seconds if not (REPO / name).is_file()] == []


def test_collection_puts_the_longest_recorded_files_first():
    seconds = file_seconds.recorded()
    files = ["tests/test_bad_input.py", "tests/test_file_seconds.py", "tests/test_nbgrader_export.py"]
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "-p", "no:randomly", *files], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    order = list(dict.fromkeys(line.split("::")[0] for line in done.stdout.splitlines() if "::" in line))
    expected = sorted(files, key=lambda name: -file_seconds.expected_seconds(name, False, False, seconds))
    assert order == expected and order[0] == "tests/test_nbgrader_export.py", order
