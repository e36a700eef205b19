"""README claims about the worker that had no test of their own (red team R3, issue 35): the worker is
non-dumpable, so an exercise's process (same uid) cannot reach into it through /proc (its descriptors, its
memory) or ptrace; and its limits forbid core dumps and bound file size and, for a non-root uid, processes.
"""

from __future__ import annotations

import ctypes
import encodings.ascii  # noqa: F401  (loaded before a child switches to a uid that may not read the stdlib)
import os
import resource

import pytest

from utils.grading import isolation, worker

STRANGER = isolation.UID_BASE - 7  # an unprivileged uid no sandbox of this process uses


def _in_child(body) -> int:
    """Run ``body()`` in a forked child; its return value (0 = as expected) is the exit status."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover  (reports through the exit status)
        code = 99
        try:
            code = body()
        finally:
            os._exit(code)
    return os.WEXITSTATUS(os.waitpid(pid, 0)[1])


def _reach(target: int) -> int:
    """1 when a process can list ``target``'s descriptors and open its memory, 0 when neither."""
    reached = 0
    for probe in (lambda: os.listdir(f"/proc/{target}/fd"), lambda: open(f"/proc/{target}/mem", "rb").close()):
        try:
            probe()
            reached = 1
        except PermissionError:
            pass
    return reached


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to switch to an unprivileged uid")
@pytest.mark.parametrize("dumpable", [True, False])
def test_an_exercise_process_cannot_reach_into_its_non_dumpable_worker(dumpable):
    def as_worker() -> int:
        os.setgroups([])
        os.setgid(STRANGER)
        os.setuid(STRANGER)
        # a uid switch leaves a process non-dumpable until it execs, as setpriv's python does: be that one
        ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE, 1
        if not dumpable:
            worker._not_dumpable()
        me = os.getpid()
        return _in_child(lambda: 10 + _reach(me))  # the exercise's process: same uid, forked from the worker

    assert _in_child(as_worker) == (11 if dumpable else 10)


def test_the_worker_limits_forbid_core_dumps_and_bound_files_and_processes():
    limits = {"fsize": 2**20, "cpu": 5, "memory": 2**30, "nproc": 64}

    def body() -> int:
        if os.geteuid() == 0:
            os.setgroups([])
            os.setgid(STRANGER)
            os.setuid(STRANGER)
        worker._apply_limits(limits)
        core = resource.getrlimit(resource.RLIMIT_CORE)
        fsize = resource.getrlimit(resource.RLIMIT_FSIZE)
        nproc = resource.getrlimit(resource.RLIMIT_NPROC)[1]
        ok = core == (0, 0) and fsize == (2**20, 2**20) and nproc != resource.RLIM_INFINITY and nproc <= 64 + 64
        return 0 if ok else 1

    assert _in_child(body) == 0
