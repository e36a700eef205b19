"""Isolation never weakens silently (issue 35).

Which levels are safe, the refusal and its paragraph, and ``--allow-weak-isolation``
(:func:`utils.grading.isolation.allow_weak_isolation`) are checked in-process; then the grader runs as root
with ``CAP_SYS_ADMIN`` dropped (``capsh --drop=cap_sys_admin``: a default Docker container's
capabilities), as the red team did. No namespace works there, yet the learner's code runs as an
unprivileged uid (the ``uid`` level, its processes swept by uid: a ``setsid()`` child with a clean
environment dies with its exercise). Where this Python is out of an unprivileged user's reach (pyenv under
a private ``/root``), the grader refuses, and the run is repeated with Python made reachable, as in a
container whose Python is under ``/usr``. With ``CAP_SETUID`` and ``CAP_SETGID`` dropped too, no safe
level is left: the grader refuses loudly, or grades at the weak level it names when that is allowed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import grader_fixtures as gf
import pytest

from utils.grading import isolation, sandbox

PREFIX = ("unshare", "--pid", "--fork", "--kill-child", "--mount-proc")


def _level(level: str, drop: str, prefix=PREFIX, extras=(), root=True) -> sandbox.Isolation:
    return sandbox.Isolation(level, tuple(prefix), drop, frozenset(extras), root=root)


def test_only_an_unprivileged_uid_with_containment_is_safe():
    assert _level("pidns+uid", "uid").weaknesses() == ()
    assert _level("uid", "uid", prefix=()).weaknesses() == ()
    assert _level("pidns", "caps", extras=("mounts",), root=False).weaknesses() == ()
    weak = {"pidns+uid+read": _level("pidns+uid+read", "uid+read"), "uid+read": _level("uid+read", "uid+read", ()),
            "pidns": _level("pidns", ""), "session": _level("session", "", ()),
            "pidns, not root, no mounts": _level("pidns", "caps", root=False)}
    for name, level in weak.items():
        assert level.weaknesses(), name
    assert "run as root" in weak["pidns"].weaknesses()[0]
    assert "CAP_DAC_READ_SEARCH" in weak["uid+read"].weaknesses()[0]
    assert any("outlive" in text for text in weak["session"].weaknesses())


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv")
def test_as_root_every_level_that_runs_learner_code_as_root_comes_last():
    levels = [level.level for level in isolation.candidates()]
    assert levels.index("uid") < levels.index("pidns+uid+read") < levels.index("pidns") < levels.index("session")
    assert levels[:1] == ["pidns+uid"] or not shutil.which("unshare")


def test_a_weak_level_is_refused_unless_allowed_and_the_summary_says_weak(monkeypatch, capsys):
    weak = _level("uid+read", "uid+read", prefix=(), extras=())
    monkeypatch.setattr(isolation, "_ISOLATION", dataclasses.replace(weak, memory="watch"))
    monkeypatch.setattr(isolation, "_WARNED", False)
    monkeypatch.setattr(isolation, "_ALLOW_WEAK", False)
    with pytest.raises(sandbox.WeakIsolation) as refused:
        sandbox.isolation()
    text = str(refused.value)
    assert text.startswith("grader: refusing to grade") and "'uid+read'" in text and "CAP_DAC_READ_SEARCH" in text
    assert "--allow-weak-isolation" in text and "\n" not in text  # one paragraph
    assert sandbox.isolation(check=False).level == "uid+read"  # reporting never refuses
    sandbox.allow_weak_isolation(True)
    assert sandbox.isolation().level == "uid+read"
    assert "WARNING: grading with weak isolation" in capsys.readouterr().err
    summary = sandbox.isolation(check=False).summary()
    assert summary.startswith("uid+read") and "memory: watch" in summary and "WEAK: " in summary
    sandbox.allow_weak_isolation(False)
    with pytest.raises(sandbox.WeakIsolation):
        sandbox.isolation()


@pytest.mark.skipif(os.geteuid() != 0, reason="sandbox uids are reserved by a grader running as root")
def test_each_grader_process_holds_its_own_block_of_sandbox_uids():
    mine = sandbox.sandbox_uid(0)
    other = subprocess.run([sys.executable, "-c", "from utils.grading import isolation as i; print(i.sandbox_uid(0))"],
                           cwd=gf.REPO, capture_output=True, text=True, timeout=120, check=True)
    assert int(other.stdout) != mine and int(other.stdout) % isolation.UID_BLOCK == mine % isolation.UID_BLOCK
    with pytest.raises(ValueError, match="slot must be in"):
        sandbox.sandbox_uid(isolation.UID_BLOCK)


# --------------------------------------------------------------------------------------------------
# Without CAP_SYS_ADMIN (capsh), as in a default Docker container
# --------------------------------------------------------------------------------------------------

GRADE = """
import json, sys
sys.path[:0] = [{repo!r}, {tests!r}]
import grader_fixtures as gf
from pathlib import Path
from utils.grading import batch, sandbox
sandbox.allow_weak_isolation({allow})
top = Path({top!r})
try:
    with gf.static_check_off():  # os, time and open(..., 'w') meet the sandbox, not the static check
        summary = batch.grade(top / "subs", top / "out", jobs=2, timeout=8, seed=1, course_root=top / "course",
                              registry=gf.TOY_REGISTRY, memory_mb=512, progress=False)
except sandbox.WeakIsolation as exc:
    print(exc)
    raise SystemExit(2)
rows = {{f"{{r.student}} {{r.exercise}}": r.status for r in summary["rows"]}}
print(json.dumps({{"summary": sandbox.isolation(check=False).summary(), "rows": rows}}))
"""


@pytest.fixture(scope="module")
def capless(tmp_path_factory):
    if os.geteuid() != 0 or not shutil.which("capsh") or not shutil.which("unshare"):
        pytest.skip("needs root, capsh and unshare")
    top = tmp_path_factory.mktemp("capless")
    os.chmod(top, 0o755)
    root_owned = top / "root-owned.txt"
    root_owned.write_text("the grader's")
    os.chmod(root_owned, 0o644)
    gf.student(top / "subs", "honest", {"a.ipynb": gf.toy_submission()})
    left = Path("/tmp") / f"grader-capless-{os.getpid()}"  # what a student leaves where any uid may write
    who = (f"open({str(left)!r}, 'w').write('x')\n"
           "import os\ntry:\n    open(" + repr(str(root_owned)) + ", 'a').write('x')\n    WROTE = True\n"
           "except OSError:\n    WROTE = False\n" + gf.TOY_SOLUTIONS["ch1.add_one"].replace(
               "    return x + 1", "    return x + (1 if os.getuid() != 0 and not WROTE else 2)"))
    # attend's cell starts a setsid() child (a new session; it cannot exec a program with a cleared
    # environment: the worker refuses execve) that sleeps past its exercise and then writes into the unit's
    # work folder ($HOME); total's cell, run after it, waits longer and looks
    escape = ("import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(6)\n"
              "    open(os.environ['HOME'] + '/escaped', 'w').write('x')\n    os._exit(0)\n"
              + gf.TOY_SOLUTIONS["ch1.attend"])
    look = ("import os, time\nhome = os.environ['HOME']\nif not os.path.exists(f'{home}/waited'):\n"
            "    time.sleep(12)\n    open(f'{home}/waited', 'w').write('x')\n"
            "ESCAPED = os.path.exists(f'{home}/escaped')\n"
            + gf.TOY_SOLUTIONS["ch1.total"].replace("    return ", "    return (2 if ESCAPED else 1) * "))
    gf.student(top / "subs", "intruder", {"a.ipynb": gf.toy_submission({"ch1.add_one": who, "ch1.attend": escape,
                                                                         "ch1.total": look})})
    gf.make_toy_course(top / "course")

    def run(allow: bool, reachable: bool = False, drop_caps: str = "cap_sys_admin") -> subprocess.CompletedProcess:
        script = top / f"grade-{allow}.py"
        script.write_text(GRADE.format(repo=str(gf.REPO), tests=str(gf.REPO / "tests"), allow=allow, top=str(top)))
        command = f"{sys.executable} {script}"
        if reachable:
            setup = gf.REACHABLE.format(repo=str(gf.REPO), blocked=gf.blocked_folders(),
                                       argv=["capsh", "--drop=cap_sys_admin", "--", "-c", command])
            cmd = ["unshare", "--mount", sys.executable, "-c", setup]
        else:
            cmd = ["capsh", f"--drop={drop_caps}", "--", "-c", command]
        shutil.rmtree(top / "out", ignore_errors=True)
        return subprocess.run(cmd, cwd=gf.REPO, capture_output=True, text=True, timeout=600, check=False)

    yield {"run": run, "root_owned": root_owned, "left": left}
    left.unlink(missing_ok=True)


def _result(done: subprocess.CompletedProcess) -> dict:
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.sandbox
def test_without_cap_sys_admin_learner_code_runs_as_an_unprivileged_uid_swept_by_uid(capless):
    capless["root_owned"].write_text("the grader's")
    done = capless["run"](allow=False)
    if done.returncode == 2:  # a Python an unprivileged user cannot run (pyenv under /root): no safe level
        assert "refusing to grade" in done.stdout and "--allow-weak-isolation" in done.stdout, done.stdout
        done = capless["run"](allow=False, reachable=True)  # as in a container whose Python is under /usr
    result = _result(done)
    assert result["summary"].split(",")[0] == "uid" and "WEAK" not in result["summary"], result
    assert "(fallback: pidns+uid does not work on this machine)" in done.stderr  # said, never silent
    # add_one: not root, so it could not write the grader's file; total: the escaping child did not outlive
    # attend's run
    assert all(status == "passed" for status in result["rows"].values()), result
    assert capless["root_owned"].read_text() == "the grader's"
    assert not capless["left"].exists(), "what the student left in /tmp is there for the next one"


@pytest.mark.sandbox
def test_a_root_grader_that_cannot_switch_uid_refuses_loudly_unless_weak_isolation_is_allowed(capless):
    capless["root_owned"].write_text("the grader's")
    done = capless["run"](allow=False, drop_caps="cap_sys_admin,cap_setuid,cap_setgid")
    assert done.returncode == 2, (done.stdout + done.stderr)[-3000:]
    refusal = done.stdout.strip().splitlines()[-1]
    assert refusal.startswith("grader: refusing to grade") and "learner code would run as root" in refusal
    assert "--allow-weak-isolation" in refusal and "CAP_SETUID" in refusal
    assert not (capless["root_owned"].parent / "out").exists()  # nothing graded, nothing written
    done = capless["run"](allow=True, drop_caps="cap_sys_admin,cap_setuid,cap_setgid")
    result = _result(done)
    assert "WEAK: learner code would run as root" in result["summary"], result
    assert "WARNING: grading with weak isolation" in done.stderr
    assert result["rows"]["honest ch1.attend"] == "passed"
    assert result["rows"]["intruder ch1.add_one"] == "failed"  # as root it wrote the grader's file: allowed


@pytest.mark.sandbox
def test_the_command_line_refuses_a_weak_sandbox_and_grades_with_allow_weak_isolation(capless, tmp_path):
    """`python -m utils.grade` with no safe level here: exit 2 and the refusal paragraph before any submission
    is read; with --allow-weak-isolation it grades and its last line names the level, WEAK and why."""
    out, subs = tmp_path / "out", tmp_path / "subs"
    (subs / "honest").mkdir(parents=True)
    shutil.copy(gf.REPO / "solutions" / "01_queries_keys_values.ipynb", subs / "honest" / "01.ipynb")
    os.chmod(tmp_path, 0o755)
    base = [sys.executable, "-m", "utils.grade", str(subs), "--out", str(out), "--chapters", "1", "--jobs", "1",
            "--timeout", "20"]
    drop = ["capsh", "--drop=cap_sys_admin,cap_setuid,cap_setgid", "--", "-c"]

    def run(*extra: str) -> subprocess.CompletedProcess:
        command = " ".join(map(shlex.quote, [*base, *extra]))
        return subprocess.run([*drop, command], cwd=gf.REPO, capture_output=True, text=True, timeout=600)

    refused = run()
    assert refused.returncode == 2, (refused.stdout + refused.stderr)[-2000:]
    assert "refusing to grade" in refused.stderr and "--allow-weak-isolation" in refused.stderr
    assert not out.exists()
    allowed = run("--allow-weak-isolation")
    assert allowed.returncode == 0, (allowed.stdout + allowed.stderr)[-2000:]
    last = allowed.stdout.strip().splitlines()[-1]
    assert last.startswith("grader isolation: ") and "WEAK" in last, allowed.stdout[-1000:]
