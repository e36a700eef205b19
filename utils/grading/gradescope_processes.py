"""The Gradescope runner's processes: it is a child subreaper (:func:`become_subreaper`), so that every process the
student's code started, even one that left its parent, is still its descendant, and it kills them all
(:func:`end_student_processes`) before it writes ``results.json``. Read from ``/proc``; Linux only.
"""

from __future__ import annotations

import os
import signal
import time

from utils.grading import sandbox

__all__ = ["SANDBOX_UIDS", "become_subreaper", "end_student_processes", "student_processes"]

SANDBOX_UIDS = range(sandbox.UID_BASE, sandbox.UID_BASE + 2**22)
"""The uids the grader's sandbox may run learner code as (from ``UID_BASE``: a block per grader process, a uid
per job slot). Only this process's descendants are ever killed, so a wide range costs nothing."""


def _processes() -> dict[int, tuple[int, str, set[int]]]:
    """pid -> (parent pid, state, uids: real, effective, saved and filesystem) of every process."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/status", encoding="ascii", errors="replace") as status:
                uids = next(line for line in status if line.startswith("Uid:")).split()[1:]
            found[int(entry)] = (int(fields[1]), fields[0], {int(uid) for uid in uids})
        except (OSError, ValueError, IndexError, StopIteration):
            continue
    return found


def student_processes() -> list[int]:
    """This process's live descendants that run as one of :data:`SANDBOX_UIDS`. As ``run_autograder``'s
    process is a child subreaper (:func:`main`), a student's process that left its parent is still one."""
    table = _processes()
    children: dict[int, list[int]] = {}
    for pid, (parent, _state, _uids) in table.items():
        children.setdefault(parent, []).append(pid)
    found, todo = [], list(children.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        _parent, state, uids = table[pid]
        if state not in ("Z", "X") and any(uid in SANDBOX_UIDS for uid in uids):
            found.append(pid)
    return found


def end_student_processes(rounds: int = 50) -> int:
    """``SIGKILL`` every process of :func:`student_processes` until none is left (a dying one may have
    forked); return how many were killed. The grader already killed its workers: this is the backstop."""
    killed = 0
    for _ in range(rounds):
        found = student_processes()
        if not found:
            break
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except OSError:
                pass
        time.sleep(0.01)
    return killed


def become_subreaper() -> bool:
    """Make this process a child subreaper (Linux): orphans of its descendants are re-parented to it, not to
    init, so that :func:`student_processes` still finds them. False where the system refuses."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False
