"""The worker kit: the only part of the course a sandboxed worker can import or read (trusted side).

The worker needs a few modules of the course (:data:`MODULES`): itself, the value format, the runner with
its plain data, and the fork server that forks it with the jail it runs. :func:`kit` copies them, once
per grader process, into a root-owned folder of their own, beside empty package files
(``utils/__init__.py`` and the others say only what they are), and the worker starts with that folder
first on ``sys.path`` and Python's own ``site-packages`` after it, never the course checkout: ``import
utils.attention`` fails there, and so does any other way to load the course's reference code or its
exercise definitions by name. With private mounts, the kit is also the only part of the course that
exists in the worker's file system (:mod:`utils.grading.jail`).
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]
"""The course package (``utils/``) this grader runs from."""
MODULES = ("grading/worker.py", "grading/serialize.py", "grading/files.py", "exercises/runner.py",
           "exercises/common.py", "grading/forkserver.py", "grading/jail.py")
"""What the worker imports of the course, relative to :data:`PACKAGE` (the last two: what the fork server
that forks workers runs, :mod:`utils.grading.forkserver`)."""
_STUB = '"""The sandboxed worker\'s copy of the course package: only the runner side is here."""\n'

_KIT: Path | None = None
_LOCK = threading.Lock()


def kit() -> Path:
    """The kit's folder (made on first use, removed when the grader exits): the worker's ``sys.path[0]``."""
    global _KIT
    with _LOCK:
        if _KIT is None or not (_KIT / "utils" / "grading" / "worker.py").is_file():
            _KIT = build_kit(Path(tempfile.mkdtemp(prefix="grader-kit-")))
            atexit.register(shutil.rmtree, _KIT, True)
        return _KIT


def build_kit(folder: Path) -> Path:
    """Write the kit into ``folder``: every file readable, none writable, by anyone but its owner."""
    os.chmod(folder, 0o755)
    for package in ("utils", "utils/grading", "utils/exercises"):
        (folder / package).mkdir(mode=0o755, exist_ok=True)
        (folder / package / "__init__.py").write_text(_STUB, encoding="utf-8")
    for module in MODULES:
        shutil.copyfile(PACKAGE / module, folder / "utils" / module)
    for path in folder.rglob("*"):
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    return folder


def course_paths() -> list[str]:
    """Folders holding the course's own code or notebooks: the package and, for a checkout, the folder
    above it (its ``solutions/``, ``chapters/``, ``tests/``)."""
    paths = [str(PACKAGE)]
    if (PACKAGE.parent / "solutions").is_dir() or (PACKAGE.parent / "pyproject.toml").is_file():
        paths.append(str(PACKAGE.parent))
    return paths


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def site_paths() -> list[str]:
    """What the worker appends to its ``sys.path`` (it starts with ``python -I -S``): the grader's
    ``sys.path`` folders, without the course. A folder in the package or above it (a checkout, as an
    editable install or ``PYTHONPATH`` puts it on ``sys.path``) is left out, unless it is a
    ``site-packages`` that holds an installed course beside torch: the kit comes first there."""
    package = str(PACKAGE)
    found = []
    for entry in sys.path:
        if not entry or not os.path.isabs(entry) or not os.path.isdir(entry):
            continue
        entry = os.path.abspath(entry)
        installed = Path(entry).name in ("site-packages", "dist-packages")
        if _inside(entry, package) or (_inside(package, entry) and not installed):
            continue
        if entry not in found:
            found.append(entry)
    return found


def bootstrap_args() -> list[str]:
    """``-c CODE KIT PATHS``: what follows ``python -I -S`` to start the worker from the kit."""
    import json

    code = ("import sys, json; kit = sys.argv.pop(1); extra = json.loads(sys.argv.pop(1)); "
            "sys.path[:] = [kit, *sys.path, *extra]; "
            "from utils.grading.worker import main; raise SystemExit(main(sys.argv[1:]))")
    return ["-c", code, str(kit()), json.dumps(site_paths())]
