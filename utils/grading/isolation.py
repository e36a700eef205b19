"""Which isolation the grader's sandbox uses, probed once per grader process (trusted side).

The levels and extras are described in :mod:`utils.grading.sandbox`, which starts and watches the
workers; this module builds their command line (``unshare``, :mod:`utils.grading.jail`, ``setpriv``),
picks the strongest combination that works on this machine, and **refuses a weak one**:
:func:`isolation` raises :class:`WeakIsolation` (one paragraph naming what is missing) unless
:func:`allow_weak_isolation` was called (``--allow-weak-isolation``). :meth:`Isolation.summary` is the
short line every run shows the instructor.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, replace
from pathlib import Path

from utils.grading import kit, memory

UID_BASE = 64000
"""Sandbox uids start here; a grader process reserves :data:`UID_BLOCK` of them (no passwd entry needed)."""
UID_BLOCK = 1000
SAFE_LEVELS = ("pidns+uid", "uid")
EXTRAS = ("mounts", "ipc", "net")
_EXTRA_TEXT = {
    "mounts": "private file system (only Python, the worker kit and its own folder; no /run, /home, course "
              "checkout, submissions or output; size-limited /tmp)",
    "ipc": "own IPC namespace",
    "net": "no network (own network namespace, loopback down)",
}
_LEVEL_TEXT = {
    "pidns+uid": "PID namespace + unprivileged uid per job",
    "uid": "unprivileged uid per job, its processes swept by uid (no PID namespace on this machine)",
    "pidns+uid+read": "PID namespace + unprivileged uid per job keeping read access to every file",
    "uid+read": "unprivileged uid per job keeping read access to every file (no PID namespace)",
    "pidns": "PID namespace, learner code runs as the grader's user",
    "session": "process session only (no PID namespace, no uid of its own)",
}
_JAIL = str(Path(__file__).with_name("jail.py"))


class WeakIsolation(RuntimeError):
    """No safe isolation works on this machine and weak isolation was not allowed."""


@dataclass(frozen=True)
class Isolation:
    level: str  # a key of _LEVEL_TEXT
    prefix: tuple[str, ...]  # unshare ... (without setpriv)
    drop: str  # "" | "uid" | "uid+read" | "caps"
    extras: frozenset[str] = frozenset()  # of EXTRAS
    root: bool = True  # the grader runs as root
    memory: str = ""  # a key of memory.TEXT once probed
    course_readable: bool | None = None  # whether learner code could open the course's reference code

    def with_extras(self, extras) -> Isolation:
        return replace(self, extras=frozenset(extras))

    def command(self, slot: int, unit_dir: Path | None = None, hidden: tuple[str, ...] = ()) -> list[str]:
        """The command line up to the Python that runs the worker. ``unit_dir`` is the only writable
        folder inside the private file system; ``hidden`` folders are covered where a kept path shows them."""
        cmd = list(self.prefix)
        if cmd:
            cmd[1:1] = [flag for extra, flag in (("mounts", "--mount"), ("ipc", "--ipc"), ("net", "--net"))
                        if extra in self.extras]
        if "mounts" in self.extras:
            cmd += [sys.executable, "-I", "-S", _JAIL, json.dumps(jail_spec(unit_dir, hidden)), "--"]
        if self.drop in ("uid", "uid+read"):
            uid = str(sandbox_uid(slot))
            cmd += ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs"]
            if self.drop == "uid+read":
                cmd += ["--inh-caps=-all,+dac_read_search", "--ambient-caps=+dac_read_search"]
            else:
                cmd += ["--inh-caps=-all"]
        elif self.drop == "caps":  # not root: uid 0 of a user namespace, without any capability
            cmd += ["setpriv", "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all"]
        return cmd

    @property
    def uid(self) -> bool:
        """Learner code runs as a uid of its own (per job slot)."""
        return self.drop in ("uid", "uid+read")

    @property
    def pidns(self) -> bool:
        return "--pid" in self.prefix

    def weaknesses(self) -> tuple[str, ...]:
        """What makes this level unsafe to grade with; empty when it is safe."""
        found = []
        if self.root and not self.uid:
            found.append("learner code would run as root")
        if self.drop == "uid+read":
            found.append("learner code would keep read access to every file (CAP_DAC_READ_SEARCH), the hidden "
                         "cases' and the grader's own files included")
        if not self.pidns and not self.uid:
            found.append("no PID namespace and no uid of its own: a process the learner starts could outlive its "
                         "exercise and signal the grader")
        if not self.root and "mounts" not in self.extras:
            found.append("learner code would run as your own user and, without private mounts, could change the "
                         "grader's files and its output")
        return tuple(found)

    def describe(self) -> str:
        """One line: the level, the extras active and not, the memory bound, what learner code can read."""
        text = _LEVEL_TEXT[self.level]
        text += "".join(f"; {_EXTRA_TEXT[e]}" for e in EXTRAS if e in self.extras)
        missing = [e for e in EXTRAS if e not in self.extras]
        if missing:
            text += f"; not active on this machine: {', '.join(missing)}"
        if self.memory:
            text += f"; {memory.TEXT[self.memory]}"
        if self.course_readable:
            text += "; learner code can read the course's reference code (its files are readable by any user)"
        return text

    def summary(self) -> str:
        """A short line for the instructor's summary: the level, extras, memory bound, and WEAK with why."""
        parts = [self.level, *(e for e in EXTRAS if e in self.extras)]
        if self.memory:
            parts.append(f"memory: {self.memory}")
        if self.course_readable:
            parts.append("course code readable")
        text = ", ".join(parts)
        weak = self.weaknesses()
        return f"{text}; WEAK: {'; '.join(weak)}" if weak else text


_ISOLATION: Isolation | None = None
_FAILURES: dict[str, str] = {}  # level -> the last line a failed probe printed
_READABLE: dict[tuple[str, frozenset[str]], bool] = {}  # what the full probe saw of the course's code
_ALLOW_WEAK = False
_WARNED = False
_LOCK = threading.Lock()
_UID_LOCK: tuple[int, int] | None = None  # (block start, lock file descriptor)
_UID_MUTEX = threading.Lock()


def sandbox_uid(slot: int) -> int:
    """The uid (and gid) of job slot ``slot``, in a block this grader process holds alone (a lock file
    per block), so that sweeping a uid's processes never touches another grader's sandbox."""
    global _UID_LOCK
    if not 0 <= slot < UID_BLOCK:
        raise ValueError(f"slot must be in [0, {UID_BLOCK}), got {slot}")
    if os.geteuid() != 0:
        return UID_BASE + slot
    with _UID_MUTEX:
        if _UID_LOCK is None:
            folder = "/run/lock" if os.access("/run/lock", os.W_OK) else tempfile.gettempdir()
            for block in range(4096):
                fd = os.open(os.path.join(folder, f"course-grader-uids-{block}.lock"),
                             os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    os.close(fd)
                    continue
                _UID_LOCK = (UID_BASE + block * UID_BLOCK, fd)
                break
            else:
                raise RuntimeError(f"no free block of sandbox uids (lock files in {folder})")
        return _UID_LOCK[0] + slot


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _python_paths() -> list[str]:
    """What the worker's Python needs: its prefixes and interpreter's folders, the ``sys.path`` folders
    it is given (:func:`utils.grading.kit.site_paths`, never the course checkout) and the worker kit.
    Never ``/``, a scratch folder or a folder above one, nor a folder above the course package."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, os.path.dirname(sys.executable),
             os.path.dirname(os.path.realpath(sys.executable)), str(kit.kit()), *kit.site_paths()}
    package = str(kit.PACKAGE)
    banned = ("/tmp", "/var/tmp", "/dev/shm", "/dev", "/proc", "/run")
    return sorted(path for path in {os.path.abspath(p) for p in paths}
                  if path != "/" and not any(_inside(folder, path) for folder in banned)
                  and not (_inside(package, path) and Path(path).name not in ("site-packages", "dist-packages")))


def jail_spec(unit_dir: Path | None, hidden: tuple[str, ...] = ()) -> dict:
    """The JSON :mod:`utils.grading.jail` gets: what to keep, what to cover after. Anything else is not
    in the worker's file system at all; a hidden folder or the course's own code is covered only where a
    kept path would show it (an installed course in a kept ``site-packages``), unless it holds a kept path."""
    keep = [[str(unit_dir), True]] if unit_dir is not None else []
    keep += [[path, False] for path in _python_paths()]
    kept = [os.path.abspath(path) for path, _ in keep]
    last = []
    for folder in (*hidden, *kit.course_paths()):
        folder = os.path.abspath(folder)
        if any(_inside(folder, path) for path in kept) and not any(_inside(path, folder) for path in kept):
            last.append([folder, "755", "1m"])
    return {"keep": keep, "cover_last": last}


def python_command(code: str) -> list[str]:
    """``python -I -S -c`` running ``code`` with the worker's ``sys.path`` (the kit first, no course)."""
    setup = f"import sys; sys.path[:] = [{str(kit.kit())!r}, *sys.path, *{kit.site_paths()!r}]; "
    return [sys.executable, "-I", "-S", "-c", setup + code]


def _probe(isolation: Isolation, full: bool = True) -> bool:
    """Whether ``isolation`` runs a worker here: with ``full``, a Python that imports torch and the
    worker's runner from the kit, is PID 1 in a PID namespace and runs as the uid it should (and says
    whether it can open the course's reference code); otherwise only a bare ``python -I -S``."""
    reference = [str(kit.PACKAGE / "attention.py"), str(kit.PACKAGE / "exercises" / "definition.py")]
    if full:
        code = ("import os, json, torch, utils.exercises.runner\nseen = []\n"
                f"for path in {reference!r}:\n    try:\n        open(path, 'rb').close()\n        seen.append(path)\n"
                "    except OSError:\n        pass\n"
                "open('probe', 'w').write(json.dumps([os.getpid(), os.getuid(), seen]))")
        cmd = python_command(code)
    else:
        cmd = [sys.executable, "-I", "-S", "-c",
               "import os, json; open('probe', 'w').write(json.dumps([os.getpid(), os.getuid(), []]))"]
    folder = Path(tempfile.mkdtemp(prefix="grader-probe-"))
    try:
        if isolation.uid:
            os.chown(folder, sandbox_uid(0), sandbox_uid(0))
        result = subprocess.run(isolation.command(0, folder) + cmd, cwd=folder, env=_env(folder, "probe"),
                                capture_output=True, timeout=120, check=False)
        if result.returncode != 0 or not (folder / "probe").exists():
            tail = result.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [f"exit {result.returncode}"]
            _FAILURES.setdefault(isolation.level, tail[0][:200])
            return False
        pid, uid, seen = json.loads((folder / "probe").read_text())
        if isolation.uid and uid != sandbox_uid(0):
            return False
        if full and isolation.pidns and pid != 1:
            return False
        if full:
            _FAILURES.pop(isolation.level, None)
            _READABLE[(isolation.level, isolation.extras)] = bool(seen)
        return True
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        _FAILURES.setdefault(isolation.level, f"{type(exc).__name__}: {exc}"[:200])
        return False
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def candidates() -> list[Isolation]:
    """Every level this machine might allow, safe ones first (without extras; :func:`choose` adds them)."""
    root = os.geteuid() == 0
    unshare, setpriv = shutil.which("unshare"), shutil.which("setpriv")
    base = ("unshare", "--pid", "--fork", "--kill-child") + (() if root else ("--map-root-user",))
    prefix = base + ("--mount-proc",)
    levels = []
    if root and setpriv:
        if unshare:
            levels.append(Isolation("pidns+uid", prefix, "uid"))
        levels.append(Isolation("uid", (), "uid"))
        if unshare:
            levels.append(Isolation("pidns+uid+read", prefix, "uid+read"))
        levels.append(Isolation("uid+read", (), "uid+read"))
    if unshare:
        drop = "" if root or not setpriv else "caps"
        levels += [Isolation("pidns", prefix, drop, root=root), Isolation("pidns", base, drop, root=root)]
    levels.append(Isolation("session", (), "", root=root))
    return levels


def choose(options: list[Isolation], probe=_probe) -> Isolation:
    """The first level that works, with every extra that works on it: each extra is tried alone with a
    quick probe, then the level with those extras gets the full probe (and, if that fails, the level
    alone)."""
    for option in options:
        if option.prefix:
            extras = [extra for extra in EXTRAS if probe(option.with_extras({extra}), full=False)]
            if extras and probe(with_extras := option.with_extras(extras)):
                return with_extras
        if probe(option):
            return option
    return options[-1]


def allow_weak_isolation(allowed: bool = True) -> None:
    """Let :func:`isolation` return a weak level (``--allow-weak-isolation``): the batch sets it each run."""
    global _ALLOW_WEAK
    _ALLOW_WEAK = bool(allowed)


def refusal(chosen: Isolation) -> str:
    """The paragraph the grader prints when it refuses to grade at ``chosen``."""
    tried = "; ".join(f"{level}: {why}" for level, why in _FAILURES.items())
    return (f"grader: refusing to grade: no safe sandbox works on this machine. The best isolation here is "
            f"'{chosen.level}', where {'; '.join(chosen.weaknesses())}. A safe sandbox needs either, as root, "
            f"`setpriv` with CAP_SETUID and CAP_SETGID (Docker's default capabilities have them) and a Python "
            f"that an unprivileged user may run (not one under a private /root), or `unshare` with PID and mount "
            f"namespaces (CAP_SYS_ADMIN, or user namespaces for a grader that is not root)."
            + (f" What failed: {tried}." if tried else "")
            + " To grade at this level anyway, accepting what is named above, pass --allow-weak-isolation.")


def isolation(announce: bool = True, *, check: bool = True) -> Isolation:
    """The strongest isolation that works here, probed once per process and announced once on stderr.

    With ``check`` (the default), a weak level raises :class:`WeakIsolation` unless
    :func:`allow_weak_isolation` is in force; ``check=False`` only reports (for tests and summaries).
    """
    global _ISOLATION, _WARNED
    with _LOCK:
        if _ISOLATION is None:
            options = candidates()
            chosen = choose(options)
            _ISOLATION = replace(chosen, memory=memory.kind(),
                                 course_readable=_READABLE.get((chosen.level, chosen.extras)))
            if announce:
                note = "" if chosen.level == options[0].level else \
                    f" (fallback: {options[0].level} does not work on this machine)"
                print(f"grader isolation: {_ISOLATION.describe()}{note}", file=sys.stderr)
        chosen = _ISOLATION
        if check and chosen.weaknesses():
            if not _ALLOW_WEAK:
                raise WeakIsolation(refusal(chosen))
            if not _WARNED:
                _WARNED = True
                print(f"grader: WARNING: grading with weak isolation ({chosen.level}, --allow-weak-isolation): "
                      f"{'; '.join(chosen.weaknesses())}", file=sys.stderr)
    return chosen


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
