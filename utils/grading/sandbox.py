"""Start, watch and kill sandboxed worker processes (trusted side).

**Isolation**, strongest first; :func:`isolation` probes once per grader process, says on stderr which
one it uses, and falls back to the next when one does not work on this machine:

1. ``pidns+uid``: ``unshare --pid --fork --kill-child --mount-proc`` (a PID namespace with its own
   ``/proc``: killing its first process kills every descendant, including ``setsid()`` children and
   fork chains) and, as root, ``setpriv`` to an unprivileged uid of its own per job slot
   (``--no-new-privs``, no groups), so learner code cannot write the output directory, other
   students' folders or the grader's files, cannot ``ptrace`` the grader, and ``RLIMIT_NPROC`` holds.
2. ``pidns+uid+read``: the same, keeping only ``CAP_DAC_READ_SEARCH`` (read-only access everywhere),
   for a Python the unprivileged uid cannot reach (pyenv under ``/root``, mode 0700). Writes are still
   denied, but learner code can read files it should not (e.g. the reference solutions).
3. ``pidns``: the PID namespace only (as root when ``setpriv`` is missing; or ``--map-root-user``
   when the grader is not root). Learner code runs with the grader's uid.
4. ``session``: a new session; the grader kills the process group and every process carrying this
   sandbox's marker in its environment. A child that ``setsid()`` s *and* re-executes with a clean
   environment can escape this level.

**Extras** on top of the namespace levels, each probed on its own and kept where it works (the stderr
line names the ones active and the ones missing):

* ``mounts``: :mod:`utils.grading.jail` covers :data:`COVERED` (``/tmp``, ``/var/tmp``, ``/home``,
  ``/root``, ``/dev/shm``) with empty, size-limited ``tmpfs`` mounts, restores only the worker's own
  unit folder (read-write) and Python and the course package (read-only), then covers the submissions
  and output folders. Classmates' notebooks, other units' folders and whatever else sits in ``/tmp``
  are out of sight, and what the worker leaves in ``/tmp`` or ``/dev/shm`` is RAM it cannot grow past
  the size limit, freed with the namespace. With the Python of ``/root`` restored alone, the
  unprivileged uid reaches it without ``CAP_DAC_READ_SEARCH``.
* ``ipc``: ``unshare --ipc``: SysV shared memory, semaphores and message queues die with the worker.
* ``net``: ``unshare --net``: a network namespace with only a loopback that is down, so nothing on
  this machine (a Jupyter server on 127.0.0.1, say) or beyond can be reached.

**Limits** (set by the worker on itself after importing torch, before any learner code runs): address
space, CPU seconds, file size, number of processes (not enforced for uid 0) and no core dumps. The
wall-clock timeout is enforced here: it kills the whole process group with ``SIGKILL``.

**Output**: the worker's stdout and stderr go to a pipe that a thread drains, keeping only the first
:data:`OUTPUT_CAP` bytes, so a 100 MB print costs a moment, never memory.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

OUTPUT_CAP = 16 * 1024
UID_BASE = 64000
"""Job slot ``k`` runs learner code as uid/gid ``UID_BASE + k`` (no passwd entry needed)."""

COVERED = (("/tmp", "1777", "64m"), ("/var/tmp", "1777", "16m"), ("/home", "755", "1m"),
           ("/root", "755", "1m"), ("/dev/shm", "1777", "64m"))
"""``(folder, mode, tmpfs size)`` covered in the sandbox when the ``mounts`` extra is active."""

EXTRAS = ("mounts", "ipc", "net")
_EXTRA_TEXT = {
    "mounts": "private /tmp, /var/tmp, /home, /root and /dev/shm (size-limited tmpfs; submissions and "
              "output folders hidden)",
    "ipc": "own IPC namespace",
    "net": "no network (own network namespace, loopback down)",
}
_JAIL = str(Path(__file__).with_name("jail.py"))

_BOOTSTRAP = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); "
    "from utils.grading.worker import main; raise SystemExit(main(sys.argv[1:]))"
)


@dataclass(frozen=True)
class Isolation:
    level: str  # pidns+uid | pidns+uid+read | pidns | session
    prefix: tuple[str, ...]  # unshare ... (without setpriv)
    drop: str  # "" | "uid" | "uid+read"
    extras: frozenset[str] = frozenset()  # of EXTRAS

    def with_extras(self, extras) -> Isolation:
        return Isolation(self.level, self.prefix, self.drop, frozenset(extras))

    def command(self, slot: int, unit_dir: Path | None = None, hidden: tuple[str, ...] = ()) -> list[str]:
        """The command line up to the Python that runs the worker. ``unit_dir`` is restored inside the
        private mounts (read-write); ``hidden`` folders are covered last (submissions, output)."""
        cmd = list(self.prefix)
        if cmd:
            cmd[1:1] = [flag for extra, flag in (("mounts", "--mount"), ("ipc", "--ipc"), ("net", "--net"))
                        if extra in self.extras]
        if "mounts" in self.extras:
            cmd += [sys.executable, "-I", "-S", _JAIL, json.dumps(jail_spec(unit_dir, hidden)), "--"]
        if self.drop:
            uid = str(UID_BASE + slot)
            cmd += ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs"]
            if self.drop == "uid+read":
                cmd += ["--inh-caps=-all,+dac_read_search", "--ambient-caps=+dac_read_search"]
            else:
                cmd += ["--inh-caps=-all"]
        return cmd

    @property
    def uid(self) -> bool:
        return bool(self.drop)

    def describe(self) -> str:
        """One line: the level, then which extras are active and which are not."""
        text = self._level_text()
        if self.prefix:
            active = [_EXTRA_TEXT[e] for e in EXTRAS if e in self.extras]
            missing = [e for e in EXTRAS if e not in self.extras]
            text += "".join(f"; {part}" for part in active)
            if missing:
                text += f"; not active on this machine: {', '.join(missing)}"
        else:
            text += "; not active on this machine: " + ", ".join(EXTRAS)
        return text

    def _level_text(self) -> str:
        return {
            "pidns+uid": "PID namespace + unprivileged uid per job",
            "pidns+uid+read": "PID namespace + unprivileged uid per job keeping read access "
                              "(the Python interpreter is not reachable by an unprivileged user)",
            "pidns": "PID namespace, learner code runs as the grader's user",
            "session": "process session only (no PID namespace): a setsid() child that also clears its "
                       "environment may outlive its exercise",
        }[self.level]


_ISOLATION: Isolation | None = None
_LOCK = threading.Lock()


def _package_root() -> str:
    return str(Path(__file__).resolve().parents[2])


def _python_paths() -> list[str]:
    """What the worker's Python needs to start and import torch and the course: its prefixes, its
    interpreter's folders, ``sys.path`` and the course package."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(sys.executable), os.path.dirname(os.path.realpath(sys.executable)),
             os.path.join(_package_root(), "utils")}
    paths.update(entry for entry in sys.path if os.path.isabs(entry) and os.path.isdir(entry))
    covered = [folder for folder, _mode, _size in COVERED]
    # a covered folder itself (``/tmp`` as the folder of a script run from there) or one above it
    # (``/``) would bring everything back: Python does not need it
    return sorted(path for path in {os.path.abspath(p) for p in paths}
                  if not any(folder == path or folder.startswith(path.rstrip("/") + "/") for folder in covered))


def jail_spec(unit_dir: Path | None, hidden: tuple[str, ...] = ()) -> dict:
    """The JSON :mod:`utils.grading.jail` gets: covers, what to restore, what to cover last. A hidden
    folder that holds a restored path (the unit folder inside the output folder, say) stays visible."""
    keep = [[str(unit_dir), True]] if unit_dir is not None else []
    keep += [[path, False] for path in _python_paths()]
    kept = [os.path.abspath(path) for path, _ in keep]
    last = []
    for folder in hidden:
        folder = os.path.abspath(folder)
        if not any(path == folder or path.startswith(folder.rstrip("/") + "/") for path in kept):
            last.append([folder, "755", "1m"])
    return {"cover": [list(c) for c in COVERED], "keep": keep, "cover_last": last}


def _probe(isolation: Isolation, full: bool = True) -> bool:
    """Whether ``isolation`` runs a worker here: with ``full``, a Python that imports torch and the
    course's runner and, in a PID namespace, is PID 1; otherwise only a bare ``python -I -S`` (a quick
    test of one extra)."""
    if full:
        code = "import os, torch, utils.exercises.runner; open('probe', 'w').write(str(os.getpid()))"
        flags = ["-I"]
    else:
        code = "import os; open('probe', 'w').write(str(os.getpid()))"
        flags = ["-I", "-S"]
    tmp = Path(os.environ.get("TMPDIR", "/tmp"))
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="grader-probe-", dir=tmp))
    try:
        if isolation.uid:
            os.chown(folder, UID_BASE, UID_BASE)
        cmd = isolation.command(0, folder) + [sys.executable, *flags, "-c",
                                              f"import sys; sys.path.insert(0, {_package_root()!r}); {code}"]
        result = subprocess.run(cmd, cwd=folder, env=_env(folder, "probe"), capture_output=True, timeout=120,
                                check=False)
        if result.returncode != 0 or not (folder / "probe").exists():
            return False
        pid = (folder / "probe").read_text()
        return isolation.level == "session" or pid == "1"
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def candidates() -> list[Isolation]:
    """The namespace levels, strongest first (without extras; :func:`choose` adds them)."""
    root = os.geteuid() == 0
    levels = []
    if shutil.which("unshare"):
        base = ("unshare", "--pid", "--fork", "--kill-child") + (() if root else ("--map-root-user",))
        prefix = base + ("--mount-proc",)
        if root and shutil.which("setpriv"):
            levels += [Isolation("pidns+uid", prefix, "uid"), Isolation("pidns+uid+read", prefix, "uid+read")]
        levels += [Isolation("pidns", prefix, ""), Isolation("pidns", base, "")]
    levels.append(Isolation("session", (), ""))
    return levels


def choose(options: list[Isolation], probe=_probe) -> Isolation:
    """The first level that works, with every extra that works on it: each extra is tried alone with a
    quick probe, then the level with those extras gets the full probe (and, if that fails, the level
    alone)."""
    for option in options:
        if option.prefix:
            extras = [extra for extra in EXTRAS if probe(option.with_extras({extra}), full=False)]
            if extras and probe(option.with_extras(extras)):
                return option.with_extras(extras)
        if probe(option):
            return option
    return options[-1]


def isolation(announce: bool = True) -> Isolation:
    """The strongest isolation that works here, probed once per process and announced once on stderr."""
    global _ISOLATION
    with _LOCK:
        if _ISOLATION is None:
            options = candidates()
            chosen = choose(options)
            best = options[0]
            if announce:
                note = "" if chosen.level == best.level else f" (fallback: {best.level} does not work on this machine)"
                print(f"grader isolation: {chosen.describe()}{note}", file=sys.stderr)
            _ISOLATION = chosen
        return _ISOLATION


def _env(home: Path, marker: str) -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "TMPDIR": str(home),
        "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MPLBACKEND": "Agg",
        "GRADER_SANDBOX": marker,
    }


@dataclass
class Worker:
    """One running worker: the process, its status and command pipes and its capped output."""

    proc: subprocess.Popen
    status_fd: int
    command_fd: int
    marker: str
    isolation: Isolation
    output: bytearray = field(default_factory=bytearray)
    killed_by_grader: bool = False
    _buffer: bytes = b""
    _drain: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _inner: int = 0

    @classmethod
    def start(cls, jobdir: Path, workdir: Path, slot: int, iso: Isolation, hidden: tuple[str, ...] = ()) -> Worker:
        """Start a worker on ``jobdir``; with private mounts, ``hidden`` folders are covered too."""
        read_fd, write_fd = os.pipe()
        command_read, command_write = os.pipe()
        marker = f"{os.getpid()}-{jobdir.name}-{time.monotonic_ns()}"
        cmd = iso.command(slot, jobdir, hidden) + [sys.executable, "-I", "-c", _BOOTSTRAP, _package_root(),
                                   str(jobdir), str(write_fd), str(command_read)]
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
        worker = cls(proc, read_fd, command_write, marker, iso)
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
        if self.isolation.level == "session":
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


def sweep(worker: Worker) -> None:
    """Kill every process the worker started (not the worker itself): called after each exercise, so
    that no learner process outlives its exercise even while the worker goes on to the next one."""
    if worker.isolation.level == "session":
        kill_marked(worker.marker, spare=worker.proc.pid)
        return
    inner = worker.inner_pid()
    try:
        namespace = os.readlink(f"/proc/{inner}/ns/pid") if inner else ""
    except OSError:
        return
    if not namespace:
        return
    _kill_where(lambda pid: os.readlink(f"/proc/{pid}/ns/pid") == namespace, spare=inner, rounds=5)


def kill_marked(marker: str, spare: int = -1) -> None:
    """Fallback sweep: SIGKILL every process whose environment carries ``GRADER_SANDBOX=marker``."""
    needle = f"GRADER_SANDBOX={marker}".encode()

    def marked(pid: int) -> bool:
        with open(f"/proc/{pid}/environ", "rb") as env:
            return needle in env.read().split(b"\0")

    _kill_where(marked, spare=spare, rounds=3)


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
