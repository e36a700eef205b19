"""Start JupyterLab on the course: ``python -m utils.lab`` (what ``make lab`` runs).

It first brings the learner's work folder (``work/``, ignored by git) up to date with ``chapters/`` by
the rules of :mod:`utils.workspace` (a chapter the learner changed is never touched; a newer version
goes beside it), then opens JupyterLab on that folder. It listens on
127.0.0.1 only, and prints the URL with its token, so it also works on a headless machine or over
an SSH tunnel. Extra arguments are passed to ``jupyter lab``.

Ctrl-C stops it cleanly: the server runs in a session of its own (so the terminal's SIGINT reaches only
this wrapper, and Jupyter does not ask ``Shut down this Jupyter server (y/[n])?``), and the wrapper
passes SIGINT, SIGTERM and SIGHUP on as SIGTERM, on which jupyter_server shuts its kernels down and
removes its ``jpserver-*.json``. A second Ctrl-C kills the server's process group at once.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import socket
import subprocess
import sys
from pathlib import Path

from utils.paths import REPO_ROOT
from utils.workspace import sync


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


def port_message(preferred: int, port: int) -> str | None:
    """The one line that says the preferred port was busy, or None when it was free."""
    if port == preferred or preferred == 0:
        return None
    return f"Port {preferred} is busy (another JupyterLab?): using {port}. Choose one with make lab PORT=..."


def run_server(command: list[str], grace_s: float = 30.0, cwd: Path = REPO_ROOT) -> int:
    """Run ``command`` until it exits; pass SIGINT/SIGTERM/SIGHUP on as SIGTERM; return its exit status.

    A server stopped this way that exits with 0 (or by the SIGTERM itself) counts as a clean exit, 0.
    A second signal, or ``grace_s`` without an exit, kills its process group.
    """
    proc = subprocess.Popen(command, cwd=cwd, start_new_session=True)
    stopping = []

    def stop(signum, frame):
        if proc.poll() is not None:
            return
        if stopping:
            print("\nKilling JupyterLab.", flush=True)
            os.killpg(proc.pid, signal.SIGKILL)
            return
        stopping.append(signum)
        print("\nStopping JupyterLab: shutting its kernels down (Ctrl-C again to kill it).", flush=True)
        proc.send_signal(signal.SIGTERM)

    handled = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {signum: signal.signal(signum, stop) for signum in handled}
    try:
        while True:
            try:
                status = proc.wait(timeout=grace_s if stopping else None)
                break
            except subprocess.TimeoutExpired:
                stop(signal.SIGTERM, None)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if stopping and status in (0, -signal.SIGTERM):
        return 0
    return status


def lab_command(port: int, token: str, *, headless: bool, as_root: bool, extra: list[str] | None = None,
                root: Path = REPO_ROOT / "work") -> list[str]:
    """The ``jupyter lab`` command line for the course, opening on the folder ``root``."""
    command = [
        sys.executable, "-m", "jupyterlab",
        f"--ServerApp.root_dir={root}",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        "--LabApp.default_url=/lab/tree",
    ]
    if headless:
        command.append("--no-browser")
    if as_root:
        command.append("--allow-root")
    return command + list(extra or [])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8888,
                        help="preferred port (default: 8888; when it is busy, any free one, and it says so)")
    parser.add_argument("--dry-run", action="store_true", help="print the command and URL, start nothing")
    parser.add_argument("--work", type=Path, default=REPO_ROOT / "work",
                        help="your work folder (default: work/ in the course folder, which git ignores)")
    parser.add_argument("--chapters", type=Path, default=REPO_ROOT / "chapters", help=argparse.SUPPRESS)
    args, extra = parser.parse_known_args(argv)

    work = args.work.resolve()
    for line in sync(work, args.chapters).lines():
        print(line, flush=True)

    port = free_port(args.port)
    busy = port_message(args.port, port)
    if busy:
        print(busy, flush=True)
    token = os.environ.get("COURSE_LAB_TOKEN") or secrets.token_hex(16)
    headless = not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") or sys.platform == "darwin")
    as_root = hasattr(os, "geteuid") and os.geteuid() == 0
    command = lab_command(port, token, headless=headless, as_root=as_root, extra=extra, root=work)
    url = f"http://127.0.0.1:{port}/lab/tree?token={token}"
    print(f"\n  Attention, Step by Step: your work folder is {work}\n  Open this URL in your browser\n\n"
          f"    {url}\n", flush=True)
    if args.dry_run:
        print(" ".join(command))
        return 0
    return run_server(command, cwd=work)


if __name__ == "__main__":
    raise SystemExit(main())
