"""A real JupyterLab server for the browser tests, and a Chromium page on it.

The server runs on 127.0.0.1 with a random port and token, over a copy of the course (``utils/``,
``solutions/``, ``pyproject.toml``) so nothing a test does touches the repository, with isolated
config, runtime, data, settings and workspaces directories. User settings turn off the news and
update checks (no toast covers the page), autosave, and notebook windowing (every cell stays in the
DOM). ``--LabApp.expose_app_in_browser=True`` gives the tests ``window.jupyterapp``. The server is
stopped by its PID.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/browser_support.py

from browser_support import chromium_context  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}
STARTUP_TIMEOUT_S = 90


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Lab:
    """A running ``jupyter lab``: ``url(path)``, ``api(path)`` and the process."""

    def __init__(self, root: Path, port: int, token: str, process: subprocess.Popen, log: Path) -> None:
        self.root, self.port, self.token, self.process, self.log = root, port, token, process, log
        self.base = f"http://127.0.0.1:{port}"

    def url(self, path: str) -> str:
        return f"{self.base}/{path.lstrip('/')}?token={self.token}"

    def api(self, path: str, method: str = "GET"):
        request = urllib.request.Request(self.url(f"api/{path}"), method=method)
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None

    def shutdown_sessions(self) -> None:
        for session in self.api("sessions"):
            self.api(f"sessions/{session['id']}", method="DELETE")


def isolated_jupyter_env(top: Path) -> dict[str, str]:
    """Fresh config, runtime, data, settings (with :data:`SETTINGS`), workspaces and IPython folders under
    ``top``, as the environment variables that point Jupyter at them, plus a fixed hash seed and the inline
    matplotlib backend."""
    dirs = {name: top / name for name in ("config", "runtime", "data", "settings", "workspaces", "ipython")}
    for folder in dirs.values():
        folder.mkdir()
    for rel, values in SETTINGS.items():
        target = dirs["settings"] / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(values))
    return dict(
        JUPYTER_CONFIG_DIR=str(dirs["config"]), JUPYTER_RUNTIME_DIR=str(dirs["runtime"]),
        JUPYTER_DATA_DIR=str(dirs["data"]), JUPYTERLAB_SETTINGS_DIR=str(dirs["settings"]),
        JUPYTERLAB_WORKSPACES_DIR=str(dirs["workspaces"]), IPYTHONDIR=str(dirs["ipython"]),
        PYTHONHASHSEED="0", MPLBACKEND="module://matplotlib_inline.backend_inline",
    )


@contextmanager
def running_lab(command: list[str], *, cwd: Path, env: dict[str, str], root: Path, port: int, token: str,
                log: Path, what: str, group: bool = False):
    """Start ``command`` (a JupyterLab server), wait until its API answers, give its :class:`Lab`, and stop
    it afterwards by its PID (its whole process group when ``group``: a wrapper that starts the server)."""
    with open(log, "wb") as out:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=group)
    server = Lab(root, port, token, process, log)
    kill = os.killpg if group else os.kill
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if process.poll() is not None:
                pytest.fail(f"{what} exited with {process.returncode}:\n{log.read_text()[-3000:]}", pytrace=False)
            try:
                server.api("status")
                break
            except (urllib.error.URLError, ConnectionError, OSError):
                if time.monotonic() > deadline:
                    pytest.fail(f"{what} did not answer in {STARTUP_TIMEOUT_S} s:\n{log.read_text()[-3000:]}",
                                pytrace=False)
                time.sleep(0.5)
        yield server
    finally:
        if process.poll() is None:
            kill(process.pid, signal.SIGTERM)  # the server shuts its kernels down (a wrapper passes it on)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                kill(process.pid, signal.SIGKILL)
                process.wait(timeout=10)


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    top = tmp_path_factory.mktemp("lab")
    root = top / "course"
    root.mkdir()
    for name in ("utils", "solutions"):
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    shutil.copy2(REPO / "pyproject.toml", root / "pyproject.toml")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "PYTHONPATH"))}
    # The kernels import the copy's utils, not whichever tree an editable install points at (a shared
    # venv, or a worktree's tests running against another checkout).
    env.update(isolated_jupyter_env(top), PYTHONPATH=str(root))
    port, token = free_port(), secrets.token_hex(16)
    command = [
        sys.executable, "-m", "jupyterlab", "--no-browser",
        f"--ServerApp.root_dir={root}", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
        "--LabApp.expose_app_in_browser=True",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")
    with running_lab(command, cwd=root, env=env, root=root, port=port, token=token, log=top / "lab.log",
                     what="jupyter lab") as server:
        yield server


@pytest.fixture(scope="session")
def browser_context(tmp_path_factory):
    with chromium_context(tmp_path_factory.mktemp("chromium-profile")) as context:
        yield context


@pytest.fixture
def lab_page(lab, browser_context):
    page = browser_context.new_page()
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    try:
        yield page
    finally:
        page.close()
        lab.shutdown_sessions()
