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

The grader's side (:func:`spawn`) hands the server the worker's three pipes (``SCM_RIGHTS``) and gets back
a :class:`Forked`, which the sandbox watches, stops and kills like the ``subprocess.Popen`` it replaces. If
the server cannot start, or dies, workers start as programs again (:data:`STARTED` counts both ways).
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWPID = 0x00020000, 0x08000000, 0x40000000, 0x20000000
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
STARTED = {"forked": 0, "program": 0}
"""How many workers this grader process started each way (tests read it)."""
ENABLED = True
"""False: every worker starts as a program (tests compare the two ways)."""


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


def _worker(request: dict, fds: list[int], parent_alive: int) -> int:
    """PID 1 of the new namespace: jail, drop, then the worker itself. ``parent_alive`` reads end of file once
    the parent is gone (its parent is outside the namespace: ``getppid()`` says 0)."""
    if _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        _fail("parent death signal")
    if select.select([parent_alive], [], [], 0)[0]:
        return 3  # the parent died before the signal was armed
    os.close(parent_alive)
    out, status, command = fds
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    keep = sorted({0, 1, 2, status, command})
    for low, high in zip(keep, [*keep[1:], 1 << 20]):
        os.closerange(low + 1, high)
    os.set_inheritable(status, True)
    os.set_inheritable(command, True)
    os.chdir(request["cwd"])
    from utils.grading import jail

    if request["jail"] is not None:
        jail.jail(request["jail"])
    elif request["mount_proc"]:  # unshare --mount-proc: this namespace's /proc, nothing propagating back
        jail._mount(None, "/", None, jail.MS_REC | jail.MS_PRIVATE)
        jail._mount("proc", "/proc", "proc", jail.MS_NOSUID | jail.MS_NODEV | jail.MS_NOEXEC)
    _drop(request["uid"])
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
    if os.WIFSIGNALED(wait_status):
        number = os.WTERMSIG(wait_status)
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
    return os.waitstatus_to_exitcode(wait_status) if os.WIFEXITED(wait_status) else 1


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
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    import utils.exercises.runner
    from utils.grading import jail, serialize, worker  # noqa: F401  (imported once, here: each worker starts warm)

    worker._index_torch()
    utils.exercises.runner.read_torch_names()
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
                os.write(fds[0], f"forkserver: {type(exc).__name__}: {exc}\n".encode("utf-8", "replace"))
            finally:
                os._exit(code)
        for fd in fds:
            os.close(fd)
        sock.send(json.dumps({"pid": pid}).encode())


# --------------------------------------------------------------------------------------------------
# The grader's side (trusted)
# --------------------------------------------------------------------------------------------------


class Forked:
    """A worker forked by the server, watched like the ``subprocess.Popen`` of a worker started as a program:
    ``pid`` (its session and process group), ``stdout``, ``poll``, ``wait``, ``kill``."""

    def __init__(self, pid: int, stdout) -> None:
        self.pid, self.stdout, self.returncode, self.lost = pid, stdout, None, False
        self._done = threading.Event()
        try:
            self._pidfd = os.pidfd_open(pid)
        except OSError:
            self._pidfd = -1

    def _ended(self, code: int) -> None:
        if self.returncode is None:
            self.returncode = code
        if self._pidfd >= 0:
            os.close(self._pidfd)
            self._pidfd = -1
        self._done.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired("forked worker", timeout or 0)
        return self.returncode

    def kill(self) -> None:
        fd = self._pidfd
        if fd >= 0 and self.returncode is None:
            try:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            except OSError:
                pass


class _Server:
    def __init__(self) -> None:
        from utils.grading import isolation, kit

        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        code = ("import sys, json; kit = sys.argv.pop(1); extra = json.loads(sys.argv.pop(1)); "
                "sys.path[:] = [kit, *sys.path, *extra]; "
                "from utils.grading.forkserver import serve; raise SystemExit(serve(int(sys.argv[1])))")
        with theirs:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", code, str(kit.kit()), json.dumps(kit.site_paths()),
                 str(theirs.fileno())], env=isolation._env(kit.kit(), ""), cwd="/", pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True)
        self.sock, self.lock = ours, threading.Lock()
        self.live: dict[int, Forked] = {}
        self.exits: dict[int, int] = {}  # ended before spawn() saw its pid
        self.replies: list[dict] = []
        self.cond = threading.Condition()
        self.alive = True
        if not self._reply(timeout=120).get("ready"):
            self.close()
            raise OSError("the fork server did not start")
        threading.Thread(target=self._read, daemon=True).start()

    def _next(self, timeout: float | None) -> dict:
        ready, _, _ = select.select([self.sock], [], [], timeout)
        data = self.sock.recv(65536) if ready else b""
        return json.loads(data) if data else {}

    def _reply(self, timeout: float) -> dict:
        try:
            return self._next(timeout)
        except (OSError, ValueError):
            return {}

    def _read(self) -> None:
        while True:
            try:
                message = self._next(None)
            except (OSError, ValueError):
                message = {}
            with self.cond:
                if not message:
                    self.alive = False
                    for forked in list(self.live.values()):  # their parent is gone: nothing will say how they end
                        forked.lost = True
                        forked.kill()
                        forked._ended(-signal.SIGKILL)
                    self.live.clear()
                    self.cond.notify_all()
                    return
                if "exit" in message:
                    forked = self.live.pop(message["exit"], None)
                    if forked is None:
                        self.exits[message["exit"]] = int(message["code"])
                    else:
                        forked._ended(int(message["code"]))
                else:
                    self.replies.append(message)
                    self.cond.notify_all()

    def spawn(self, request: dict, out: int, status: int, command: int, stdout) -> Forked:
        with self.lock, self.cond:
            if not self.alive:
                raise OSError("the fork server is gone")
            socket.send_fds(self.sock, [json.dumps(request).encode()], [out, status, command])
            if not self.cond.wait_for(lambda: self.replies or not self.alive, timeout=60) or not self.replies:
                raise OSError("the fork server did not answer")
            reply = self.replies.pop(0)
            if "pid" not in reply:
                raise OSError(f"the fork server refused: {reply.get('error')}")
            forked = Forked(reply["pid"], stdout)
            if reply["pid"] in self.exits:
                forked._ended(self.exits.pop(reply["pid"]))
            else:
                self.live[reply["pid"]] = forked
            return forked

    def close(self) -> None:
        self.alive = False
        self.sock.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


_UNSHARE = ("unshare", "--pid", "--fork", "--kill-child")
_SERVER: _Server | None = None
_FAILED = False
_LOCK = threading.Lock()


def usable(iso) -> bool:
    """Whether workers of ``iso`` can be forked: root, a PID namespace and a uid per slot, nothing else asked."""
    return (ENABLED and not _FAILED and iso.root and iso.drop == "uid"
            and tuple(iso.prefix) in (_UNSHARE, (*_UNSHARE, "--mount-proc")))


def server() -> _Server | None:
    """This grader process's fork server (started on first use); None when it cannot start."""
    global _SERVER, _FAILED
    with _LOCK:
        if _SERVER is not None and not _SERVER.alive:
            _SERVER.close()
            _SERVER = None
        if _SERVER is None and not _FAILED:
            try:
                _SERVER = _Server()
            except OSError:
                _FAILED = True
        return _SERVER


def spawn(iso, slot: int, jobdir, workdir, hidden: tuple[str, ...], bound, env: dict[str, str], status: int,
          command: int) -> Forked | None:
    """A worker of ``iso`` for job slot ``slot`` on ``jobdir``, forked by the server, with the grader's ends of
    its pipes ``status`` (written by the worker) and ``command`` (read by it); None when it cannot be forked:
    the caller then starts it as a program."""
    from utils.grading import isolation

    if not usable(iso):
        return None
    found = server()
    if found is None:
        return None
    request = {
        "cwd": str(workdir), "jobdir": str(jobdir), "env": env, "uid": isolation.sandbox_uid(slot),
        "extras": sorted(iso.extras), "mount_proc": "--mount-proc" in iso.prefix,
        "jail": isolation.jail_spec(jobdir, hidden) if "mounts" in iso.extras else None,
        "cgroup": str(bound.folder / "cgroup.procs") if bound is not None and bound.folder is not None else "",
    }
    out_read, out_write = os.pipe()
    stdout = os.fdopen(out_read, "rb")
    try:
        forked = found.spawn(request, out_write, status, command, stdout)
    except OSError:
        stdout.close()
        return None
    finally:
        os.close(out_write)
    STARTED["forked"] += 1
    return forked


def stop() -> None:
    """End this process's fork server (the next worker starts a fresh one)."""
    global _SERVER
    with _LOCK:
        if _SERVER is not None:
            _SERVER.close()
            _SERVER = None
