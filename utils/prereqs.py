"""What ``make`` checks before it installs or tests: ``python utils/prereqs.py CHECK [ARG]``.

Run as a script by the Makefile and ``binder/postBuild``, before the course is installed, so it uses
the standard library only (importing ``utils`` would import torch). Checks:

- ``venv DIR [--chosen]``: first, exit 2 with one line naming the floor and the version found when the
  Python running this script (``make PYTHON=...``) is older than ``requires-python`` in pyproject.toml,
  before anything is installed. Then exit 3 (the Makefile rebuilds ``DIR``) with one line saying why when
  ``DIR`` is a half-made virtual environment (no ``bin/python``, or no pip in it: what ``python -m venv``
  leaves when Debian's ``python3-venv`` is missing), or, with ``--chosen`` (``PYTHON=`` given on make's
  command line), when ``DIR`` holds another Python version than the one chosen. This file must stay
  readable by old Pythons (3.7 up), so that the floor is what they report.
- ``torch-index SETTING``: the pip arguments that choose torch's wheel, on stdout; on stderr, the line
  that says what the install's first step fetches. ``auto`` (the default of ``make TORCH_INDEX``) adds
  PyTorch's CPU index, unless pip's configured indexes already offer the pinned torch as a ``+cpu``
  wheel (then nothing is added: that index is used as it is). An empty setting adds nothing (PyPI's
  torch: the CUDA build on Linux); a URL adds that index. The Makefile passes these arguments to the
  pip call that installs torch alone.
- ``test``: exit 1 with one line naming what ``make test`` needs and is missing (npm, Chromium).

With ``COURSE_LANG=zh`` in the environment (``make lab-zh`` sets it) the lines a learner reads are Chinese.
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
CPU_WHEEL_MB = 192
"""The download of torch's pinned CPU wheel for Linux x86_64 (torch-2.13.0+cpu, cp311: 191.8 MB)."""
APT_LINE = "sudo apt-get install python3-venv make npm chromium"


def say(english: str, chinese: str) -> str:
    """``chinese`` when ``COURSE_LANG=zh`` (``make lab-zh``), else ``english``: this script runs before the
    course's catalogues can be imported, so its few learner-facing lines carry both languages.

    >>> os.environ.pop("COURSE_LANG", None) and None; say("a", "甲")
    'a'
    """
    return chinese if os.environ.get("COURSE_LANG", "").lower().startswith("zh") else english


def chromium_path() -> str:
    """The Chromium the browser tests drive: ``$COURSE_CHROMIUM``, else Debian's ``/usr/bin/chromium``."""
    return os.environ.get("COURSE_CHROMIUM", "/usr/bin/chromium")


def python_floor(pyproject: Path = REPO / "pyproject.toml") -> tuple:
    """The lowest Python the course supports, from ``requires-python = ">=X.Y"``: ``(X, Y)``."""
    match = re.search(r'^requires-python\s*=\s*">=\s*(\d+)\.(\d+)"', pyproject.read_text(), flags=re.M)
    if match is None:
        raise ValueError(f'{pyproject} has no requires-python = ">=X.Y" line')
    return int(match.group(1)), int(match.group(2))


def too_old(version: tuple, floor: tuple, python: str = "python3") -> str | None:
    """The one line that says ``version`` is below ``floor``, or None when it is not.

    >>> print(too_old((3, 9, 18), (3, 10), "/usr/bin/python3.9"))  # doctest: +ELLIPSIS
    /usr/bin/python3.9 is Python 3.9.18; the course needs Python 3.10 or newer. Choose one with make lab PYTHON=...
    >>> too_old((3, 12, 1), (3, 10)) is None
    True
    """
    if tuple(version[:2]) >= tuple(floor):
        return None
    found, needed = ".".join(map(str, version[:3])), ".".join(map(str, floor))
    return say(f"{python} is Python {found}; the course needs Python {needed} or newer. "
               f"Choose one with make lab PYTHON=python3.12 (README, Setup).",
               f"{python} 是 Python {found}；本课程需要 Python {needed} 或更新的版本。"
               f"请用 make lab-zh PYTHON=python3.12 选一个（见 README 的“安装与启动”）。")


def venv_python_version(venv: Path) -> tuple | None:
    """The ``(major, minor)`` of ``venv``'s Python, or None when it cannot say."""
    try:
        probe = subprocess.run([str(Path(venv) / "bin" / "python"), "-c",
                                "import sys; print('%d %d' % sys.version_info[:2])"],
                               capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    parts = probe.stdout.split()
    return (int(parts[0]), int(parts[1])) if probe.returncode == 0 and len(parts) == 2 else None


def half_made_venv(venv: Path) -> str | None:
    """Why ``venv`` must be rebuilt, or None when it is usable or does not exist yet."""
    venv = Path(venv)
    if not venv.exists():
        return None
    python = venv / "bin" / "python"
    if not python.exists():
        return say(f"{venv} has no bin/python (venv creation stopped halfway): rebuilding it",
                   f"{venv} 里没有 bin/python（创建 venv 中途停止了）：正在重建")
    try:
        probe = subprocess.run([str(python), "-m", "pip", "--version"], capture_output=True, timeout=60)
    except OSError as error:
        return say(f"{venv}/bin/python does not run ({error.strerror}): rebuilding it",
                   f"{venv}/bin/python 无法运行（{error.strerror}）：正在重建")
    if probe.returncode != 0:
        return say(f"{venv} has no pip (venv creation stopped halfway; on Debian/Ubuntu: "
                   "sudo apt-get install python3-venv): rebuilding it",
                   f"{venv} 里没有 pip（创建 venv 中途停止了；在 Debian/Ubuntu 上："
                   "sudo apt-get install python3-venv）：正在重建")
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


def torch_step_line(setting: str, pip_args: list) -> str:
    """What the install's first step says: torch's version, where it comes from, about how big it is."""
    version = pinned_version("torch")
    if setting == "auto":
        where = pip_args[-1] if pip_args else ""
        what = say(f"the CPU build from {where or 'the configured package index'}: about {CPU_WHEEL_MB} MB to "
                   "download on Linux", f"{'来自 ' + where + ' 的' if where else '来自已配置的包索引的'} CPU 版："
                   f"在 Linux 上约需下载 {CPU_WHEEL_MB} MB")
    elif setting:
        what = say(f"from {setting}", f"来自 {setting}")
    else:
        what = say("the configured index's default build (PyPI on Linux: the CUDA build, several GB)",
                   "已配置索引的默认版本（Linux 上的 PyPI：CUDA 版，好几 GB）")
    return say(f"Step 1 of 4: torch {version}, {what} (make TORCH_INDEX=... changes it, see README)",
               f"第 1 步（共 4 步）：torch {version}，{what}（用 make TORCH_INDEX=... 可以更改，见 README）")


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
    if check == "venv" and len(args) in (1, 2) and args[1:] in ([], ["--chosen"]):
        old = too_old(sys.version_info, python_floor(), sys.executable)
        if old:
            print(old, file=sys.stderr)
            return 2
        venv, chosen = Path(args[0]), args[1:] == ["--chosen"]
        reason = half_made_venv(venv)
        if reason is None and chosen and venv.exists():
            has, wanted = venv_python_version(venv), tuple(sys.version_info[:2])
            if has is not None and has != wanted:
                reason = say("{} has Python {}.{}, and PYTHON= chose {}.{}: rebuilding it "
                             "(its packages are installed again)", "{} 里是 Python {}.{}，而 PYTHON= 选的是 {}.{}："
                             "正在重建（其中的包会重新安装）").format(venv, *has, *wanted)
        if reason:
            print(reason, file=sys.stderr)
        return 3 if reason else 0
    if check == "torch-index" and len(args) <= 1:
        setting = args[0].strip() if args else "auto"
        pip_args = torch_index_args(setting)
        print(" ".join(pip_args))
        print(torch_step_line(setting, pip_args), file=sys.stderr)
        return 0
    if check == "test" and not args:
        missing = missing_for_test()
        if missing:
            print("make test needs: " + "; ".join(missing) + ".", file=sys.stderr)
        return 1 if missing else 0
    print("usage: python utils/prereqs.py venv DIR [--chosen] | torch-index [SETTING] | test", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
