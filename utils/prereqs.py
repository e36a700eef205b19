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
    print("usage: python utils/prereqs.py venv DIR | torch-index [SETTING] | test", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
