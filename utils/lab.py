"""Start JupyterLab on the course: ``python -m utils.lab`` (what ``make lab`` runs).

It opens at the repository root with ``chapters/`` showing in the file browser, listens on
127.0.0.1 only, and prints the URL with its token, so it also works on a headless machine or over
an SSH tunnel. Extra arguments are passed to ``jupyter lab``.
"""

from __future__ import annotations

import argparse
import os
import secrets
import socket
import subprocess
import sys

from utils.paths import REPO_ROOT


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


def lab_command(port: int, token: str, *, headless: bool, as_root: bool, extra: list[str] | None = None) -> list[str]:
    """The ``jupyter lab`` command line for the course."""
    command = [
        sys.executable, "-m", "jupyterlab",
        f"--ServerApp.root_dir={REPO_ROOT}",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        "--LabApp.default_url=/lab/tree/chapters",
    ]
    if headless:
        command.append("--no-browser")
    if as_root:
        command.append("--allow-root")
    return command + list(extra or [])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8888, help="preferred port (default: 8888, else any free one)")
    parser.add_argument("--dry-run", action="store_true", help="print the command and URL, start nothing")
    args, extra = parser.parse_known_args(argv)

    port = free_port(args.port)
    token = os.environ.get("COURSE_LAB_TOKEN") or secrets.token_hex(16)
    headless = not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") or sys.platform == "darwin")
    as_root = hasattr(os, "geteuid") and os.geteuid() == 0
    command = lab_command(port, token, headless=headless, as_root=as_root, extra=extra)
    url = f"http://127.0.0.1:{port}/lab/tree/chapters?token={token}"
    print(f"\n  Attention, Step by Step: open this URL in your browser\n\n    {url}\n", flush=True)
    if args.dry_run:
        print(" ".join(command))
        return 0
    try:
        return subprocess.call(command, cwd=REPO_ROOT)
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
