"""One student is one unit of failure (issue 15, findings 1-4): whatever a student's notebook does to the
grader, the batch completes, every file is written, and honest classmates keep full marks.

Each test grades a small class: two honest students and the attacker(s). The batch runs in a thread
with a bound on its wall time, so a hang fails the test instead of hanging the suite.
"""

from __future__ import annotations

import contextlib
import csv
import os
import stat
import tempfile
import threading
import time
from pathlib import Path

import grader_fixtures as gf
import pytest
import torch

from utils.exercises.common import Outcome
from utils.grading import batch, course, engine, files, sandbox, serialize, unit

pytestmark = pytest.mark.sandbox  # grades batches in sandboxed workers: make unit, not make quick

TIMEOUT = 4
HONEST = ("honest_a", "honest_b")
BATCH_LIMIT = 900  # seconds: generous (a 45-student batch took 175 s on a loaded machine); a hang is forever


def rows_of(out: Path) -> dict[tuple[str, str], dict[str, str]]:
    with open(out / "results.csv", newline="", encoding="utf-8") as handle:
        return {(r["student"], r["exercise"]): r for r in csv.DictReader(handle)}


def grade_class(tmp: Path, attackers: dict[str, dict[str, str]], *, jobs: int = 2, extra=None,
                static_check: bool = True) -> dict:
    """Grade the honest students and ``attackers`` (exercise id -> cell source overrides); check that the
    batch completed, wrote every file and kept the honest students' full marks. ``extra(subs)`` may add
    files to the submissions folder. ``static_check=False``: an attack cell that imports ``os``, ``json``,
    ``threading``... or writes a file, which the static check refuses, meets the sandbox's run-time defences
    instead (:func:`grader_fixtures.static_check_off`)."""
    subs = tmp / "subs"
    for name in HONEST:
        gf.student(subs, name, {"01_toy.ipynb": gf.toy_submission()})
    for name, overrides in attackers.items():
        gf.student(subs, name, {"chapter.ipynb": gf.toy_submission(overrides)})
    if extra:
        extra(subs)
    course_root = gf.make_toy_course(tmp / "course")
    box: dict = {}

    def run() -> None:
        try:
            with contextlib.nullcontext() if static_check else gf.static_check_off():
                box["summary"] = batch.grade(subs, tmp / "out", jobs=jobs, timeout=TIMEOUT, seed=3,
                                             course_root=course_root, registry=gf.TOY_REGISTRY, memory_mb=512,
                                             progress=False)
        except BaseException as exc:  # noqa: BLE001  (the point: nothing may escape)
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(BATCH_LIMIT)
    assert not thread.is_alive(), f"the batch hung for {BATCH_LIMIT} s"
    assert "error" not in box, f"the batch crashed: {box['error']!r}"
    rows = rows_of(tmp / "out")
    students = box["summary"]["students"]
    graded = {key: r for key, r in rows.items() if r["status"] != "unplaced"}  # files not graded: rows of their own
    assert len(graded) == len(students) * len(gf.TOY_POINTS)
    assert len(list((tmp / "out" / "feedback").glob("*.md"))) == len(students)
    for name in HONEST:
        assert box["summary"]["totals"][name] == 6, [rows[(name, e)] for e in gf.TOY_POINTS]
    return {"rows": rows, "summary": box["summary"], "out": tmp / "out"}


def row(batch: dict, student: str, exercise: str = "ch1.add_one") -> dict[str, str]:
    return batch["rows"][(student, exercise)]


@pytest.fixture
def private_tmp(monkeypatch):
    """The grader's work folders go into a folder of this test's own, so leftovers can be counted."""
    parent = Path(tempfile.mkdtemp(prefix="grader-test-"))
    os.chmod(parent, 0o711)
    monkeypatch.setattr(engine, "TMP_PARENT", str(parent), raising=False)
    yield parent
    files.remove_tree(parent)


# --------------------------------------------------------------------------------------------------
# Finding 1: a deep folder tree in the work directory
# --------------------------------------------------------------------------------------------------

DEEP_TREE = (
    "import os\n_fd = os.open('.', os.O_RDONLY)\n"
    "for _ in range(2000):\n    os.mkdir('d', dir_fd=_fd)\n    _next = os.open('d', os.O_RDONLY, dir_fd=_fd)\n"
    "    os.close(_fd)\n    _fd = _next\n"
    "def add_one(x):\n    return x + 1\n"
)


def test_deep_folder_tree_costs_nothing_and_is_removed(tmp_path, private_tmp):
    batch = grade_class(tmp_path, {"deep": {"ch1.add_one": DEEP_TREE}}, static_check=False)
    assert all(row(batch, "deep", e)["status"] == "passed" for e in gf.TOY_POINTS)
    assert list(private_tmp.iterdir()) == [], "the grader left its work folder behind"


def test_remove_tree_removes_a_deep_tree_of_long_names_without_recursion(tmp_path):
    top = tmp_path / "top"
    top.mkdir()
    fd = os.open(top, os.O_RDONLY)
    for level in range(1500):  # deeper than the recursion limit, and longer than PATH_MAX as a path
        name = "n" * 200
        os.mkdir(name, dir_fd=fd)
        if level % 100 == 0:
            os.mkfifo("fifo", dir_fd=fd)
            os.symlink("/", "root_link", dir_fd=fd)
        nxt = os.open(name, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = nxt
    os.close(fd)
    files.remove_tree(top)
    assert not top.exists() and Path("/").exists()


# --------------------------------------------------------------------------------------------------
# Finding 2: a small JSON file that names one big .npy many times
# --------------------------------------------------------------------------------------------------

REPEATED_NPY = (  # writes its own results where the grader reads them, then ends its process
    "import json, os\nimport numpy as np\n"
    "def add_one(x):\n    os.makedirs('../out/0', exist_ok=True)\n"
    "    np.save('../out/0/0.npy', np.zeros(2**18, dtype=np.float32))\n"
    "    ref = {'t': 'tensor', 'f': '0.npy', 'dtype': 'float32'}\n"
    "    record = {'output': {'t': 'tuple', 'v': [ref] * 64}, 'error': None, 'mutated': [], 'forbidden': None}\n"
    "    with open('../out/0/outcomes.json', 'w') as handle:\n        handle.write(json.dumps([record] * 3))\n"
    "    os._exit(0)\n"
)


def test_repeated_npy_references_are_rejected_before_loading(tmp_path):
    batch = grade_class(tmp_path, {"repeater": {"ch1.add_one": REPEATED_NPY}}, static_check=False)
    got = row(batch, "repeater")
    assert got["status"] == "error" and "more than once" in got["feedback"], got
    assert row(batch, "repeater", "ch1.total")["status"] == "passed"


def test_outcome_records_and_bytes_are_bounded_before_decoding(tmp_path, monkeypatch):
    folder = tmp_path / "o"
    serialize.dump_outcomes([Outcome(output=torch.ones(1000)) for _ in range(4)], folder)
    assert len(serialize.load_outcomes(folder, [], max_records=4)) == 4
    with pytest.raises(serialize.DecodeError, match="records"):
        serialize.load_outcomes(folder, [], max_records=3)
    monkeypatch.setattr(serialize, "MAX_OUTCOME_BYTES", 3 * 4000)
    with pytest.raises(serialize.DecodeError, match="in total"):
        serialize.load_outcomes(folder, [], max_records=4)


# --------------------------------------------------------------------------------------------------
# Finding 3: files swapped for FIFOs between the grader's check and its read
# --------------------------------------------------------------------------------------------------


def _in_thread(fn, limit: float = 10.0):
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(limit)
    assert not thread.is_alive(), "reading hung on a FIFO"
    return box


def test_reading_a_fifo_that_passed_the_path_checks_does_not_hang(tmp_path, monkeypatch):
    """The race made deterministic: every path check says "a small regular file", the open finds a FIFO."""
    folder = tmp_path / "o"
    serialize.dump_outcomes([Outcome(output=torch.ones(3))], folder)
    for name in ("0.npy", "outcomes.json"):
        victim = folder / name
        saved = victim.read_bytes()
        victim.unlink()
        os.mkfifo(victim)
        monkeypatch.setattr(Path, "is_file", lambda self: True)
        monkeypatch.setattr(Path, "is_symlink", lambda self: False)
        box = _in_thread(lambda: serialize.load_outcomes(folder, []))
        monkeypatch.undo()
        assert isinstance(box.get("error"), serialize.DecodeError), box
        victim.unlink()
        victim.write_bytes(saved)


FIFO_SWAPPER = (
    "import os, threading\n"
    "def _swap():\n"
    "    while True:\n"
    "        for i in range(3):\n"
    "            for name in ('outcomes.json', '0.npy', 'load_error.json'):\n"
    "                path = f'../out/{i}/{name}'\n"
    "                try:\n"
    "                    if not os.path.exists(path) or os.path.isfile(path):\n"
    "                        os.makedirs(os.path.dirname(path), exist_ok=True)\n"
    "                        tmp = path + '.fifo'\n"
    "                        os.mkfifo(tmp)\n"
    "                        os.replace(tmp, path)\n"
    "                except OSError:\n"
    "                    pass\n"
    "threading.Thread(target=_swap, daemon=True).start()\n"
    "def add_one(x):\n    return x + 1\n"
)


def test_fifo_swapping_thread_cannot_hang_the_batch(tmp_path):
    batch = grade_class(tmp_path, {"swapper": {"ch1.add_one": FIFO_SWAPPER}}, static_check=False)
    # grade_class asserts that the batch completed and the honest students kept their marks; the
    # swapper's own busy thread may cost it the exercise (timeout on a loaded machine), never the batch
    assert row(batch, "swapper")["status"] in ("passed", "error", "timeout")


def test_the_worker_is_stopped_while_the_grader_reads_its_files(tmp_path, monkeypatch):
    """Every process of the sandbox is stopped (or gone) whenever the trusted side reads outcome files."""
    marker = f"GRADER_SANDBOX={os.getpid()}-".encode()
    seen: list[list[str]] = []
    original = unit._collect

    own_namespace = os.readlink("/proc/self/ns/pid")
    namespaced = bool(sandbox.isolation().prefix)  # then `unshare` (trusted, outside) carries the marker too

    def states() -> list[str]:
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as env:  # a forked worker: by its uid
                    if not any(item.startswith(marker) for item in env.read().split(b"\0")) and not (
                            sandbox.isolation().uid and os.stat(f"/proc/{entry}").st_uid == sandbox.sandbox_uid(0)):
                        continue
                if namespaced and os.readlink(f"/proc/{entry}/ns/pid") == own_namespace:
                    continue
                for task in os.listdir(f"/proc/{entry}/task"):
                    with open(f"/proc/{entry}/task/{task}/stat", encoding="ascii") as handle:
                        found.append(handle.read().rsplit(")", 1)[1].split()[0])
            except OSError:
                continue
        return found

    def watched(*args, **kwargs):
        seen.append(states())
        return original(*args, **kwargs)

    monkeypatch.setattr(unit, "_collect", watched)
    thread_source = ("import threading, time\n"
                     "threading.Thread(target=lambda: [time.sleep(0.001) for _ in iter(int, 1)], daemon=True).start()\n"
                     "def add_one(x):\n    return x + 1\n")
    grade_class(tmp_path, {"threaded": {"ch1.add_one": thread_source}}, jobs=1, static_check=False)
    assert seen and any(seen), "no sandbox process was found while collecting: this test proves nothing"
    running = [s for s in seen if set(s) - {"T", "t", "Z", "X"}]
    assert not running, f"sandbox threads ran while the grader read their files: {running[:3]}"


# --------------------------------------------------------------------------------------------------
# Finding 4: a FIFO named like a notebook in a submission folder
# --------------------------------------------------------------------------------------------------


def test_fifo_notebook_in_a_submission_is_invalid_and_does_not_hang(tmp_path):
    def add_fifos(subs: Path) -> None:
        (subs / "fifo_only").mkdir()
        os.mkfifo(subs / "fifo_only" / "x.ipynb")
        gf.student(subs, "fifo_and_real", {"real.ipynb": gf.toy_submission()})
        os.mkfifo(subs / "fifo_and_real" / "x.ipynb")

    batch = grade_class(tmp_path, {}, extra=add_fifos)
    for eid in gf.TOY_POINTS:
        got = row(batch, "fifo_only", eid)
        assert got["status"] == "invalid" and "not a regular file" in got["feedback"], got
        assert row(batch, "fifo_and_real", eid)["status"] == "passed"
    # beside a real notebook, the FIFO is not dropped silently: a row of its own says it was not graded
    unplaced = [r for (student, _), r in batch["rows"].items()
                if student == "fifo_and_real" and r["status"] == "unplaced"]
    assert len(unplaced) == 1 and "not a regular file" in unplaced[0]["feedback"], unplaced


def test_entries_that_are_not_student_folders_are_reported(tmp_path):
    subs = tmp_path / "subs"
    gf.student(subs, ".hidden", {"a.ipynb": gf.toy_submission()})
    (subs / "notes.txt").write_text("x")
    assert course.skipped_entries(subs) == [".hidden (a folder whose name starts with '.')", "notes.txt (not a folder)"]


def test_read_notebook_refuses_fifos_devices_and_links_quickly(tmp_path):
    os.mkfifo(tmp_path / "fifo.ipynb")
    (tmp_path / "link.ipynb").symlink_to("/dev/zero")
    for path in (tmp_path / "fifo.ipynb", tmp_path / "link.ipynb"):
        box = _in_thread(lambda p=path: course.read_notebook(p))
        assert isinstance(box.get("error"), course.InvalidNotebook), box
    assert stat.S_ISFIFO(os.lstat(tmp_path / "fifo.ipynb").st_mode)


# --------------------------------------------------------------------------------------------------
# The watchdog: an exception, a MemoryError or a hang on the trusted side costs one student only
# --------------------------------------------------------------------------------------------------


def test_a_failing_or_hanging_unit_becomes_rows_with_a_reason(tmp_path, monkeypatch):
    release = threading.Event()
    original = unit._collect

    def hostile(task, *args, **kwargs):
        if "# CRASH" in task.source:
            raise MemoryError("the parent ran out of memory")
        if "# EXPLODE" in task.source:
            raise RecursionError("maximum recursion depth exceeded")
        if "# HANG" in task.source:
            release.wait(600)
        return original(task, *args, **kwargs)

    monkeypatch.setattr(unit, "_collect", hostile)
    monkeypatch.setattr(unit, "COLLECT_SECONDS", 8)
    cell = gf.TOY_SOLUTIONS["ch1.add_one"]
    started = time.monotonic()
    try:
        batch = grade_class(tmp_path, {name: {"ch1.add_one": cell + f"# {name.upper()}\n"}
                                       for name in ("crash", "explode", "hang")})
    finally:
        release.set()
    assert time.monotonic() - started < BATCH_LIMIT
    for name, word in (("crash", "MemoryError"), ("explode", "RecursionError"), ("hang", "watchdog")):
        got = row(batch, name)
        assert got["status"] == "error" and word in got["feedback"], got
        assert got["points"] == "0"


# --------------------------------------------------------------------------------------------------
# Finding 14: self-harm gets a message saying what happened, and costs no later exercise
# --------------------------------------------------------------------------------------------------

FD_EXHAUSTION = (
    "import os, resource\n_keep = []\n"
    "def add_one(x):\n"
    "    try:\n        while True:\n            _keep.append(os.open('/dev/null', os.O_RDONLY))\n"
    "    except OSError:\n        pass\n"
    "    return x + 1\n"
)
FORGED_STATUS = (  # the status pipe's number is in the worker's argv; write what the grader waits for
    "import os, sys\n"
    "for fd in range(3, 64):\n"
    "    try:\n        os.write(fd, b'done 0\\ndone 1\\ndone 2\\ngarbage\\n')\n    except OSError:\n        pass\n"
    "def add_one(x):\n    return x + 1\n"
)


def test_fd_exhaustion_and_forged_status_lines_cost_only_their_own_exercise(tmp_path):
    batch = grade_class(tmp_path, {"fds": {"ch1.add_one": FD_EXHAUSTION},
                                   "forger": {"ch1.add_one": FORGED_STATUS}}, static_check=False)
    got = row(batch, "fds")
    assert got["status"] == "error" and "Too many open files" in got["feedback"], got
    for student in ("fds", "forger"):  # later exercises ran in fresh processes, unaffected
        for eid in ("ch1.attend", "ch1.total"):
            assert row(batch, student, eid)["status"] == "passed", (student, row(batch, student, eid))
        assert "memory" not in row(batch, student)["feedback"]
    assert row(batch, "forger")["status"] in ("passed", "error")



def test_the_grader_starts_without_jsonschema_s_iri_grammar_and_still_validates_notebooks(tmp_path):
    """utils.grading.course keeps jsonschema from building its IRI parser (lark), a cost at every grader and
    Gradescope start; nbformat still reads and validates a notebook, and still refuses a broken one."""
    import subprocess
    import sys

    broken = tmp_path / "broken.ipynb"
    broken.write_text('{"cells": [{"cell_type": "code"}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    script = (
        "import sys\n"
        "import utils.grading.course\n"
        "import nbformat\n"
        "nbformat.validate(nbformat.read(sys.argv[1], as_version=4))\n"
        "try:\n"
        "    nbformat.validate(nbformat.read(sys.argv[2], as_version=4))\n"
        "except nbformat.ValidationError:\n"
        "    print('broken refused')\n"
        "print(sorted(m for m in ('lark', 'rfc3987_syntax', 'jsonschema') if sys.modules.get(m)))\n"
    )
    repo = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-c", script, str(repo / "solutions" / "01_queries_keys_values.ipynb"),
                           str(broken)], capture_output=True, text=True, timeout=120, cwd=repo)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["broken refused", "['jsonschema']"]
