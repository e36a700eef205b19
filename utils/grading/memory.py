"""One memory bound per student, on all of that student's processes together (trusted side).

``--memory`` is the RAM a student's code may use above what its worker holds once torch is imported,
counted over every process the student's code runs (the exercise's process, its children, their
children), not per process. Each process also keeps its own address-space limit (``RLIMIT_AS``, set
by :mod:`utils.grading.worker`), which turns one oversized tensor into a plain ``MemoryError``.

How the bound is enforced, the first that works on this machine (:func:`kind`, probed once):

* ``cgroup2``: a cgroup v2 of the student's own under the grader's cgroup, with ``memory.max`` and
  ``memory.oom.group`` (the kernel kills all of the student's processes at once). Needs the unified
  hierarchy with the ``memory`` controller delegated to the grader's cgroup.
* ``cgroup1``: a memory cgroup (v1) of the student's own, with ``memory.limit_in_bytes``; the kernel's
  OOM killer ends a process of that student only, and the grader then stops the exercise.
* ``watch``: no cgroup the grader may create (a default Docker container mounts them read-only). A
  thread sums the proportional set size (``Pss``, so the pages a forked child shares with its worker
  count once) of the student's processes every :data:`WATCH_SECONDS` and kills all of them once the
  sum is over the bound. It reacts within that interval: a student can briefly hold more, up to what
  each process's ``RLIMIT_AS`` allows.

Whichever is in force, a student over the bound gets the status ``memory`` for that exercise
(:meth:`Bound.tripped`), and the line the grader prints names it.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

KINDS = ("cgroup2", "cgroup1", "watch")
WATCH_SECONDS = 0.05
TEXT = {
    "cgroup2": "memory per student: cgroup v2 (all of a student's processes together)",
    "cgroup1": "memory per student: cgroup v1 (all of a student's processes together)",
    "watch": f"memory per student: a watchdog summing a student's processes every {WATCH_SECONDS:g} s "
             "(no cgroup available)",
}

_KIND: str | None = None
_LOCK = threading.Lock()
_COUNT = 0


def _own_cgroup(version: int) -> Path | None:
    """This process's cgroup folder in the v2 (unified) or v1 ``memory`` hierarchy, or None."""
    try:
        lines = Path("/proc/self/cgroup").read_text(encoding="ascii").splitlines()
    except OSError:
        return None
    for line in lines:
        number, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if version == 2 and number == "0" and controllers == "":
            for top in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
                if Path(top, "cgroup.controllers").is_file():
                    return Path(top + path)
        if version == 1 and "memory" in controllers.split(","):
            return Path("/sys/fs/cgroup/memory" + path)
    return None


def _make(version: int, name: str) -> Path | None:
    """A child cgroup of ours with a memory limit we may set, or None."""
    parent = _own_cgroup(version)
    if parent is None or not parent.is_dir():
        return None
    if version == 2:
        try:
            if "memory" not in (parent / "cgroup.subtree_control").read_text().split():
                (parent / "cgroup.subtree_control").write_text("+memory")
        except OSError:
            return None
    folder = parent / name
    try:
        folder.mkdir()
    except OSError:
        return None
    limit = folder / ("memory.max" if version == 2 else "memory.limit_in_bytes")
    if not limit.is_file():
        _remove(folder)
        return None
    return folder


def _remove(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass


def kind() -> str:
    """Which bound this machine allows, probed once per process: one of :data:`KINDS`."""
    global _KIND
    with _LOCK:
        if _KIND is None:
            _KIND = "watch"
            for version in (2, 1):
                folder = _make(version, f"grader-probe-{os.getpid()}")
                if folder is not None:
                    _remove(folder)
                    _KIND = f"cgroup{version}"
                    break
        return _KIND


def pss(pids: Iterable[int]) -> int:
    """Bytes of proportional set size of ``pids`` together (gone processes count 0)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as rollup:
                for line in rollup:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
                        break
        except (OSError, ValueError):
            continue
    return total


class Bound:
    """The bound on one student's processes: made before its worker starts (:meth:`prefix` puts the
    worker in it), set once the worker is ready (:meth:`arm`), checked after each exercise
    (:meth:`tripped`), removed with :meth:`close`."""

    def __init__(self, how: str | None = None, ram: tuple[Path, int] | None = None) -> None:
        """``ram``: ``(folder, size)``, the student's unit folder, made a ``tmpfs`` of ``size`` bytes
        where this process may mount one (:meth:`keep_in_ram`)."""
        global _COUNT
        self.ram = self.keep_in_ram(*ram) if ram is not None else None
        self.kind = how or kind()
        with _LOCK:
            _COUNT += 1
            name = f"grader-{os.getpid()}-{_COUNT}"
        self.folder = _make(int(self.kind[-1]), name) if self.kind != "watch" else None
        if self.kind != "watch" and self.folder is None:
            self.kind = "watch"  # the probe worked, this one did not: say what is in force
        self._oom_seen = 0
        self._tripped = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @staticmethod
    def keep_in_ram(folder: Path, size: int) -> Path | None:
        """Mount an empty ``tmpfs`` of ``size`` bytes on ``folder`` (before anything is in it) and return
        ``folder``; None where it cannot be mounted. ``RLIMIT_FSIZE`` bounds each file, not how many: in a
        folder of its own, what a student writes is RAM (charged to its cgroup), never the disk that the
        grader and the students graded meanwhile share."""
        from utils.grading import jail

        try:
            jail._mount("tmpfs", str(folder), "tmpfs", jail.MS_NOSUID | jail.MS_NODEV, f"size={size},mode=700")
        except (jail.JailError, OSError):
            return None
        return folder

    def prefix(self) -> list[str]:
        """What goes before the worker's command line so that it starts inside the cgroup."""
        if self.folder is None:
            return []
        return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(self.folder / "cgroup.procs")]

    def arm(self, limit: int, members: Callable[[], list[int]], kill: Callable[[], None]) -> None:
        """Allow ``limit`` bytes above what the student's processes (``members()``) hold now; ``kill``
        ends all of them (the watchdog calls it when the bound is passed)."""
        if self.folder is not None:
            version = int(self.kind[-1])
            usage = self._read("memory.current" if version == 2 else "memory.usage_in_bytes")
            try:
                if version == 2:
                    (self.folder / "memory.oom.group").write_text("1")
                    (self.folder / "memory.swap.max").write_text("0")
                (self.folder / ("memory.max" if version == 2 else "memory.limit_in_bytes")).write_text(
                    str(usage + limit))
            except OSError:
                pass
            self._oom_seen = self._ooms()
            return
        baseline = pss(members())
        self._stop.set()  # a fresh worker after a crash: one watchdog at a time
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, args=(baseline + limit, members, kill, self._stop),
                                        daemon=True, name="grader-memory")
        self._thread.start()

    def _watch(self, ceiling: int, members: Callable[[], list[int]], kill: Callable[[], None],
               stop: threading.Event) -> None:
        while not stop.wait(WATCH_SECONDS):
            if pss(members()) > ceiling:
                self._tripped.set()
                kill()
                return

    def _read(self, name: str) -> int:
        try:
            return int((self.folder / name).read_text().split()[0]) if self.folder else 0
        except (OSError, ValueError, IndexError):
            return 0

    def _ooms(self) -> int:
        """How many processes the kernel's OOM killer ended in this cgroup so far."""
        if self.folder is None:
            return 0
        name = "memory.events" if self.kind == "cgroup2" else "memory.oom_control"
        try:
            for line in (self.folder / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return self._read("memory.failcnt") if self.kind == "cgroup1" else 0

    def tripped(self) -> bool:
        """Whether the student's processes went over the bound since the last call (then they are, or
        one of them is, killed)."""
        if self._tripped.is_set():
            self._tripped.clear()
            return True
        seen = self._ooms()
        over, self._oom_seen = seen > self._oom_seen, seen
        return over

    def close(self) -> None:
        """Stop the watchdog; remove the cgroup once its processes are gone (killing any that are left);
        unmount the unit folder's ``tmpfs`` (what the student wrote there goes with it)."""
        self._stop.set()
        if self.ram is not None:
            from utils.grading import jail

            jail._libc.umount2(os.fsencode(self.ram), jail.MNT_DETACH)
            self.ram = None
        if self.folder is None:
            return
        for _ in range(50):
            try:
                pids = [int(p) for p in (self.folder / "cgroup.procs").read_text().split()]
            except (OSError, ValueError):
                pids = []
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            try:
                self.folder.rmdir()
                return
            except OSError:
                threading.Event().wait(0.1)
