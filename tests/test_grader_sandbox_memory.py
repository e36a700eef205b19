"""Memory is bounded per student, on all of its processes together (issue 35): a cell whose children
together hold more than ``--memory`` is ``memory``, though each child alone fits its own address-space
limit, and an honest classmate keeps full marks. Graded twice: with the bound this machine gives (a
cgroup where the grader may make one) and with the watchdog every machine has.

Scaled down from the red team's 6 children x 300 MB under ``--memory 512``: 4 children x 120 MB under 256.
"""

from __future__ import annotations

import csv
import dataclasses

import grader_fixtures as gf
import pytest

from utils.grading import batch, isolation, memory

pytestmark = pytest.mark.sandbox  # grades batches in sandboxed workers: make unit, not make quick

# Four children, each touching 120 MB and holding it a few seconds, started once per run of the cell
HOG = (
    "import os, time\nchildren = []\nfor _ in range(4):\n    pid = os.fork()\n    if pid == 0:\n"
    "        block = b'x' * (120 * 2**20)\n        time.sleep(3)\n        os._exit(0)\n    children.append(pid)\n"
    "for pid in children:\n    os.waitpid(pid, 0)\n" + gf.TOY_SOLUTIONS["ch1.add_one"]
)


def _grade(tmp, kind: str) -> dict:
    subs = tmp / "subs"
    gf.student(subs, "honest", {"a.ipynb": gf.toy_submission()})
    gf.student(subs, "hog", {"a.ipynb": gf.toy_submission({"ch1.add_one": HOG})})
    chosen = dataclasses.replace(isolation.isolation(), memory=kind)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(isolation, "_ISOLATION", chosen)
        with gf.static_check_off():  # os.fork and time.sleep meet the sandbox, not the static check
            summary = batch.grade(subs, tmp / "out", jobs=2, timeout=8, seed=2,
                                  course_root=gf.make_toy_course(tmp / "c"), registry=gf.TOY_REGISTRY, memory_mb=256,
                                  progress=False)
    with open(tmp / "out" / "results.csv", newline="", encoding="utf-8") as handle:
        rows = {(r["student"], r["exercise"]): r for r in csv.DictReader(handle)}
    return {"rows": rows, "summary": summary}


@pytest.fixture(scope="module", params=sorted({memory.kind(), "watch"}))
def graded(request, tmp_path_factory):
    return request.param, _grade(tmp_path_factory.mktemp(f"memory-{request.param}"), request.param)


def test_a_student_whose_processes_together_pass_the_bound_is_memory(graded):
    kind, result = graded
    row = result["rows"][("hog", "ch1.add_one")]
    assert row["status"] == "memory" and row["points"] == "0", (kind, row)
    for exercise in ("ch1.attend", "ch1.total"):
        assert result["rows"][("hog", exercise)]["status"] == "passed", (kind, exercise)
    assert result["summary"]["totals"]["honest"] == 6, kind


def test_the_bound_in_force_is_named():
    chosen = isolation.isolation()
    assert chosen.memory in memory.KINDS and memory.TEXT[chosen.memory] in chosen.describe()
    assert f"memory: {chosen.memory}" in chosen.summary()
