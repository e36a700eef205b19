"""What ``make`` checks before it installs or tests: ``python utils/prereqs.py CHECK [ARG]``.

Run as a script by the Makefile and ``binder/postBuild``, before the course is installed, so it uses
the standard library only (importing ``utils`` would import torch). Checks:

- ``venv DIR``: exit 1 with one line saying why when ``DIR`` is a half-made virtual environment (no
  ``bin/python``, or no pip in it: what ``python -m venv`` leaves when Debian's ``python3-venv`` is
  missing); the Makefile then rebuilds it.
- ``torch-index SETTING``: the pip arguments that choose torch's wheel. ``auto`` (the default of
  ``make TORCH_INDEX``) adds PyTorch's CPU index, unless pip's configured indexes already offer the
  pinned torch as a ``+cpu`` wheel (then nothing is added: that index is used as it is). An empty
  setting adds nothing (PyPI's torch: the CUDA build on Linux); a URL adds that index.
- ``test``: exit 1 with one line naming what ``make test`` needs and is missing (npm, Chromium).

And two for the job ``make test`` runs in the background (the HTML edition's chapters, at nice 19):

- ``renice PID``: put ``PID`` and every process below it (its kernels) back to normal priority,
  where that is allowed (root); exit 0 either way.
- ``stop PID``: end ``PID`` and every process below it (``SIGTERM``); exit 0 when they are gone.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
APT_LINE = "sudo apt-get install python3-venv make npm chromium"


def chromium_path() -> str:
    """The Chromium the browser tests drive: ``$COURSE_CHROMIUM``, else Debian's ``/usr/bin/chromium``."""
    return os.environ.get("COURSE_CHROMIUM", "/usr/bin/chromium")


def half_made_venv(venv: Path) -> str | None:
    """Why ``venv`` must be rebuilt, or None when it is usable or does not exist yet."""
    venv = Path(venv)
    if not venv.exists():
        return None
    python = venv / "bin" / "python"
    if not python.exists():
        return f"{venv} has no bin/python (venv creation stopped halfway): rebuilding it"
    try:
        probe = subprocess.run([str(python), "-m", "pip", "--version"], capture_output=True, timeout=60)
    except OSError as error:
        return f"{venv}/bin/python does not run ({error.strerror}): rebuilding it"
    if probe.returncode != 0:
        return (f"{venv} has no pip (venv creation stopped halfway; on Debian/Ubuntu: "
                "sudo apt-get install python3-venv): rebuilding it")
    return None


def pinned_version(name: str, constraints: Path = REPO / "constraints.txt") -> str:
    """The exact version ``constraints`` pins for ``name`` (a pin without an environment marker)."""
    for line in constraints.read_text().splitlines():
        match = re.fullmatch(rf"{re.escape(name)}==([^\s;]+)", line.strip(), flags=re.IGNORECASE)
        if match:
            return match.group(1)
    raise ValueError(f"{constraints} pins no {name}==<version> without a marker")


def index_offers(name: str, version: str, python: str = sys.executable) -> bool:
    """Whether pip's configured indexes (and find-links) list ``name==version`` for ``python``."""
    try:
        listing = subprocess.run([python, "-m", "pip", "index", "versions", name, "--pre"],
                                 capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return False
    match = re.search(r"Available versions:(.*)", listing.stdout)
    return bool(match) and version in [v.strip() for v in match.group(1).split(",")]


def torch_index_args(setting: str, python: str = sys.executable) -> list[str]:
    """pip arguments that make ``pip install torch`` take the wheel ``setting`` asks for (see above)."""
    setting = setting.strip()
    if setting != "auto":
        return ["--extra-index-url", setting] if setting else []
    cpu_wheel = pinned_version("torch") + "+cpu"
    if index_offers("torch", cpu_wheel, python):
        return []
    return ["--extra-index-url", CPU_INDEX]


def missing_for_test(which=shutil.which) -> list[str]:
    """What ``make test`` needs beyond Python and is not here, each with how to get it."""
    missing = []
    if which("npm") is None:
        missing.append("npm (sudo apt-get install npm)")
    chromium = chromium_path()
    if not (os.path.isfile(chromium) and os.access(chromium, os.X_OK)):
        missing.append(f"Chromium at {chromium} (sudo apt-get install chromium, "
                       "or COURSE_CHROMIUM=/path/to/chromium)")
    return missing


def process_tree(pid: int, proc: Path = Path("/proc")) -> list[int]:
    """``pid`` and its descendants, parents first (read from ``/proc``; just ``[pid]`` without it)."""
    children: dict[int, list[int]] = {}
    for stat in proc.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # the name in (...) may hold spaces
        except (OSError, IndexError):
            continue  # gone meanwhile
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop(0)
        if current not in tree:
            tree.append(current)
            todo.extend(sorted(children.get(current, [])))
    return tree


def renice_tree(pid: int, niceness: int = 0) -> int:
    """Set the niceness of ``pid``'s whole tree; return how many processes took it (0 when not allowed)."""
    done = 0
    for member in process_tree(pid):
        try:
            os.setpriority(os.PRIO_PROCESS, member, niceness)
            done += 1
        except OSError:  # not allowed (raising priority needs root), or gone
            pass
    return done


def stop_tree(pid: int, wait_s: float = 10.0) -> bool:
    """``SIGTERM`` to ``pid``'s whole tree, then ``SIGKILL`` to what is left after ``wait_s``; True when
    none is left."""
    import signal
    import time

    tree = process_tree(pid)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for member in tree:
            try:
                os.kill(member, sig)
            except OSError:
                pass
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            tree = [m for m in tree if _alive(m)]
            if not tree:
                return True
            time.sleep(0.05)
    return not tree


def _alive(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)  # reap it if it is our own child
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True  # no /proc (macOS): kill(0) found it
    return state != "Z"  # a zombie (another process's child, not yet reaped) runs no more


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    check, args = (argv[0], argv[1:]) if argv else ("", [])
    if check == "venv" and len(args) == 1:
        reason = half_made_venv(Path(args[0]))
        if reason:
            print(reason, file=sys.stderr)
        return 1 if reason else 0
    if check == "torch-index" and len(args) <= 1:
        pip_args = torch_index_args(args[0] if args else "auto")
        print(" ".join(pip_args))
        where = pip_args[-1] if pip_args else "the configured package index"
        print(f"torch: the wheel from {where} (make TORCH_INDEX=... changes it, see README)", file=sys.stderr)
        return 0
    if check == "test" and not args:
        missing = missing_for_test()
        if missing:
            print("make test needs: " + "; ".join(missing) + ".", file=sys.stderr)
        return 1 if missing else 0
    if check in ("renice", "stop") and len(args) == 1 and args[0].isdigit():
        if check == "renice":
            renice_tree(int(args[0]))
            return 0
        return 0 if stop_tree(int(args[0])) else 1
    print("usage: python utils/prereqs.py venv DIR | torch-index [SETTING] | test | renice PID | stop PID",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
