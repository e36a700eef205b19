"""Start JupyterLab on the course: ``python -m utils.lab`` (what ``make lab`` runs).

It first brings the learner's work folder (``work/``, ignored by git) up to date with ``chapters/`` by
the rules of :mod:`utils.workspace` (a chapter the learner changed is never touched; a newer version
goes beside it), then opens JupyterLab on that folder. It listens on
127.0.0.1 only, and prints the URL with its token, so it also works on a headless machine or over
an SSH tunnel. Extra arguments are passed to ``jupyter lab``.

What the terminal shows, in the run's language (``--lang``): the work folder at once (this module
imports neither torch nor nbformat before its first line), what the work folder's update did, a
"Starting JupyterLab" line that grows a dot every two seconds, and, once the server answers, the URL
(``/lab``: JupyterLab's own start page, on the work folder) and how to stop it, the last word. Jupyter's
own informational log is turned down to warnings and errors, and :mod:`utils.lab_config` keeps the
first screen free of Jupyter's news question, of "not trusted" notebooks and of an earlier clone's tabs.

Ctrl-C stops it cleanly: the server runs in a session of its own (so the terminal's SIGINT reaches only
this wrapper, and Jupyter does not ask ``Shut down this Jupyter server (y/[n])?``), and the wrapper
passes SIGINT, SIGTERM and SIGHUP on as SIGTERM, on which jupyter_server shuts its kernels down and
removes its ``jpserver-*.json``. A second Ctrl-C kills the server's process group at once.

``--lang zh`` (what ``make lab-zh`` runs) opens the Chinese chapters (``chapters/zh/``, copied into
``work/zh/`` by the same rules) with JupyterLab's own interface in Chinese: the language pack
``jupyterlab-language-pack-zh-cn`` selected for this run only, through the run's own application
settings (:func:`utils.lab_config.lab_settings`), so the learner's settings are never edited and
``make lab`` stays English. A locale the learner chose themselves in JupyterLab (Settings > Language)
still wins, as every user setting wins over an override.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from utils.i18n.messages import LANGUAGES, tr, using_language
from utils.lab_config import LAB_SETTINGS, TRANSLATION_PLUGIN, lab_settings, trust_course_notebooks, workspaces_dir
from utils.paths import REPO_ROOT
from utils.workspace import sync

__all__ = ["LAB_SETTINGS", "LANGUAGE_PACKS", "TRANSLATION_PLUGIN", "free_port", "kernel_encryption_available",
           "lab_command", "lab_url", "main", "ready_banner", "run_server", "server_ready"]

LANGUAGE_PACKS = {"zh_CN": "jupyterlab-language-pack-zh-cn"}
"""JupyterLab locale -> the PyPI package that provides it (pinned in constraints.txt)."""
START_PAGE = "/lab"
"""Where the printed URL and ``/`` lead: JupyterLab on the work folder, a path it opens without a dialog."""


def free_port(preferred: int = 8888) -> int:
    """``preferred`` when nothing listens there, else a free port chosen by the OS."""
    for port in (preferred, 0):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return sock.getsockname()[1]
    raise RuntimeError("no free TCP port on 127.0.0.1")


def port_message(preferred: int, port: int, target: str = "lab") -> str | None:
    """The one line that says the preferred port was busy, or None when it was free."""
    if port == preferred or preferred == 0:
        return None
    return tr("Port {preferred} is busy (another JupyterLab?): using {port}. Choose one with make {target} PORT=...",
              preferred=preferred, port=port, target=target)


def installed_locales() -> set[str]:
    """The locales of the JupyterLab language packs installed (their ``jupyterlab.languagepack`` entry points)."""
    from importlib.metadata import entry_points

    return {entry.name for entry in entry_points(group="jupyterlab.languagepack")}


def kernel_encryption_available() -> bool:
    """Whether pyzmq can encrypt the kernels' messages (CurveZMQ). Then the server gives each kernel its
    keys (``transport_encryption=auto``), and ipykernel does not warn that it runs "over TCP without
    encryption" each time a notebook opens."""
    try:
        import zmq
    except ImportError:
        return False
    return bool(zmq.has("curve"))


def lab_url(port: int, token: str) -> str:
    """The URL the learner opens: :data:`START_PAGE` with the token."""
    return f"http://127.0.0.1:{port}{START_PAGE}?token={token}"


def server_ready(port: int, token: str, timeout_s: float = 2.0) -> bool:
    """Whether the Jupyter server on ``port`` answers its API with ``token`` (no proxy is asked)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/status",
                                     headers={"Authorization": f"token {token}"})
    try:
        with opener.open(request, timeout=timeout_s) as response:
            return response.status == 200
    except OSError:
        return False


def ready_banner(url: str, work: Path) -> str:
    """What the terminal shows once JupyterLab answers: the URL, then how to stop it (the last word)."""
    return "\n".join(["", "  " + tr("JupyterLab is ready. Open this URL in your browser:"), "", f"    {url}", "",
                      "  " + tr("Your work folder: {work}", work=work),
                      "  " + tr("To stop JupyterLab, press Ctrl-C once in this terminal."), ""])


def run_server(command: list[str], grace_s: float = 30.0, cwd: Path = REPO_ROOT,
               ready: Callable[[], bool] | None = None, on_ready: Callable[[], None] | None = None,
               poll_s: float = 0.5, dot_s: float = 2.0) -> int:
    """Run ``command`` until it exits; pass SIGINT/SIGTERM/SIGHUP on as SIGTERM; return its exit status.

    Until ``ready()`` is true, a dot is printed every ``dot_s``; then ``on_ready()`` runs, once.
    A server stopped this way that exits with 0 (or by the SIGTERM itself) counts as a clean exit, 0.
    A second signal, or ``grace_s`` without an exit, kills its process group.
    """
    proc = subprocess.Popen(command, cwd=cwd, start_new_session=True)
    stopping = []

    def stop(signum, frame):
        if proc.poll() is not None:
            return
        if stopping:
            print("\n" + tr("Killing JupyterLab."), flush=True)
            os.killpg(proc.pid, signal.SIGKILL)
            return
        stopping.append(signum)
        print("\n" + tr("Stopping JupyterLab: shutting its kernels down (Ctrl-C again to kill it)."), flush=True)
        proc.send_signal(signal.SIGTERM)

    handled = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {signum: signal.signal(signum, stop) for signum in handled}
    announced, next_dot = ready is None, time.monotonic() + dot_s
    try:
        while True:
            waiting = grace_s if stopping else (None if announced else poll_s)
            try:
                status = proc.wait(timeout=waiting)
                break
            except subprocess.TimeoutExpired:
                if stopping:
                    if waiting == grace_s:
                        stop(signal.SIGTERM, None)
                elif ready():
                    announced = True
                    print(flush=True)
                    if on_ready is not None:
                        on_ready()
                elif time.monotonic() >= next_dot:
                    next_dot += dot_s
                    print(".", end="", flush=True)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if stopping and status == -signal.SIGTERM:
        status = 0
    if status == 0:
        print(tr("JupyterLab has stopped."), flush=True)
    elif not stopping:  # after a second Ctrl-C, "Killing JupyterLab." stays the last word
        print("\n" + tr("JupyterLab exited with status {status}: the lines above say why.", status=status),
              file=sys.stderr, flush=True)
    return status


def lab_command(port: int, token: str, *, headless: bool, as_root: bool, extra: list[str] | None = None,
                root: Path = REPO_ROOT / "work", app_settings: Path | None = None,
                workspaces: Path | None = None, encrypt_kernels: bool = False) -> list[str]:
    """The ``jupyter lab`` command line for the course, opening on the folder ``root``, with the
    application settings and workspaces of :mod:`utils.lab_config` when they are given, and the
    kernels' messages encrypted when ``encrypt_kernels`` (:func:`kernel_encryption_available`)."""
    command = [
        sys.executable, "-m", "jupyterlab",
        f"--ServerApp.root_dir={root}",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--LabApp.default_url={START_PAGE}",
        # Jupyter's own startup lines (and its "Control-C ... twice" advice) go; warnings and errors stay.
        "--Application.log_level=WARN",
    ]
    if app_settings is not None:
        command.append(f"--LabApp.app_settings_dir={app_settings}")
    if workspaces is not None:
        command.append(f"--LabApp.workspaces_dir={workspaces}")
    if encrypt_kernels:
        command.append("--KernelManager.transport_encryption=auto")
    if headless:
        command.append("--no-browser")
    if as_root:
        command.append("--allow-root")
    return command + list(extra or [])


def _trust_in_background(work: Path, chapters: Path) -> threading.Event:
    """Trust the course's notebooks in ``work`` on a thread (it imports nbformat); the event is set when done."""
    done = threading.Event()

    def trust() -> None:
        try:
            trust_course_notebooks(work, chapters)
        except Exception as error:  # never worth stopping JupyterLab for: it only quiets a warning
            print("\n" + tr("Could not mark the course's notebooks trusted ({error}); they open all the same.",
                            error=error), file=sys.stderr, flush=True)
        finally:
            done.set()

    threading.Thread(target=trust, name="trust-course-notebooks", daemon=True).start()
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8888,
                        help="preferred port (default: 8888; when it is busy, any free one, and it says so)")
    parser.add_argument("--dry-run", action="store_true", help="print the command and URL, start nothing")
    parser.add_argument("--lang", choices=sorted(LANGUAGES), default="en",
                        help="en (default): the English chapters; zh: the Chinese ones, JupyterLab in Chinese")
    parser.add_argument("--work", type=Path, default=None,
                        help="your work folder (default: work/ in the course folder, which git ignores; "
                             "work/zh/ with --lang zh)")
    parser.add_argument("--chapters", type=Path, default=None, help=argparse.SUPPRESS)
    args, extra = parser.parse_known_args(argv)
    with using_language(args.lang):
        return _launch(args, extra)


def _launch(args: argparse.Namespace, extra: list[str]) -> int:
    zh = args.lang == "zh"
    work = (args.work or REPO_ROOT / "work" / ("zh" if zh else "")).resolve()
    chapters = args.chapters or REPO_ROOT / "chapters" / ("zh" if zh else "")
    locale = LANGUAGES[args.lang]
    if locale is not None and locale not in installed_locales():
        print(tr("JupyterLab's {locale} language pack is missing: pip install {package} "
                 "(make lab-zh installs it from requirements-lab.txt)", locale=locale, package=LANGUAGE_PACKS[locale]),
              file=sys.stderr)
        return 1
    print(tr("Attention, Step by Step: your work folder is {work}", work=work), flush=True)

    for line in sync(work, chapters).lines():
        print(line, flush=True)
    port = free_port(args.port)
    busy = port_message(args.port, port, "lab-zh" if zh else "lab")
    if busy:
        print(busy, flush=True)
    if not args.dry_run:
        print(tr("Starting JupyterLab"), end="", flush=True)  # the dots follow while it starts
    token = os.environ.get("COURSE_LAB_TOKEN") or secrets.token_hex(16)
    headless = not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") or sys.platform == "darwin")
    as_root = hasattr(os, "geteuid") and os.geteuid() == 0
    command = lab_command(port, token, headless=headless, as_root=as_root, extra=extra, root=work,
                          app_settings=lab_settings(work / LAB_SETTINGS, locale), workspaces=workspaces_dir(work),
                          encrypt_kernels=kernel_encryption_available())
    banner = ready_banner(lab_url(port, token), work)
    if args.dry_run:
        print(" ".join(command))
        print(banner, flush=True)
        return 0
    trusted = _trust_in_background(work, chapters)
    return run_server(command, cwd=work, ready=lambda: trusted.is_set() and server_ready(port, token),
                      on_ready=lambda: print(banner, flush=True))


if __name__ == "__main__":
    raise SystemExit(main())
