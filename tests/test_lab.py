"""`make lab` runs utils.lab: the command it builds, and a real server that answers with its token."""

import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from utils import lab
from utils.paths import REPO_ROOT


def test_command_listens_locally_with_token_and_opens_chapters():
    command = lab.lab_command(8899, "abc", headless=True, as_root=True)
    assert "--ServerApp.ip=127.0.0.1" in command
    assert "--IdentityProvider.token=abc" in command
    assert "--LabApp.default_url=/lab/tree/chapters" in command
    assert "--no-browser" in command and "--allow-root" in command
    assert f"--ServerApp.root_dir={REPO_ROOT}" in command


def test_desktop_non_root_command_opens_a_browser():
    command = lab.lab_command(8899, "abc", headless=False, as_root=False)
    assert "--no-browser" not in command and "--allow-root" not in command


def test_free_port_skips_a_busy_port():
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        assert lab.free_port(taken) != taken


def test_dry_run_prints_url_with_token(capsys):
    os.environ["COURSE_LAB_TOKEN"] = "t0ken"
    try:
        assert lab.main(["--dry-run"]) == 0
    finally:
        del os.environ["COURSE_LAB_TOKEN"]
    out = capsys.readouterr().out
    assert "/lab/tree/chapters?token=t0ken" in out


@pytest.mark.slow
def test_server_starts_and_serves_the_chapters(tmp_path):
    port = lab.free_port(0)
    env = dict(os.environ, COURSE_LAB_TOKEN="s3cret", JUPYTER_CONFIG_DIR=str(tmp_path / "cfg"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"), JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "settings"))
    proc = subprocess.Popen([sys.executable, "-m", "utils.lab", "--port", str(port)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        body = None
        while time.monotonic() < deadline:
            try:
                url = f"http://127.0.0.1:{port}/api/contents/chapters?token=s3cret"
                with urllib.request.urlopen(url, timeout=2) as response:
                    body = response.read().decode()
                break
            except OSError:
                time.sleep(0.5)
        assert body is not None, "jupyter lab did not answer within 60 s"
        assert '"type": "directory"' in body or '"type":"directory"' in body
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
