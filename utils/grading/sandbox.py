"""Start, watch and kill sandboxed worker processes (trusted side).

**Isolation**, strongest first; :func:`isolation` probes once per grader process, says on stderr which
one it uses, and falls back to the next when one does not work on this machine. The first two are
*safe*; below them the grader **refuses to grade** (:class:`WeakIsolation`, one paragraph naming what is
missing) unless weak isolation was allowed (``--allow-weak-isolation``,
:func:`~utils.grading.isolation.allow_weak_isolation`). :meth:`Isolation.summary` is the short line
every run shows the instructor.

1. ``pidns+uid``: ``unshare --pid --fork --kill-child --mount-proc`` (a PID namespace with its own
   ``/proc``: killing its first process kills every descendant, including ``setsid()`` children and
   fork chains) and, as root, ``setpriv`` to an unprivileged uid of its own per job slot
   (``--no-new-privs``, no groups), so learner code cannot write the output directory, other
   students' folders or the grader's files, cannot ``ptrace`` the grader, and ``RLIMIT_NPROC`` holds.
2. ``uid``: the same uid, without a PID namespace (a container without ``CAP_SYS_ADMIN``, such as
   Docker's default, allows ``setpriv`` but not ``unshare``). Every process of that uid is the
   student's: the sweeps kill them by uid, ``setsid()`` or a cleared environment changes nothing. Each
   grader process holds its own block of uids (:func:`~utils.grading.isolation.sandbox_uid`), so no
   sweep touches another grader's sandbox. No private file system: learner code can read what any
   user may read on this machine (the line says whether that includes the course's reference code).
3. weak, refused by default: ``pidns+uid+read`` and ``uid+read`` (the uid keeps
   ``CAP_DAC_READ_SEARCH``, for a Python that an unprivileged user cannot reach, such as pyenv under a
   private ``/root``: it reads every file), ``pidns`` (learner code runs as the grader's user: as root,
   or, for a grader that is not root, without private mounts) and ``session`` (a new session only).

**Extras** on top of the namespace levels, each probed on its own and kept where it works (the stderr
line names the ones active and the ones missing):

* ``mounts``: :mod:`utils.grading.jail` gives the worker a file system of its own (``pivot_root``):
  the system's ``/usr`` and ``/etc`` read-only, Python, its packages and the worker kit
  (:mod:`utils.grading.kit`) read-only, the worker's unit folder read-write, size-limited ``tmpfs`` at
  ``/tmp``, ``/var/tmp`` and ``/dev/shm``, and nothing else: no ``/run`` (no unix socket of the
  machine), no ``/home``, no course checkout, reference code or ``solutions/``, no submissions or
  output folders, no other unit's folder.
* ``ipc``: ``unshare --ipc``: SysV shared memory, semaphores and message queues die with the worker.
* ``net``: ``unshare --net``: a network namespace with only a loopback that is down, so nothing on
  this machine (a Jupyter server on 127.0.0.1, an abstract unix socket) or beyond can be reached.

**Memory** is bounded per student, on all of its processes together (:mod:`utils.grading.memory`: a
cgroup v2 or v1 of its own where the grader may make one, else a watchdog); **limits** per process are
set by the worker on itself after importing torch, before any learner code runs: address space, CPU
seconds, file size, number of processes (not enforced for uid 0) and no core dumps. Each exercise's
timeout is CPU time (``RLIMIT_CPU`` in its forked process); the grader enforces only the wall-clock
backstop (:func:`utils.grading.unit.wall_limit`), killing the whole process group with ``SIGKILL``.

**Forked workers**: at the ``pidns+uid`` level with the grader as root, a worker is a fork of this grader's
fork server, which has imported torch once (:mod:`utils.grading.forkserver`): the same namespaces, jail
and uid, made by system calls rather than programs. Elsewhere it starts as the program above.

**Output**: the worker's stdout and stderr go to a pipe that a thread drains, keeping only the first
:data:`OUTPUT_CAP` bytes (what a worker that fails to start says). An exercise's process writes to
``/dev/null`` instead (:mod:`utils.grading.worker`), so learner output never has to cross the pipe: a
300 MB print takes the same time on a busy machine as on an idle one.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from utils.grading import forks, kit
from utils.grading.isolation import (  # noqa: F401  (the sandbox's public names, defined there)
    _JAIL,  # noqa: F401
    EXTRAS,
    SAFE_LEVELS,
    UID_BASE,
    Isolation,
    WeakIsolation,
    _env,
    _python_paths,
    allow_weak_isolation,
    candidates,
    choose,
    isolation,
    jail_spec,
    sandbox_uid,
)
from utils.grading.memory import Bound

OUTPUT_CAP = 16 * 1024


@dataclass
class Worker:
    """One running worker: the process, its status and command pipes and its capped output."""

    proc: subprocess.Popen | forks.Forked  # a program, or a fork of this grader's fork server
    status_fd: int
    command_fd: int
    marker: str
    isolation: Isolation
    uid: int = -1  # the sandbox uid at the uid levels
    output: bytearray = field(default_factory=bytearray)
    killed_by_grader: bool = False
    _buffer: bytes = b""
    _drain: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _inner: int = 0

    @classmethod
    def start(cls, jobdir: Path, workdir: Path, slot: int, iso: Isolation, hidden: tuple[str, ...] = (),
              bound: Bound | None = None) -> Worker:
        """Start a worker on ``jobdir``, inside ``bound`` (its memory cgroup) when given; with private
        mounts, ``hidden`` folders are covered where a kept path would show them."""
        read_fd, write_fd = os.pipe()
        command_read, command_write = os.pipe()
        marker = f"{os.getpid()}-{jobdir.name}-{time.monotonic_ns()}"
        if forks.usable(iso):
            try:
                proc = forks.spawn(iso, slot, jobdir, workdir, hidden, bound, _env(workdir, marker), write_fd,
                                   command_read)
            except BaseException:
                os.close(read_fd)
                os.close(command_write)
                raise
            finally:
                os.close(write_fd)
                os.close(command_read)
            if proc is not None:
                return cls._watch(proc, read_fd, command_write, marker, iso, slot)
            os.close(read_fd)  # a fork that failed half-way may hold the other ends: the program gets pipes of its own
            os.close(command_write)
            read_fd, write_fd = os.pipe()
            command_read, command_write = os.pipe()
        forks.STARTED["program"] += 1
        cmd = [*(bound.prefix() if bound is not None else []), *iso.command(slot, jobdir, hidden),
               sys.executable, "-I", "-S", *kit.bootstrap_args(), str(jobdir), str(write_fd), str(command_read)]
        try:
            proc = subprocess.Popen(
                cmd, cwd=workdir, env=_env(workdir, marker), stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, pass_fds=(write_fd, command_read),
                start_new_session=True, close_fds=True,
            )
        except BaseException:
            for fd in (read_fd, command_write):
                os.close(fd)
            raise
        finally:
            os.close(write_fd)
            os.close(command_read)
        return cls._watch(proc, read_fd, command_write, marker, iso, slot)

    @classmethod
    def _watch(cls, proc, read_fd: int, command_write: int, marker: str, iso: Isolation, slot: int) -> Worker:
        worker = cls(proc, read_fd, command_write, marker, iso, sandbox_uid(slot) if iso.uid else -1)
        worker._drain = threading.Thread(target=worker._drain_output, daemon=True)
        worker._drain.start()
        return worker

    def _drain_output(self) -> None:
        stream = self.proc.stdout
        assert stream is not None
        while True:
            chunk = stream.read1(65536)
            if not chunk:
                break
            room = OUTPUT_CAP - len(self.output)
            if room > 0:
                self.output += chunk[:room]

    @property
    def lost(self) -> bool:
        """Whether the worker was killed because its fork server died (:mod:`utils.grading.forks`)."""
        return getattr(self.proc, "lost", False)

    @property
    def stopped_by_grader(self) -> bool:
        """Whether the grader's side ended the worker (it stopped answering, or its fork server died)."""
        return self.killed_by_grader or self.lost

    def send(self, line: str) -> bool:
        """Send one command line (``run i``); False when the worker no longer reads."""
        try:
            os.write(self.command_fd, (line + "\n").encode("ascii"))
        except OSError:
            return False
        return True

    def next_line(self, deadline: float) -> str | None:
        """The next status line before ``deadline`` (monotonic), ``""`` at EOF, ``None`` on timeout."""
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([self.status_fd], [], [], remaining)
            if not ready:
                return None
            chunk = os.read(self.status_fd, 4096)
            if not chunk:
                return ""
            self._buffer += chunk
            if len(self._buffer) > 65536:  # garbage on the status pipe: treat as dead
                return ""
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode("ascii", "replace").strip()

    def inner_pid(self) -> int:
        """The worker's Python process: the first child of ``unshare`` (PID 1 of its namespace), or the
        process itself at the ``session`` level. 0 when it is gone."""
        if self._inner:
            return self._inner
        if not self.isolation.prefix:
            self._inner = self.proc.pid
            return self._inner
        try:
            with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children", encoding="ascii") as children:
                self._inner = int(children.read().split()[0])
        except (OSError, ValueError, IndexError):
            return 0
        return self._inner

    def freeze(self, wait: float = 3.0) -> bool:
        """Stop the worker (every thread of it, with ``SIGSTOP``) and kill every other process of the
        sandbox, so that nothing of it runs while the grader reads what it wrote. True once every thread
        is seen stopped; False when that could not be confirmed (the caller then kills the worker)."""
        pid = self.inner_pid()
        if not pid:
            return False
        try:
            os.kill(pid, signal.SIGSTOP)
        except OSError:
            return False
        sweep(self)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if _all_stopped(pid):
                return True
            time.sleep(0.002)
        return False

    def thaw(self) -> None:
        pid = self.inner_pid()
        if pid:
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError:
                pass

    def terminate(self) -> None:
        """Kill the worker and everything it started, without waiting (safe from another thread)."""
        self.killed_by_grader = self.killed_by_grader or self.proc.poll() is None
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.uid > 0 and not self.isolation.pidns:
            _kill_where(lambda pid: _uid_of(pid) == self.uid, spare=-1, rounds=50)
        elif not self.isolation.pidns:
            kill_marked(self.marker)

    def kill(self) -> None:
        """Kill the worker and everything it started; wait for it. Safe to call twice."""
        self.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        if self._drain is not None:
            self._drain.join(timeout=5)
        with self._lock:
            for name in ("status_fd", "command_fd"):
                fd = getattr(self, name)
                if fd >= 0:
                    os.close(fd)
                    setattr(self, name, -1)

    def exit_description(self) -> str:
        code = self.proc.poll()
        if code is None:
            return "still running"
        if code < 0:
            try:
                return f"killed by signal {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exited with status {code}"


def _all_stopped(pid: int) -> bool:
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True  # gone
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/stat", encoding="ascii") as handle:
                state = handle.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in ("T", "t", "Z", "X"):
            return False
    return True


def members(worker: Worker) -> list[int]:
    """Every live process of the worker's sandbox, the worker included: those in its PID namespace, else
    those of its uid, else those carrying its marker."""
    inner = worker.inner_pid()
    if worker.isolation.pidns:
        try:
            namespace = os.readlink(f"/proc/{inner}/ns/pid") if inner else ""
        except OSError:
            return []
        return _pids_where(lambda pid: os.readlink(f"/proc/{pid}/ns/pid") == namespace) if namespace else []
    if worker.uid > 0:
        return _pids_where(lambda pid: _uid_of(pid) == worker.uid)
    return _pids_where(lambda pid: _marked(pid, worker.marker))


def sweep(worker: Worker) -> None:
    """Kill every process the worker started (not the worker itself): called after each exercise, so
    that no learner process outlives its exercise even while the worker goes on to the next one."""
    inner = worker.inner_pid()
    if worker.isolation.pidns:
        try:
            namespace = os.readlink(f"/proc/{inner}/ns/pid") if inner else ""
        except OSError:
            return
        if namespace:
            _kill_where(lambda pid: os.readlink(f"/proc/{pid}/ns/pid") == namespace, spare=inner, rounds=5)
    elif worker.uid > 0:  # every process of this uid is the student's: none escapes by setsid() or exec
        _kill_where(lambda pid: _uid_of(pid) == worker.uid, spare=inner or worker.proc.pid, rounds=50)
    else:
        kill_marked(worker.marker, spare=worker.proc.pid)


SHARED = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/dev/mqueue")
"""Folders every uid may write: without private mounts, what a student's uid left there is removed."""
SHARED_DEPTH = 3
"""How deep :func:`remove_leftovers` looks into world-writable folders of other users inside :data:`SHARED`."""


def remove_leftovers(uid: int, folders: tuple[str, ...] = SHARED, depth: int = SHARED_DEPTH) -> None:
    """Remove what ``uid`` left in ``folders`` (its processes are gone): each entry it owns, and what it put
    in another user's world-writable folder there (``/tmp/.X11-unix``), ``depth`` folders down. The next
    student graded under this uid finds nothing of the last one's."""
    from utils.grading import files

    for folder in folders:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                found = entry.stat(follow_symlinks=False)
                if found.st_uid == uid:
                    files.remove_tree(entry.path)
                elif depth > 1 and entry.is_dir(follow_symlinks=False) and found.st_mode & 0o002:
                    remove_leftovers(uid, (entry.path,), depth - 1)
            except OSError:
                continue


def _uid_of(pid: int) -> int:
    """The real uid of ``pid`` (-1 when it is gone)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Uid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return -1


def _marked(pid: int, marker: str) -> bool:
    with open(f"/proc/{pid}/environ", "rb") as env:
        return f"GRADER_SANDBOX={marker}".encode() in env.read().split(b"\0")


def _pids_where(matches) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and matches(int(entry)):
                found.append(int(entry))
        except OSError:
            continue
    return found


def kill_marked(marker: str, spare: int = -1) -> None:
    """Fallback sweep: SIGKILL every process whose environment carries ``GRADER_SANDBOX=marker``."""
    _kill_where(lambda pid: _marked(pid, marker), spare=spare, rounds=3)


def _kill_where(matches, *, spare: int, rounds: int) -> None:
    """SIGKILL every process but ``spare`` for which ``matches(pid)`` holds, repeating (up to ``rounds``
    times) while any was found, since a dying process's children may have forked meanwhile."""
    for _ in range(rounds):
        found = False
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == spare:
                continue
            try:
                if matches(int(entry)):
                    os.kill(int(entry), signal.SIGKILL)
                    found = True
            except OSError:
                continue
        if not found:
            break
