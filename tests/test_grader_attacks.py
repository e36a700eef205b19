"""Adversarial submissions: each is graded correctly and the rest of the batch is unaffected.

One batch (toy course, --timeout 4, two jobs) holds an honest student and one student per attack; the
attack sits in ``ch1.add_one`` (or where it belongs), so the attacker's other exercises must still pass.
The timeout is CPU time (utils.grading.unit, *Timeouts*): nothing here depends on how busy the machine is.
"""

from __future__ import annotations

import csv

import grader_fixtures as gf
import pytest

from utils.exercises.forbidden import unsafe_in_source
from utils.grading import batch, sandbox, unit

pytestmark = pytest.mark.sandbox  # grades batches in sandboxed workers: make unit, not make quick

# CPU seconds per exercise. Measured idle: an honest toy exercise uses 0.01-0.03 CPU-s, the 300 MB print
# 0.4 (allocating the strings): 10x margin and more, whatever the load, since CPU time does not grow with it.
TIMEOUT = 4
SLEEP = TIMEOUT + 2  # the escaping children sleep past the timeout, then write a file


def add_one(body: str) -> dict[str, str]:
    """A submission whose ``add_one`` runs ``body`` first, then returns the right answer."""
    indented = "\n".join("    " + line for line in body.strip().splitlines())
    return {"ch1.add_one": f"def add_one(x):\n{indented}\n    return x + 1\n"}


RUNTIME_FORBIDDEN = ("def attend(q, k, v):\n    fn = getattr(F, 'scaled_dot_' + 'product_attention')\n"
                     "    return fn(q, k, v)\n")


@pytest.fixture(scope="module")
def attacks(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("attacks")
    out = tmp / "out"
    out.mkdir()  # exists, as after an earlier run: as root, the writer below could write into it
    subs = tmp / "subs"
    victim = subs / "honest"
    students = {
        "honest": gf.toy_submission(),
        "loop": {"ch1.add_one": "def add_one(x):\n    while True:\n        pass\n"},
        # SIGXCPU ignored: the hard CPU limit's SIGKILL follows, and is still reported as a timeout
        "loop_ignoring_sigxcpu": {"ch1.add_one": (
            "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\n"
            "def add_one(x):\n    while True:\n        pass\n")},
        # longer than the timeout in wall time, using no CPU: what a busy machine does to an honest exercise
        "sleeper": {"ch1.add_one": f"import time\ntime.sleep({TIMEOUT + 2})\n" + gf.TOY_SOLUTIONS["ch1.add_one"]},
        # Address space without bound, 256 MiB a step: RLIMIT_AS stops it at the same point whether or not
        # the pages are written, and it fails at once, as a learner's too-large (L, L) scores would.
        "membomb": {"ch1.add_one": (
            "def add_one(x):\n    hog = []\n    while True:\n        hog.append(torch.empty(2**26))\n")},
        # The same bomb writing every page: on a loaded VM each first touch can cost the host a fault, and
        # in CI (stop 31) 512 MiB of them ran past the 4 s timeout. Either verdict is 0 points for this
        # exercise alone; what must never happen is a crash of the batch or an "error" blaming the learner.
        "membomb_touch": {"ch1.add_one": (
            "def add_one(x):\n    hog = []\n    while True:\n        hog.append(bytearray(2**28))\n")},
        "sysexit": add_one("import sys\nsys.exit(0)"),
        "osexit": add_one("import os\nos._exit(3)"),
        "monkeypatch": {"ch1.add_one": (  # through a function: torch.equal = ... written out is refused statically
            "def _patch(t):\n    t.allclose = lambda *a, **k: True\n"
            "    t.testing.assert_close = lambda *a, **k: None\n"
            "    t.equal = lambda *a, **k: True\n_patch(torch)\n"
            "def add_one(x):\n    return torch.zeros_like(x)\n")},
        "cheater": {  # one attack per exercise
            "ch1.total": (
                "class Anything:\n    def __eq__(self, other):\n        return True\n"
                "    def __ne__(self, other):\n        return False\n"
                "def total(x):\n    return Anything()\n"),
            "ch1.attend": "def attend(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v)\n",
            "ch1.add_one": "def add_one(x):\n    return torch.tensor([[1.5, 2.5], [0.5, 3.0]])\n",
        },
        "runtime_forbidden": {"ch1.attend": RUNTIME_FORBIDDEN},
        "writer": add_one(
            f"for target in ({str(out / 'pwned.txt')!r}, {str(victim / 'pwned.txt')!r}, "
            f"{str(out)!r} + '/results.csv'):\n"
            "    try:\n        open(target, 'w').write('=1+1')\n    except OSError:\n        pass"),
        # 300 MB through the output pipe in all, as before the hidden cases doubled the calls (3 -> 6)
        "bigprint": add_one("print('x' * 50_000_000)"),
        # add_one's cell starts a forked child and a setsid() grandchild that sleep past their exercise's end,
        # then write into the unit's work folder ($HOME); attend's cell, run after it, waits longer and looks
        "escaper": {"ch1.add_one": (
            "import os, time\nhome = os.environ['HOME']\nopen(f'{home}/canary', 'w').write('x')\n"
            f"if os.fork() == 0:\n    time.sleep({SLEEP})\n    open(f'{{home}}/forked', 'w').write('x')\n"
            "    os._exit(0)\nif os.fork() == 0:\n    os.setsid()\n"
            f"    if os.fork() == 0:\n        time.sleep({SLEEP})\n        open(f'{{home}}/setsid', 'w').write('x')\n"
            "        os._exit(0)\n    os._exit(0)\n" + gf.TOY_SOLUTIONS["ch1.add_one"]), "ch1.attend": (
            "import os, time\nhome = os.environ['HOME']\n"
            f"if not os.path.exists(f'{{home}}/waited'):\n    time.sleep({2 * SLEEP})\n"
            "    open(f'{home}/waited', 'w').write('x')\n"
            "SEEN = [name for name in ('canary', 'forked', 'setsid') if os.path.exists(f'{home}/{name}')]\n"
            + gf.TOY_SOLUTIONS["ch1.attend"].replace("    return ", "    return (1 if SEEN == ['canary'] else 2) * "))},
    }
    for name, overrides in students.items():
        nb = overrides if name == "honest" else gf.toy_submission(overrides)
        gf.student(subs, name, {"chapter.ipynb": nb})
    gf.student(subs, "broken_json", {"01_toy.ipynb": '{"cells": [ this is not json'})
    gf.student(subs, "duplicated", {"a.ipynb": gf.toy_submission(),
                                   "b.ipynb": gf.notebook([("ch1.add_one", gf.TOY_SOLUTIONS["ch1.add_one"])])})
    course = gf.make_toy_course(tmp / "course")
    with gf.static_check_off():  # signal, time, os and open(..., 'w') meet the sandbox, not the static check
        summary = batch.grade(subs, out, jobs=2, timeout=TIMEOUT, seed=1, course_root=course,
                              registry=gf.TOY_REGISTRY, memory_mb=512, progress=False)
    with open(out / "results.csv", newline="", encoding="utf-8") as handle:
        rows = {(r["student"], r["exercise"]): r for r in csv.DictReader(handle)}
    return {"rows": rows, "out": out, "victim": victim, "summary": summary}


def status(attacks, student, exercise="ch1.add_one"):
    return attacks["rows"][(student, exercise)]


def others_pass(attacks, student, attacked=("ch1.add_one",)):
    for eid in gf.TOY_POINTS:
        if eid not in attacked:
            assert status(attacks, student, eid)["status"] == "passed", (student, eid)


def test_honest_student_is_unaffected(attacks):
    assert attacks["summary"]["totals"]["honest"] == 6
    assert all(status(attacks, "honest", eid)["status"] == "passed" for eid in gf.TOY_POINTS)


def test_infinite_loop_times_out_alone(attacks):
    row = status(attacks, "loop")
    assert row["status"] == "timeout" and row["points"] == "0"
    others_pass(attacks, "loop")


def test_ignoring_sigxcpu_still_times_out(attacks):
    row = status(attacks, "loop_ignoring_sigxcpu")
    assert row["status"] == "timeout" and "CPU time" in row["feedback"], row
    others_pass(attacks, "loop_ignoring_sigxcpu")


def test_the_timeout_is_cpu_time_so_waiting_is_not_a_timeout(attacks):
    assert status(attacks, "sleeper")["status"] == "passed", status(attacks, "sleeper")
    others_pass(attacks, "sleeper")


def test_memory_bomb_is_memory(attacks):
    assert status(attacks, "membomb")["status"] == "memory", status(attacks, "membomb")
    others_pass(attacks, "membomb")


def test_memory_bomb_that_writes_its_pages_is_memory_or_timeout(attacks):
    row = status(attacks, "membomb_touch")
    assert row["status"] in ("memory", "timeout") and row["points"] == "0", row
    others_pass(attacks, "membomb_touch")


def test_sys_exit_and_os_exit_are_errors(attacks):
    row = status(attacks, "sysexit")
    assert row["status"] == "error" and "sys.exit" in row["feedback"]
    row = status(attacks, "osexit")
    assert row["status"] == "error" and "exit" in row["feedback"]
    others_pass(attacks, "sysexit")
    others_pass(attacks, "osexit")  # the worker died and was restarted for the next exercises


def test_monkeypatching_torch_comparisons_does_not_pass(attacks):
    row = status(attacks, "monkeypatch")
    assert row["status"] == "failed" and "you returned the input unchanged" not in row["feedback"]
    assert "differs" in row["feedback"]
    others_pass(attacks, "monkeypatch")


def test_lying_eq_does_not_pass(attacks):
    row = status(attacks, "cheater", "ch1.total")
    assert row["status"] == "failed" and "should be a number, got Anything" in row["feedback"]


def test_forbidden_calls_static_and_at_run_time(attacks):
    row = status(attacks, "cheater", "ch1.attend")
    assert row["status"] == "forbidden" and "scaled_dot_product_attention" in row["feedback"], row
    # a computed name: refused before it runs; with that check off (the fixture), caught when called
    assert unsafe_in_source(RUNTIME_FORBIDDEN) == "getattr with a computed attribute name"
    row = status(attacks, "runtime_forbidden", "ch1.attend")
    assert row["status"] == "forbidden" and "scaled_dot_product_attention" in row["feedback"], row
    others_pass(attacks, "runtime_forbidden", ("ch1.attend",))


def test_writing_to_the_output_or_another_student_folder_fails(attacks):
    if not sandbox.isolation().uid:
        pytest.skip(f"isolation {sandbox.isolation().level} runs learner code as the grader's user")
    assert not (attacks["out"] / "pwned.txt").exists()
    assert not (attacks["victim"] / "pwned.txt").exists()
    assert "=1+1" not in (attacks["out"] / "results.csv").read_text()
    assert status(attacks, "writer")["status"] == "passed"  # its writes failed, its answer is right


def test_huge_print_is_harmless(attacks):
    # harmless by design, not by a generous timeout: learner output goes to /dev/null, never through the
    # grader's pipe (the test below), and printing it costs little CPU time
    assert status(attacks, "bigprint")["status"] == "passed", status(attacks, "bigprint")
    others_pass(attacks, "bigprint")


def test_learner_output_never_reaches_the_grader_and_waiting_forever_is_a_timeout(tmp_path, monkeypatch):
    """An exercise's prints go to /dev/null (so a huge print cannot stall on a pipe the grader drains on a
    busy machine), and the wall-clock backstop still ends an exercise that only waits."""
    seen: list[bytes] = []
    kill = sandbox.Worker.kill

    def recording_kill(self):
        kill(self)
        seen.append(bytes(self.output))

    monkeypatch.setattr(sandbox.Worker, "kill", recording_kill)
    monkeypatch.setattr(unit, "WALL_FACTOR", 1.0)
    monkeypatch.setattr(unit, "WALL_MARGIN", 2.0)  # the backstop: 2 + 2 = 4 s of wall time
    subs = tmp_path / "subs"
    gf.student(subs, "printer", {"a.ipynb": gf.toy_submission(add_one(
        "import os, sys\nprint('LEARNER-MARKER')\nsys.stderr.write('LEARNER-MARKER')\n"
        "os.write(1, b'LEARNER-MARKER')"))})
    gf.student(subs, "waiter", {"a.ipynb": gf.toy_submission(add_one("import time\ntime.sleep(600)"))})
    with gf.static_check_off():  # os.write and time.sleep meet the sandbox, not the static check
        batch.grade(subs, tmp_path / "out", jobs=2, timeout=2, seed=1,
                    course_root=gf.make_toy_course(tmp_path / "course"), registry=gf.TOY_REGISTRY, memory_mb=512,
                    progress=False)
    with open(tmp_path / "out" / "results.csv", newline="", encoding="utf-8") as handle:
        rows = {(r["student"], r["exercise"]): r for r in csv.DictReader(handle)}
    assert rows[("printer", "ch1.add_one")]["status"] == "passed", rows[("printer", "ch1.add_one")]
    assert seen and not any(b"LEARNER-MARKER" in output for output in seen), seen
    waited = rows[("waiter", "ch1.add_one")]
    assert waited["status"] == "timeout" and "longer than 4 s" in waited["feedback"], waited


def test_invalid_json_notebook_is_invalid_with_a_reason(attacks):
    for eid in gf.TOY_POINTS:
        row = status(attacks, "broken_json", eid)
        assert row["status"] == "invalid" and "not valid JSON" in row["feedback"]


def test_a_duplicated_exercise_cell_is_graded_from_one_copy(attacks):
    # which copy, and what the report says of the other: tests/test_grader_edges.py
    assert status(attacks, "duplicated")["status"] == "passed"
    others_pass(attacks, "duplicated")


def test_forked_and_setsid_children_die_with_their_exercise(attacks):
    # attend's cell returns the right answer only when it sees the canary (the folder is shared by the
    # student's runs) and neither file the escaping children write once their exercise is over
    assert status(attacks, "escaper")["status"] == "passed"
    assert status(attacks, "escaper", "ch1.total")["status"] == "passed"
    row = status(attacks, "escaper", "ch1.attend")
    assert row["status"] == "passed", row


def test_hard_coded_outputs_fail(attacks):
    row = status(attacks, "cheater")  # the visible example's answer, whatever the input
    assert row["status"] == "failed" and row["points"] == "0"
