"""Which isolation the grader's sandbox uses, probed once per grader process (trusted side).

The levels and extras are described in :mod:`utils.grading.sandbox`, which starts and watches the
workers; this module builds their command line (``unshare``, :mod:`utils.grading.jail`, ``setpriv``)
and picks the strongest combination that works on this machine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

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
    root = os.path.abspath(_package_root())
    # a covered folder itself (``/tmp`` as the folder of a script run from there) or one above it
    # (``/``) would bring everything back: Python does not need it. Nor does it need the course
    # checkout (an editable install puts it on sys.path) beyond its ``utils/``: restoring the checkout
    # would show its notebooks, and anything else in it, to learner code
    return sorted(path for path in {os.path.abspath(p) for p in paths}
                  if path != root and not root.startswith(path.rstrip("/") + "/")
                  and not any(folder == path or folder.startswith(path.rstrip("/") + "/") for folder in covered))


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
