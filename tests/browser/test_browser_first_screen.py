"""A learner's first screen, in a real browser: the URL ``make lab`` prints opens a clean JupyterLab.

The launcher starts as ``make lab`` starts it (``python -m utils.lab --port P --work W``, nothing more)
on a machine whose Jupyter folders are fresh and empty: no setting turns Jupyter's news question off
here (conftest.py's ``SETTINGS`` are not used), and the workspaces folder holds what an earlier clone
left behind, a default workspace with chapter 2's tab open. The test reads the URL the launcher prints,
opens that exact URL in headless Chromium, opens chapter 1 from the file browser and waits for its
kernel. It fails on

- any dialog (``.jp-Dialog``: "Path Not Found" for ``/lab/tree``, a kernel or file error) or
  notification toast (Jupyter's "Would you like to get notified about official Jupyter news?");
- a tab reopened from the earlier clone's workspace;
- a terminal where Jupyter's own lines follow the course's "press Ctrl-C once" line once JupyterLab is up,
  or show "not trusted", "twice to skip confirmation" or the kernel's "without encryption" warning, or
  where "JupyterLab has stopped." is not the last line after one Ctrl-C.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from browser_support import keep_page_screenshot

from conftest import free_port
from utils.lab import kernel_encryption_available

REPO = Path(__file__).resolve().parents[2]
CHAPTER, EARLIER_TAB = "01_queries_keys_values.ipynb", "02_scaled_dot_product_attention.ipynb"
URL = re.compile(r"^\s+(http://127\.0\.0\.1:\d+/\S*\?token=\w+)\s*$")
CTRL_C_LINE = "To stop JupyterLab, press Ctrl-C once in this terminal."
TIMEOUT_S = 120

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def earlier_clones_workspace(folder: Path) -> None:
    """What JupyterLab's default workspace holds after a learner left ``EARLIER_TAB`` open in another clone."""
    from jupyterlab_server.workspaces_handler import WorkspacesManager

    tab = f"notebook:{EARLIER_TAB}"
    layout = {"main": {"dock": {"type": "tab-area", "currentIndex": 0, "widgets": [tab]}, "current": tab},
              "left": {"collapsed": False, "visible": True, "current": "filebrowser", "widgets": ["filebrowser"]},
              "right": {"collapsed": True, "visible": True, "widgets": []}, "relativeSizes": [0.25, 0.75, 0]}
    data = {"layout-restorer:data": layout, tab: {"data": {"path": EARLIER_TAB, "factory": "Notebook"}}}
    WorkspacesManager(str(folder)).save("default", json.dumps({"data": data, "metadata": {"id": "default"}}))


class Terminal:
    """The launcher's output, line by line, as the learner's terminal shows it."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.lines: list[str] = []
        self._queue: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, args=(process.stdout,), daemon=True).start()

    def _read(self, stream) -> None:
        for line in stream:
            self.lines.append(line.rstrip("\n"))
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, pattern: re.Pattern) -> re.Match:
        while True:
            try:
                line = self._queue.get(timeout=TIMEOUT_S)
            except queue.Empty:
                pytest.fail(f"no line matching {pattern.pattern} in {TIMEOUT_S} s:\n" + self.text(), pytrace=False)
            if line is None:
                pytest.fail("the launcher ended before printing it:\n" + self.text(), pytrace=False)
            match = pattern.search(line)
            if match:
                return match

    def text(self) -> str:
        return "\n".join(self.lines)


def dialogs_and_toasts(page) -> list[str]:
    """The texts of JupyterLab's dialogs (``.jp-Dialog``) and notification toasts on ``page``."""
    return page.locator(".jp-Dialog").all_inner_texts() + page.locator(".Toastify__toast").all_inner_texts()


def test_the_printed_url_opens_a_clean_jupyterlab(tmp_path, browser_context):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("JUPYTER", "PYTHONPATH")) and k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    for name, variable in [("config", "JUPYTER_CONFIG_DIR"), ("data", "JUPYTER_DATA_DIR"),
                           ("runtime", "JUPYTER_RUNTIME_DIR"), ("settings", "JUPYTERLAB_SETTINGS_DIR"),
                           ("workspaces", "JUPYTERLAB_WORKSPACES_DIR"), ("ipython", "IPYTHONDIR")]:
        env[variable] = str(tmp_path / "home" / name)  # none exists yet, as on a new machine
    earlier_clones_workspace(tmp_path / "home" / "workspaces")
    command = [sys.executable, "-m", "utils.lab", "--port", str(free_port()), "--work", str(tmp_path / "work")]
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, start_new_session=True)
    terminal = Terminal(process)
    page = browser_context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: dialogs.append(dialog.message) or dialog.dismiss())
    screenshot = tmp_path / "first-screen.png"
    try:
        url = terminal.wait_for(URL).group(1)
        terminal.wait_for(re.compile(re.escape(CTRL_C_LINE)))
        page.goto(url)
        item = page.locator(".jp-DirListing-item", has_text=CHAPTER)
        item.wait_for(timeout=TIMEOUT_S * 1000)  # JupyterLab is up, its listing of the work folder shown
        at_start = [line for line in terminal.lines if line.strip()]  # what the terminal shows once Lab is up

        item.dblclick()
        idle = page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']:visible").first  # the current tab's
        idle.wait_for(timeout=TIMEOUT_S * 1000)
        page.locator(".jp-StatusBar-Widget", has_text="| Idle").wait_for(timeout=TIMEOUT_S * 1000)
        shown = dialogs_and_toasts(page) + dialogs
        assert shown == [], f"dialogs or notifications on the first screen: {shown}"
        tabs = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tabLabel").all_inner_texts()
        assert EARLIER_TAB not in tabs and CHAPTER in tabs, f"tabs open: {tabs} (an earlier clone's reopened?)"
        # nothing of Jupyter's own came after the course's last word while JupyterLab started
        assert at_start[-1].strip() == CTRL_C_LINE, "after the Ctrl-C line:\n" + "\n".join(at_start)
    except Exception as error:
        keep_page_screenshot(page, screenshot)
        shown = dialogs_and_toasts(page)
        if shown and not isinstance(error, AssertionError):  # e.g. a click a dialog blocked: name the dialog
            raise AssertionError(f"dialogs or notifications on the first screen: {shown}") from error
        raise
    finally:
        page.close()
        if process.poll() is None:
            os.kill(process.pid, signal.SIGINT)  # one Ctrl-C, as the learner stops it
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
    output = terminal.text()
    assert process.returncode == 0, output[-3000:]
    assert [line for line in terminal.lines if line.strip()][-1] == "JupyterLab has stopped.", output[-3000:]
    assert "is not trusted" not in output, output[-3000:]
    assert "twice to skip confirmation" not in output, output[-3000:]
    if kernel_encryption_available():
        assert "without encryption" not in output, output[-3000:]
