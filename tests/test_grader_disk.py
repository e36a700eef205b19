"""A student who fills the disk costs nobody else a grade (red team R3, issue 35).

``RLIMIT_FSIZE`` bounds each file, not their number. The red team's cell wrote 64 MB files into its own
work folder until the disk was full, then held it: a classmate graded at the same time lost every
exercise (the grader could not write that classmate's inputs, and one of them read as the classmate's own
error). Where the sandbox has private mounts, each student's unit folder is now a ``tmpfs`` of its own,
``--memory`` in size: what a student writes there is RAM the bound covers, on no disk the grader shares.

The batch works in a small ``tmpfs`` (``engine.TMP_PARENT``) standing for a nearly full disk.
"""

from __future__ import annotations

import os
import subprocess

import grader_fixtures as gf
import pytest

from utils.grading import batch, engine, isolation

pytestmark = pytest.mark.sandbox  # grades batches in sandboxed workers: make unit, not make quick

FILLER = (
    "import os, time\nhome = os.environ['HOME']\nn = 0\ntry:\n    while True:\n"
    "        with open(home + '/f%d' % n, 'wb') as f:\n            for _ in range(64):\n"
    "                f.write(bytes(2**20))\n        n += 1\nexcept OSError:\n    pass\n"
    "time.sleep(30)\n" + gf.TOY_SOLUTIONS["ch1.add_one"]
)
SLOW = "import time\ntime.sleep(6)\n" + gf.TOY_SOLUTIONS["ch1.add_one"]  # honest, and still running meanwhile


@pytest.fixture
def small_disk(tmp_path, monkeypatch):
    if os.geteuid() != 0 or "mounts" not in isolation.isolation().extras:
        pytest.skip("needs root and a sandbox with private mounts")
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=300m", "tmpfs", str(disk)], check=True)
    monkeypatch.setattr(engine, "TMP_PARENT", str(disk))
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_student_filling_the_disk_leaves_a_classmate_graded_at_the_same_time_untouched(tmp_path, small_disk):
    subs = tmp_path / "subs"
    gf.student(subs, "filler", {"a.ipynb": gf.toy_submission({"ch1.add_one": FILLER})})
    gf.student(subs, "slow", {"a.ipynb": gf.toy_submission({"ch1.add_one": SLOW})})
    with gf.static_check_off():  # os, time and open(..., 'wb') meet the sandbox, not the static check
        summary = batch.grade(subs, tmp_path / "out", jobs=2, timeout=8, seed=4,
                              course_root=gf.make_toy_course(tmp_path / "course"), registry=gf.TOY_REGISTRY,
                              memory_mb=512, progress=False)
    rows = gf.exercise_rows(tmp_path / "out")
    assert summary["totals"]["slow"] == sum(gf.TOY_POINTS.values()), {k: v for k, v in rows.items() if k[0] == "slow"}
    for exercise in ("ch1.attend", "ch1.total"):  # the filler's own other cells are graded too
        assert rows[("filler", exercise)]["status"] == "passed", rows[("filler", exercise)]
    assert not [line for line in open("/proc/self/mounts", encoding="utf-8") if str(small_disk) + "/" in line]
