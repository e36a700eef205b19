"""Sandboxed workers forked from one process that has already imported torch (both sides).

Importing torch costs a worker about 1.1 s of CPU, most of its start: a class of 100 students with seven
chapters starts 700 workers. So, where the grader runs as root with the full isolation (a PID namespace,
a uid per job slot and private mounts; :mod:`utils.grading.isolation`), one **fork server** per grader
process imports torch and the worker kit once, and every worker is a fork of it. The server is started
like a worker (``python -I -S``, the kit and Python's packages only, a plain environment) and never runs
learner code, nor reads anything of the course but the kit: what a worker inherits from it is what a
worker would have imported itself. For each worker it forks a process that does, in Python, what the
command line of :meth:`Isolation.command <utils.grading.isolation.Isolation.command>` does with programs:

1. its own session, and the student's memory cgroup when there is one (the ``/bin/sh`` prefix);
2. ``unshare`` of the PID namespace and of the mount, IPC and network namespaces that are active, then a
   fork: the child is PID 1 of the new namespace, killed with its parent (``unshare --fork --kill-child``),
   and the parent waits for it and ends as it ended;
3. in the child: :func:`utils.grading.jail.jail` (private mounts), then the slot's uid and gid with no
   supplementary groups, no capability, and ``no_new_privs`` (``setpriv``);
4. the worker's own :func:`utils.grading.worker.main`, as if started from the kit.

The grader's side (:mod:`utils.grading.forks`) starts the server, hands it the worker's three pipes
(``SCM_RIGHTS``) and gets back a :class:`~utils.grading.forks.Forked`, which the sandbox watches, stops and
kills like the ``subprocess.Popen`` it replaces.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWPID = 0x00020000, 0x08000000, 0x40000000, 0x20000000
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38


# --------------------------------------------------------------------------------------------------
# The server (untrusted side's parent: runs as root, outside any sandbox, never runs learner code)
# --------------------------------------------------------------------------------------------------


def _libc():
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _fail(what: str) -> None:
    import ctypes

    raise OSError(ctypes.get_errno(), f"{what}: {os.strerror(ctypes.get_errno())}")


def _drop(uid: int) -> None:
    """What ``setpriv --reuid --regid --clear-groups --no-new-privs --inh-caps=-all`` does."""
    import ctypes

    libc = _libc()
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)  # permitted, effective and ambient capabilities are cleared here
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        _fail("no_new_privs")
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable (two words each): all empty
    if libc.capset(header, data) != 0:
        _fail("capset")


def _die_with_parent(parent_alive: int) -> None:
    """``SIGKILL`` when the parent dies (``unshare --kill-child``), then a check that it has not died already."""
    if _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        _fail("parent death signal")
    if select.select([parent_alive], [], [], 0)[0]:  # end of file: the parent is gone
        os._exit(3)


def _worker(request: dict, fds: list[int], parent_alive: int) -> int:
    """PID 1 of the new namespace: jail, drop, then the worker itself. ``parent_alive`` reads end of file once
    the parent is gone (its parent is outside the namespace: ``getppid()`` says 0)."""
    _die_with_parent(parent_alive)
    out, status, command = fds
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    keep = sorted({0, 1, 2, status, command, parent_alive})
    for low, high in zip(keep, [*keep[1:], 1 << 20]):
        os.closerange(low + 1, high)
    os.set_inheritable(status, True)
    os.set_inheritable(command, True)
    os.chdir(request["cwd"])
    from utils.grading import jail

    if request["mount_proc"]:  # unshare --mount-proc: this namespace's /proc, nothing propagating back
        jail._mount(None, "/", None, jail.MS_REC | jail.MS_PRIVATE)
        jail._mount("proc", "/proc", "proc", jail.MS_NOSUID | jail.MS_NODEV | jail.MS_NOEXEC)
    if request["jail"] is not None:
        jail.jail(request["jail"])
    _drop(request["uid"])
    _die_with_parent(parent_alive)  # the kernel forgets the parent death signal when the uid changes
    os.close(parent_alive)
    os.environ.clear()
    os.environ.update(request["env"])
    from utils.grading import worker

    sys.argv[:] = ["-c", request["jobdir"], str(status), str(command)]  # as the program's bootstrap leaves it
    return worker.main(sys.argv[1:])


def _child(request: dict, fds: list[int]) -> int:
    """The server's child: ``unshare`` with ``--fork --kill-child``; returns (or dies) as its child ended."""
    os.setsid()
    if request["cgroup"]:
        with open(request["cgroup"], "w", encoding="ascii") as procs:
            procs.write(str(os.getpid()))
    flags = CLONE_NEWPID | sum(flag for name, flag in (("mounts", CLONE_NEWNS), ("ipc", CLONE_NEWIPC),
                                                        ("net", CLONE_NEWNET)) if name in request["extras"])
    flags |= CLONE_NEWNS if request["mount_proc"] else 0
    if _libc().unshare(flags) != 0:
        _fail("unshare")
    alive_read, alive_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            os.close(alive_write)
            code = _worker(request, fds, alive_read)
        except BaseException as exc:  # noqa: BLE001  (a line for the grader's report, then out)
            os.write(2, f"forkserver: {type(exc).__name__}: {exc}\n".encode("utf-8", "replace"))
        finally:
            os._exit(code)
    for fd in (*fds, alive_read):
        os.close(fd)
    while True:
        try:
            _, wait_status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    if os.WIFSIGNALED(wait_status):  # end by the same signal, as unshare does
        number = os.WTERMSIG(wait_status)
        try:
            signal.signal(number, signal.SIG_DFL)  # SIGKILL's cannot be changed (it raises): it needs no reset
        except (OSError, ValueError):
            pass
        os.kill(os.getpid(), number)
        return 128 + number
    return os.waitstatus_to_exitcode(wait_status)


def _reap(sock: socket.socket) -> None:
    while True:
        try:
            pid, wait_status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        sock.send(json.dumps({"exit": pid, "code": os.waitstatus_to_exitcode(wait_status)}).encode())


def serve(fd: int) -> int:
    """The server's loop: one worker per request on socket ``fd``; ends when the grader closes it."""
    from utils.grading import jail, serialize, worker  # noqa: F401  (imported once, here: each worker starts warm)

    worker.warm()
    import gc

    gc.collect()
    gc.freeze()  # the collector leaves what is here alone: a worker's copy of these pages stays shared
    sock = socket.socket(fileno=fd)
    wake_read, wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sock.send(b'{"ready": true}')
    while True:
        ready, _, _ = select.select([sock, wake_read], [], [])
        if wake_read in ready:
            try:
                while os.read(wake_read, 512):
                    pass
            except BlockingIOError:
                pass
            _reap(sock)
        if sock not in ready:
            continue
        try:
            data, fds, _flags, _addr = socket.recv_fds(sock, 1 << 20, 3)
        except OSError:
            return 0
        if not data:
            return 0
        request = json.loads(data)
        if len(fds) != 3:
            for fd in fds:
                os.close(fd)
            sock.send(json.dumps({"error": "three descriptors expected"}).encode())
            continue
        pid = os.fork()
        if pid == 0:
            code = 3
            try:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                sock.close()
                os.close(wake_read)
                os.close(wake_write)
                code = _child(request, fds)
            except BaseException as exc:  # noqa: BLE001
                try:
                    os.write(fds[0], f"forkserver: {type(exc).__name__}: {exc}\n".encode("utf-8", "replace"))
                except OSError:
                    pass
            finally:
                os._exit(code)
        for fd in fds:
            os.close(fd)
        sock.send(json.dumps({"pid": pid}).encode())
