"""Helpers for the tests that build fresh Python environments (test_binder_env.py, test_colab_sim.py):
copy the repository as a clone would hold it, run commands in an activated venv, execute a notebook
on a kernel of that venv, and judge a student notebook's errors."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from utils.build import NOTEBOOK_GLOB

REPO = Path(__file__).resolve().parent.parent
CHAPTERS = sorted((REPO / "chapters").glob(NOTEBOOK_GLOB))  # the student notebooks both environments run
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def repository_files(root: Path = REPO) -> list[str]:
    """The files a clone would hold: tracked plus untracked-but-not-ignored (the working tree)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root, capture_output=True, check=True,
    ).stdout.decode().split("\0")
    return [name for name in listed if name and (root / name).is_file()]


def copy_repository(target: Path, root: Path = REPO) -> Path:
    for name in repository_files(root):
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, target / name)
    return target


def venv_env(venv: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a shell in which ``venv`` is activated (and nothing of ours leaks in).

    pip installs there without byte-compiling what it installs (``PIP_COMPILE=0``, pip's own
    ``--no-compile``; beware that ``PIP_NO_COMPILE=1`` means the opposite): a test venv is used once,
    so its Python compiles only the modules it imports, once, as it imports them (``PYTHONDONTWRITEBYTECODE``
    is dropped: with it, every kernel would compile torch again). For the Binder environment that halves
    pip's CPU time (torch alone: 21 CPU-s to 6); what gets installed is the same."""
    env = {k: v for k, v in (os.environ if base is None else base).items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYTHONDONTWRITEBYTECODE")}
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PIP_COMPILE"] = "0"
    return env


def run(command, *, cwd: Path, env: dict[str, str] | None = None, what: str) -> str:
    """Run ``command``; fail the test with its output if it fails; return its stdout. A pip command is run
    with :func:`run_pip`, so a download corrupted in transit is fetched again."""
    pip = "pip" in [str(c) for c in command[:3]]
    result = (run_pip(command, cwd=cwd, env=env) if pip
              else subprocess.run([str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True))
    if result.returncode != 0:
        pytest.fail(
            f"{what} failed ({result.returncode}):\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}", pytrace=False
        )
    return result.stdout


# What pip prints when a download went wrong on the way, not when the pins are wrong: the bytes that arrived
# do not match the index's sha256 (a CI run of 2026-12-02 got a corrupt playwright wheel whose PyPI hash
# checks out when fetched again), or the connection broke mid-file. pip retries refused connections itself,
# never these.
TRANSIENT_PIP_FAILURES = re.compile(
    r"THESE PACKAGES DO NOT MATCH THE HASHES|IncompleteRead|Connection broken|ReadTimeoutError|"
    r"ConnectionResetError|Remote end closed connection"
)


def pip_download_failed(stderr: str) -> bool:
    """Whether pip's ``stderr`` says a download failed in transit (worth fetching again)."""
    return bool(TRANSIENT_PIP_FAILURES.search(stderr))


def run_pip(command, *, attempts: int = 3, **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run(command, capture_output=True, text=True, **kwargs)`` for a pip command that downloads,
    run again (at most ``attempts`` times in all, pip's cache off so a corrupt cached file is not reused)
    while it fails only because a download failed in transit. Any other failure returns at once, and the
    result of the last attempt is returned: the caller asserts on it as before. Earlier failures go to
    stderr, so a run that needed a second try says so in the test's output."""
    command = [str(c) for c in command]
    for attempt in range(1, attempts):
        result = subprocess.run(command, capture_output=True, text=True, **kwargs)
        if result.returncode == 0 or not pip_download_failed(result.stderr):
            return result
        print(f"pip download failed in transit (attempt {attempt} of {attempts}), fetching again:\n"
              f"{result.stderr[-1500:]}", file=sys.stderr)
        if "--no-cache-dir" not in command:
            at = command.index("pip") + 1
            command = [*command[:at], "--no-cache-dir", *command[at:]]
    return subprocess.run(command, capture_output=True, text=True, **kwargs)


def write_kernelspec(jupyter_path: Path, name: str, python: Path, display_name: str) -> None:
    folder = jupyter_path / "kernels" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel.json").write_text(json.dumps({
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": display_name, "language": "python",
    }))


def unexpected_errors(nb) -> list[str]:
    """Error outputs other than those of cells tagged ``raises-exception``. A check cell never raises,
    even on a stub (it prints "❌ not implemented yet"), so any other error is a real break."""
    problems = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or "raises-exception" in cell.metadata.get("tags", []):
            continue
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                first = cell.source.splitlines()[0] if cell.source else ""
                problems.append(f"cell {index} ({first!r}): {output.get('ename')}: {output.get('evalue', '')[:300]}")
    return problems


def setup_cell_errors(nb) -> list[str]:
    return [f"{o.get('ename')}: {o.get('evalue', '')[:2000]}" for o in nb.cells[1].get("outputs", [])
            if o.get("output_type") == "error"]


def displayed_widgets(nb) -> int:
    return sum(
        WIDGET_VIEW in o.get("data", {}) for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
    )
