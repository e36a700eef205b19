"""A public result never depends on a hidden input (issue 35, red team R15).

Each exercise of a unit runs twice (:mod:`utils.grading.unit`): its public run (public cases and probe
inputs) and its hidden run, and every public run of the unit comes before its first hidden run. The
student's files (``$HOME``, the work folder, ``/tmp``, ``/var/tmp``, ``/dev/shm``) last the whole unit, so
this order is what keeps a hidden input out of every visible result: a cell that records every input
it receives can only ever hand a later exercise's public run public and probe inputs.

Here ``ch1.add_one`` appends a fingerprint of every input it gets to files in each of those places, and
``ch1.total`` (a later exercise) returns a wrong sum as soon as those files hold a fingerprint that is
not one of ``add_one``'s public or probe inputs. Its public run must pass: in the rows every report
reads, in the local grader's ``--feedback public`` files, and in the tests Gradescope shows before the
grades are published. Its hidden run must fail: the recorded hidden inputs do reach it, so the channel is
live and the public verdict is independent of the hidden cases only because of the order.
"""

from __future__ import annotations

import csv
import json
import os
import uuid
from pathlib import Path

import grader_fixtures as gf
import pytest
import torch

from utils.exercises.common import Status
from utils.exercises.probes import probe_inputs
from utils.grading import batch, sandbox
from utils.grading.gradescope import run_gradescope
from utils.grading.unit import case_seed

pytestmark = pytest.mark.sandbox  # grades in sandboxed workers: make unit, not make quick

SEED = 7
FINGERPRINT = (
    "def fingerprint(x):\n"
    "    return 'x'.join(map(str, x.shape)) + ':' + '%.6f' % float(x.double().sum())\n"
)
SHARED = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")  # every uid may write these where nothing is private
PLACES = f"[os.environ.get('HOME', '.'), os.getcwd(), *{SHARED!r}]"


def _fingerprint():
    space: dict = {}
    exec(FINGERPRINT, space)  # the very function the student's cells run
    return space["fingerprint"]


def allowed() -> set[str]:
    """What ``add_one``'s public run gives it: its public cases and its probe inputs."""
    exercise, fingerprint = gf.ADD_ONE, _fingerprint()
    return {fingerprint(case["x"]) for case in [*exercise.public_cases(), *probe_inputs(exercise)]}


def hidden(student: str) -> set[str]:
    fingerprint = _fingerprint()
    return {fingerprint(case["x"]) for case in gf.ADD_ONE.hidden_cases(case_seed(SEED, "ch1.add_one", student))}


def recording_submission(name: str) -> gf.nbformat.NotebookNode:
    """``add_one`` records every input in files called ``name``; ``total`` fails when a recorded input is
    not a public or probe one."""
    record = (
        f"import os\n{FINGERPRINT}\n"
        "def add_one(x):\n"
        f"    for place in {PLACES}:\n"
        "        try:\n"
        f"            with open(os.path.join(place, {name!r}), 'a') as handle:\n"
        "                handle.write(fingerprint(x) + '\\n')\n"
        "        except OSError:\n"
        "            pass\n"
        "    return x + 1\n"
    )
    check = (
        f"import os\nALLOWED = {sorted(allowed())!r}\n"
        "def total(x):\n"
        "    seen = set()\n"
        f"    for place in {PLACES}:\n"
        "        try:\n"
        f"            with open(os.path.join(place, {name!r})) as handle:\n"
        "                seen.update(handle.read().split())\n"
        "        except OSError:\n"
        "            pass\n"
        "    if seen - set(ALLOWED):  # an input of add_one's hidden run\n"
        "        return float(x.double().sum()) + 1.0\n"
        "    return float(x.double().sum())\n"
    )
    return gf.toy_submission({"ch1.add_one": record, "ch1.total": check})


def test_the_fingerprints_tell_a_hidden_input_from_a_public_one():
    assert allowed() and hidden("sam") and not allowed() & hidden("sam")
    assert not allowed() & hidden("user-4217")


def _check_rows(rows) -> None:
    by_id = {row.exercise: row for row in rows}
    assert by_id["ch1.add_one"].status == Status.PASSED, by_id["ch1.add_one"]
    total = by_id["ch1.total"]
    public = [part.public_status for part in total.parts]
    assert public and all(status == Status.PASSED for status in public), total  # no hidden input seen
    assert total.status == Status.FAILED and total.points == 0, total  # its hidden run saw them


def _reachable_by_others(path: Path) -> bool:
    """Whether a user who is neither the owner nor in the group can pass every folder down to ``path``."""
    return all(os.stat(folder).st_mode & 0o001 for folder in [*reversed(path.parents), path])


@pytest.mark.parametrize("mounts", [True, False], ids=["private-mounts", "shared-tmp"])
def test_a_public_verdict_of_the_local_grader_never_sees_a_hidden_input(tmp_path, monkeypatch, mounts):
    iso = sandbox.isolation()
    if not mounts:
        if "mounts" not in iso.extras:
            pytest.skip("the sandbox has no private mounts here: the other case already shares /tmp")
        if not _reachable_by_others(Path(torch.__file__).parent):
            pytest.skip("this Python's packages are in a folder other users cannot pass (a checkout in a private "
                        "temporary folder): without private mounts the sandbox uid cannot import torch")
        iso = iso.with_extras(iso.extras - {"mounts"})  # /tmp, /var/tmp and /dev/shm are the machine's
        monkeypatch.setattr(sandbox, "isolation", lambda *args, **kwargs: iso)
    subs, name = tmp_path / "subs", f"seen-{uuid.uuid4().hex}.txt"  # not what an earlier run left in /tmp
    gf.student(subs, "sam", {"01_toy.ipynb": recording_submission(name)})
    with gf.static_check_off():  # os and open(..., 'a') meet the sandbox, not the static check
        summary = batch.grade(subs, tmp_path / "out", jobs=1, timeout=10, seed=SEED,
                              course_root=gf.make_toy_course(tmp_path / "course"), registry=gf.TOY_REGISTRY,
                              memory_mb=1024, progress=False, feedback="public")
    _check_rows(summary["rows"])
    with open(tmp_path / "out" / "results.csv", newline="", encoding="utf-8") as handle:
        rows = {r["exercise"]: r for r in csv.DictReader(handle)}
    assert rows["ch1.total"]["status"] == "failed", rows["ch1.total"]
    feedback = (tmp_path / "out" / "feedback" / "sam.md").read_text(encoding="utf-8")
    line = next(x for x in feedback.splitlines() if "`ch1.total`" in x)
    assert "public cases pass" in line or "public case passes" in line, line
    for place in SHARED:  # what the student left in the machine's folders is gone
        assert not os.path.lexists(os.path.join(place, name)), place


@pytest.mark.skipif(os.geteuid() != 0, reason="gives files to another uid (chown): as root only")
def test_what_a_sandbox_uid_left_in_shared_folders_is_removed_and_nothing_else(tmp_path):
    """Without private mounts a slot's uid is the next student's too: its files in the shared folders go, at
    the top and inside another user's world-writable folder (``/tmp/.X11-unix``), and nobody else's."""
    uid, other = sandbox.UID_BASE + 7, sandbox.UID_BASE + 8
    shared = tmp_path / "tmp"
    socket = shared / ".X11-unix" / "deeper"
    socket.mkdir(parents=True)
    for folder in (shared, shared / ".X11-unix", socket):
        folder.chmod(0o1777)
    mine = [shared / "top.txt", shared / "dir", shared / ".X11-unix" / "in.txt", socket / "in.txt"]
    kept = [shared / "kept.txt", shared / ".X11-unix" / "kept.txt", socket / "kept.txt"]
    for path in mine[:1] + mine[2:] + kept:
        path.write_text("hidden input", encoding="utf-8")
    mine[1].mkdir()
    (mine[1] / "inside.txt").write_text("hidden input", encoding="utf-8")
    for path in [*mine, mine[1] / "inside.txt"]:
        os.chown(path, uid, uid)
    os.chown(kept[0], other, other)
    sandbox.remove_leftovers(uid, (str(shared),))
    assert [p for p in mine if p.exists()] == [] and all(p.exists() for p in kept)
    assert socket.is_dir()  # another user's folder stays


def test_a_test_gradescope_shows_before_publication_never_sees_a_hidden_input(tmp_path):
    root = tmp_path / "autograder"
    for folder in ("source", "submission", "results"):
        (root / folder).mkdir(parents=True)
    gf.make_toy_course(root / "source" / "course")
    (root / "source" / "gradescope.json").write_text(json.dumps({
        "seed": SEED, "timeout": 10.0, "budget": 300.0, "memory_mb": 1024, "hidden_visibility": "after_published",
        "course": "course", "lang": "en", "chapters": None, "allow_weak_isolation": False}), encoding="utf-8")
    gf.write_notebook(root / "submission" / "01_toy.ipynb", recording_submission(f"seen-{uuid.uuid4().hex}.txt"))
    (root / "submission_metadata.json").write_text(json.dumps({"users": [{"id": 4217, "name": "Ann"}]}))
    with gf.static_check_off():  # in-process: os and open(..., 'a') meet the sandbox, not the static check
        data = run_gradescope(root, registry=gf.TOY_REGISTRY)
    assert data is not None
    assert json.loads((root / "results" / "results.json").read_text(encoding="utf-8")) == data
    shown = {t["name"]: t for t in data["tests"] if t["visibility"] == "visible"}
    held = {t["name"]: t for t in data["tests"] if t["visibility"] == "after_published"}
    assert shown["ch1.total · public cases"]["status"] == "passed", shown
    assert all(t["status"] == "passed" for t in shown.values()), shown  # what the student sees at once
    assert held["ch1.total"]["status"] == "failed" and held["ch1.total"]["score"] == 0, held
    assert data["output"].startswith(f"{len(shown)} of {len(shown)} checks shown now pass"), data["output"]


def test_every_public_run_of_a_unit_comes_before_its_first_hidden_run(tmp_path, monkeypatch):
    """The order itself, at the level of the runs: whatever the submission, the workers' runs are all the
    public ones (in the notebook's order), then all the hidden ones, even when a run kills its worker."""
    from utils.grading import unit

    order: list[tuple[str, str]] = []
    real = unit._run

    def spy(student, task, index, kind, *args, **kwargs):
        order.append((task.course.id, kind))
        return real(student, task, index, kind, *args, **kwargs)

    monkeypatch.setattr(unit, "_run", spy)
    crash = "import os\ndef attend(q, k, v):\n    os._exit(3)\n"  # a fresh worker for the runs after it
    subs = tmp_path / "subs"
    gf.student(subs, "sam", {"01_toy.ipynb": gf.toy_submission({"ch1.attend": crash})})
    with gf.static_check_off():  # os._exit reaches the worker, not the static check
        summary = batch.grade(subs, tmp_path / "out", jobs=1, timeout=10, seed=SEED,
                              course_root=gf.make_toy_course(tmp_path / "course"), registry=gf.TOY_REGISTRY,
                              memory_mb=1024, progress=False)
    assert {row.exercise: row.status for row in summary["rows"]}["ch1.attend"] != Status.PASSED
    publics, probes, hiddens = ([i for i, (_, kind) in enumerate(order) if kind == k] for k in ("run", "probe", "hide"))
    assert [order[i][0] for i in publics] == list(gf.TOY_SOLUTIONS), order
    assert hiddens and max(publics) < min(hiddens), order
    # the probe runs (fixed inputs, R24) come after every public run and before every hidden one
    assert probes and max(publics) < min(probes) and max(probes) < min(hiddens), order
    assert "ch1.attend" not in {order[i][0] for i in probes}, order  # decided by its crash: no probe run
    assert Path(tmp_path / "out" / "results.csv").exists()
