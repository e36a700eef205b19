"""Workers forked from the fork server are graded, isolated and watched as workers started as programs.

:mod:`utils.grading.forkserver` replaces the ``unshare``, jail and ``setpriv`` programs by the same system
calls made in a fork of a process that has already imported torch. These tests grade the same class both
ways and compare everything a learner's cell can see of its process (identity, capabilities, namespaces,
mounts, network, environment, limits, descriptors), attack the server (dead mid-batch; a grader gone), and
check that it holds nothing of the course but the worker kit.
"""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace

import grader_fixtures as gf
import pytest
from test_grader_units import TIMEOUT, grade_class

from utils.grading import batch, forks, isolation, kit, sandbox, unit

pytestmark = pytest.mark.sandbox  # grades batches in sandboxed workers: make unit, not make quick


def _forkable() -> bool:
    return os.geteuid() == 0 and forks.usable(isolation.isolation(announce=False, check=False))


needs_fork = pytest.mark.skipif(not _forkable(), reason="workers are forked only by a root grader with a PID "
                                "namespace and a uid per slot; this machine starts them as programs")

# Each cell reports one side of its own process in the message of the error it raises (300 characters
# reach the feedback). Paths of this batch's own folders are written as $UNIT, $KIT; numbers that name a
# grader's cgroup as N.
_PRELUDE = (
    "import os, re, resource, sys  # SEE\n"
    "def _norm(text):\n"
    "    home = os.environ['HOME']\n"
    "    text = text.replace(os.path.dirname(home), '$UNIT').replace(KIT, '$KIT').replace(sys.prefix, '$VENV')\n"
    "    text = text.replace(os.path.dirname(sys.prefix), '$REPO').replace(sys.base_prefix, '$PY')\n"
    "    return re.sub(r'grader-[0-9]+-[0-9]+', 'grader-N', text)\n"
    "def _status(*keys, pid='self'):\n"
    "    lines = open(f'/proc/{pid}/status').read().splitlines()\n"
    "    pairs = (l.split(':', 1) for l in lines)\n"
    "    return ' '.join(k + '=' + v.strip() for k, v in pairs if k in keys)\n"
)
_SEE = {
    "identity": "(os.getuid(), os.getgid(), os.getgroups(), os.umask(0o77), "
                "_status('CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb', 'NoNewPrivs', 'Seccomp'))",
    "worker": "_status('Uid', 'Gid', 'Groups', 'CapInh', 'CapPrm', 'CapEff', 'CapAmb', 'NoNewPrivs', 'Seccomp', pid=1)",
    "processes": "(os.getpid(), os.getppid(), sorted(int(p) for p in os.listdir('/proc') if p.isdigit()), "
                 "[l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:]])",
    "mounts": "','.join(sorted({l.split()[4] + ' ' + l.split()[5].split(',')[0] "
              "for l in open('/proc/self/mountinfo')}))",
    "modules": "[(m[6:], (getattr(sys.modules[m], '__file__', None) or '').startswith(KIT)) "
               "for m in sorted(sys.modules) if m.split('.')[0] == 'utils']",
    "environment": "(sorted((k, v) for k, v in os.environ.items() if k != 'GRADER_SANDBOX'), os.getcwd())",
    "limits": "([resource.getrlimit(getattr(resource, 'RLIMIT_' + n)) for n in ('AS', 'CPU', 'FSIZE', 'NPROC', "
              "'NOFILE', 'CORE')], sorted(os.listdir('/proc/self/fd')), "
              "[l.split(':')[-1] for l in open('/proc/self/cgroup') if 'memory' in l])",
}


def _seeing(what: str) -> str:
    return (f"KIT = {str(kit.kit())!r}\n{_PRELUDE}"
            f"raise RuntimeError(_norm(repr({_SEE[what]}))[:300])\n{gf.TOY_SOLUTIONS['ch1.add_one']}")


def _graded(tmp_path, monkeypatch, forked: bool, attackers: dict[str, dict[str, str]]):
    monkeypatch.setattr(forks, "ENABLED", forked)
    before = dict(forks.STARTED)
    with gf.static_check_off("# SEE"):
        got = grade_class(tmp_path, attackers, jobs=1)
    started = {way: forks.STARTED[way] - before[way] for way in before}
    return got, started


@needs_fork
def test_a_forked_worker_s_process_is_what_a_worker_started_as_a_program_has(tmp_path, monkeypatch):
    attackers = {f"see_{what}": {"ch1.add_one": _seeing(what)} for what in _SEE}
    attackers["wrong"] = {"ch1.attend": "def attend(q, k, v):\n    return torch.softmax(q @ k.mT, -1) @ v\n"}
    seen = {}
    for forked in (False, True):
        got, started = _graded(tmp_path / str(forked), monkeypatch, forked, attackers)
        assert started == ({"forked": len(attackers) + 2, "program": 0} if forked else
                           {"forked": 0, "program": len(attackers) + 2}), started
        seen[forked] = {key: (r["status"], r["points"], r["feedback"]) for key, r in got["rows"].items()}
    said = {}
    for what in _SEE:
        key = (f"see_{what}", "ch1.add_one")
        texts = [seen[way].pop(key)[2] for way in (True, False)]
        for text in texts:
            assert text.startswith("your cell raised RuntimeError when it ran: "), (what, text)
        forked, program = (ast.literal_eval(text.split(": ", 1)[1]) for text in texts)
        if what == "mounts":  # sorted before $UNIT and $KIT were written, which stand for other paths each batch
            forked, program = sorted(forked.split(",")), sorted(program.split(","))
        if what == "modules":  # the server's own two modules, from the kit as the rest
            program = sorted([*program, ("grading.forkserver", True), ("grading.jail", True)])
            assert all(from_kit for _name, from_kit in forked), forked
        if what == "environment":  # /bin/sh, which puts a program in its cgroup, exports PWD; nothing else differs
            program = ([item for item in program[0] if item[0] != "PWD"], program[1])
        if what == "limits":  # the address space is bounded relative to the worker's own size, a little larger forked
            assert abs(forked[0][0][0] - program[0][0][0]) < 2**26, (forked, program)
            forked, program = (forked[0][1:], *forked[1:]), (program[0][1:], *program[1:])
        assert forked == program, (what, forked, program)
        said[what] = texts[0]
    assert seen[True] == seen[False]  # every other verdict and word of feedback, the honest students' included
    # and what both ways show is the sandbox: no capability, no_new_privs, PID 2 of its namespace, loopback only
    assert "CapEff=0000000000000000" in said["identity"] and "NoNewPrivs=1" in said["identity"], said["identity"]
    assert "CapEff=0000000000000000" in said["worker"], said["worker"]
    assert "NoNewPrivs=1" in said["worker"] and f"Uid={isolation.sandbox_uid(0)}" in said["worker"], said["worker"]
    assert said["processes"].endswith("(2, 1, [1, 2], ['lo'])"), said["processes"]
    mounts = said["mounts"].split(": ", 1)[1].strip("'").split(",")
    assert "/ ro" in mounts and "$UNIT rw" in mounts and "$VENV ro" in mounts and "/proc rw" in mounts, mounts
    assert not [m for m in mounts if m.startswith(("/home", "/root ", "/run", "/srv", "/mnt"))], mounts
    assert "grader-N" in said["limits"], said["limits"]


@needs_fork
def test_a_fork_server_killed_mid_batch_costs_no_classmate_a_grade(tmp_path, monkeypatch):
    """The server dies right after forking the first student's worker: that worker dies with it (nothing would
    say how it ended) and is started again from a fresh server, which every later worker comes from."""
    forks.stop()
    spawn = forks._Server.spawn
    killed = []

    def spawn_then_die(self, *args, **kwargs):
        forked = spawn(self, *args, **kwargs)
        if not killed:
            killed.append(self.proc.pid)
            os.kill(self.proc.pid, signal.SIGKILL)
        return forked

    monkeypatch.setattr(forks._Server, "spawn", spawn_then_die)
    subs = tmp_path / "subs"
    for name in ("a_first", "b_later", "c_later"):
        gf.student(subs, name, {"01_toy.ipynb": gf.toy_submission()})
    before = dict(forks.STARTED)
    summary = batch.grade(subs, tmp_path / "out", jobs=1, timeout=TIMEOUT, seed=3, progress=False,
                          course_root=gf.make_toy_course(tmp_path / "course"), registry=gf.TOY_REGISTRY, memory_mb=512)
    assert killed and forks._SERVER is not None and forks._SERVER.proc.pid != killed[0]
    assert forks.STARTED["program"] == before["program"] and forks.STARTED["forked"] >= before["forked"] + 4
    full = sum(gf.TOY_POINTS.values())
    assert summary["totals"]["b_later"] == summary["totals"]["c_later"] == full, summary["totals"]
    assert summary["totals"]["a_first"] == full, gf.exercise_rows(tmp_path / "out")  # its worker started again


@needs_fork
def test_the_server_has_imported_torch_and_ends_with_its_grader():
    """It runs as ``python -I -S`` with torch loaded (what its workers' ``sys.modules`` hold of the course:
    the kit's modules only, is compared above), and it ends when its grader dies."""
    script = ("import os, sys, time\nfrom utils.grading import forks, isolation\n"
              "isolation.isolation(announce=False, check=False)\nserver = forks.server()\n"
              "print(server.proc.pid, flush=True)\ntime.sleep(600)\n")
    grader = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=kit.PACKAGE.parent)
    try:
        pid = int(grader.stdout.readline())
        with open(f"/proc/{pid}/maps", encoding="utf-8") as maps:
            mapped = {line.split(None, 5)[-1].strip() for line in maps if "/" in line}
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            argv = cmdline.read().split(b"\0")
        assert any("libtorch" in path for path in mapped), "the server has not imported torch"
        assert argv[1:3] == [b"-I", b"-S"], argv  # no site, no PYTHON* variables: what it imports is the kit's
    finally:
        grader.kill()
        grader.wait()
    for _ in range(600):  # its socket closed with the grader: the server ends
        if not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split(")")[1].split()[0] == "Z":
            break
        time.sleep(0.05)
    else:
        pytest.fail("the fork server outlived its grader by 30 s")


def test_workers_are_started_as_programs_where_forking_is_not_possible():
    """Without root, a PID namespace or a uid per slot, or with anything else on the command line, no fork."""
    base = isolation.Isolation("pidns+uid", ("unshare", "--pid", "--fork", "--kill-child", "--mount-proc"), "uid",
                               frozenset(isolation.EXTRAS))
    assert forks.usable(base)
    for other in (replace(base, root=False), replace(base, drop="uid+read"), replace(base, drop="caps"),
                  replace(base, prefix=()), replace(base, prefix=(*base.prefix, "--map-root-user"))):
        assert not forks.usable(other), other


@needs_fork
def test_a_forked_worker_killed_alone_is_said_to_be_killed_by_sigkill(tmp_path):
    """As the machine's OOM killer ends a worker (its student's bound not tripped): the grader reads "killed by
    signal SIGKILL", since the server's child ends by the signal its child ended by (before, it raised on
    SIGKILL and exited with status 3, which reads as the student's code ending its process). ``unshare``
    reports such an end as exit status 1 (util-linux here)."""
    iso = isolation.isolation(announce=False, check=False)
    jobdir = tmp_path / "job"
    jobdir.mkdir()
    workdir = unit._prepare(jobdir, unit.Settings(timeout=4, seed=0, memory_mb=512), 0, iso)
    worker = sandbox.Worker.start(jobdir, workdir, 0, iso)
    try:
        assert isinstance(worker.proc, forks.Forked)
        assert worker.next_line(time.monotonic() + 120) == "ready", worker.output
        os.kill(worker.inner_pid(), signal.SIGKILL)
        assert worker.next_line(time.monotonic() + 60) == ""  # its status pipe closes
        worker.proc.wait(timeout=60)
        assert worker.exit_description() == "killed by signal SIGKILL" and not worker.stopped_by_grader
    finally:
        worker.kill()
