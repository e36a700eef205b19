"""The grader's half of :mod:`utils.grading.forkserver` (trusted side): the fork server, started once per
grader process, and the workers it forks, watched like programs. If the server cannot start, or dies, workers
start as programs again (:data:`STARTED` counts both ways)."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading

STARTED = {"forked": 0, "program": 0}
"""How many workers this grader process started each way (tests read it)."""
ENABLED = True
"""False: every worker starts as a program (tests compare the two ways)."""


class Forked:
    """A worker forked by the server, watched like the ``subprocess.Popen`` of a worker started as a program:
    ``pid`` (its session and process group), ``stdout``, ``poll``, ``wait``, ``kill``."""

    def __init__(self, pid: int, stdout) -> None:
        self.pid, self.stdout, self.returncode, self.lost = pid, stdout, None, False
        self._done, self._lock = threading.Event(), threading.Lock()
        try:
            self._pidfd = os.pidfd_open(pid)
        except OSError:
            self._pidfd = -1

    def _ended(self, code: int) -> None:
        with self._lock:
            if self.returncode is None:
                self.returncode = code
            if self._pidfd >= 0:
                os.close(self._pidfd)
                self._pidfd = -1
        self._done.set()

    def poll(self) -> int | None:
        """Its exit code once the server said it; a process already gone waits (2 s at most) for that word, as
        ``Popen.poll`` reaps at once, so that a worker that died is not taken for one the grader stopped."""
        with self._lock:
            gone = self.returncode is None and self._pidfd >= 0 and bool(select.select([self._pidfd], [], [], 0)[0])
        if gone:
            self._done.wait(2)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired("forked worker", timeout or 0)
        return self.returncode

    def kill(self) -> None:
        with self._lock:
            if self._pidfd >= 0 and self.returncode is None:
                try:
                    signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
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
            try:
                self.proc = subprocess.Popen(
                    [sys.executable, "-I", "-S", "-c", code, str(kit.kit()), json.dumps(kit.site_paths()),
                     str(theirs.fileno())], env=isolation._env(kit.kit(), ""), cwd="/", pass_fds=(theirs.fileno(),),
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    start_new_session=True)
            except BaseException:
                ours.close()
                raise
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
                        try:
                            os.killpg(forked.pid, signal.SIGKILL)  # its session: the worker and what it started
                        except OSError:
                            pass
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
                self.alive = False  # a late answer would name this worker to the next request: no next request
                self.proc.kill()
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
            self.proc.wait()


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
    except BaseException as exc:
        stdout.close()
        if isinstance(exc, OSError):
            return None
        raise
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
