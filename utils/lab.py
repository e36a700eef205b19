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

``--lang zh`` (what ``make lab-zh`` runs) opens the Chinese chapters (``chapters/zh/``, copied into
``work/zh/`` by the same rules) with JupyterLab's own interface in Chinese: the language pack
``jupyterlab-language-pack-zh-cn`` selected for this run only, through an ``overrides.json`` in an
application-settings folder of the run's own (:func:`language_settings`), so the learner's settings
are never edited and ``make lab`` stays English. A locale the learner chose themselves in
JupyterLab (Settings > Language) still wins, as every user setting wins over an override.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
from pathlib import Path

from utils.i18n.messages import LANGUAGES
from utils.paths import REPO_ROOT
from utils.workspace import sync

TRANSLATION_PLUGIN = "@jupyterlab/translation-extension:plugin"
"""The JupyterLab setting that holds the interface's locale."""
LANGUAGE_PACKS = {"zh_CN": "jupyterlab-language-pack-zh-cn"}
"""JupyterLab locale -> the PyPI package that provides it (pinned in constraints.txt)."""
LAB_SETTINGS = ".course-lab"
"""The folder, inside the work folder, holding the run's application settings (rewritten each run)."""


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
    return f"Port {preferred} is busy (another JupyterLab?): using {port}. Choose one with make {target} PORT=..."


def installed_locales() -> set[str]:
    """The locales of the JupyterLab language packs installed (their ``jupyterlab.languagepack`` entry points)."""
    from importlib.metadata import entry_points

    return {entry.name for entry in entry_points(group="jupyterlab.languagepack")}


def default_app_settings_dir() -> Path:
    """JupyterLab's own application-settings folder (``<app dir>/settings``), whose overrides we keep."""
    from jupyterlab.commands import get_app_dir

    return Path(get_app_dir()) / "settings"


def language_settings(folder: str | Path, locale: str, app_settings: str | Path | None = None) -> Path:
    """Write an application-settings folder in ``folder`` that selects JupyterLab's ``locale``; return it.

    Its ``overrides.json`` is JupyterLab's own (from ``app_settings``, default
    :func:`default_app_settings_dir`, when there is one) with the translation setting's ``locale`` set;
    its ``page_config.json`` is copied, and ``static`` (where JupyterLab reads the build's metadata) is
    linked beside it, so that nothing else changes. Passed as ``--LabApp.app_settings_dir``.

    >>> import tempfile
    >>> settings = language_settings(tempfile.mkdtemp(), "zh_CN", app_settings=tempfile.mkdtemp())
    >>> json.loads((settings / "overrides.json").read_text())
    {'@jupyterlab/translation-extension:plugin': {'locale': 'zh_CN'}}
    """
    app_settings = Path(app_settings) if app_settings is not None else default_app_settings_dir()
    settings = Path(folder) / "settings"
    settings.mkdir(parents=True, exist_ok=True)
    overrides = {}
    if (app_settings / "overrides.json").is_file():
        overrides = json.loads((app_settings / "overrides.json").read_text(encoding="utf-8"))
    overrides.setdefault(TRANSLATION_PLUGIN, {})["locale"] = locale
    (settings / "overrides.json").write_text(json.dumps(overrides, indent=1, sort_keys=True) + "\n",
                                             encoding="utf-8")
    if (app_settings / "page_config.json").is_file():
        (settings / "page_config.json").write_bytes((app_settings / "page_config.json").read_bytes())
    static, link = app_settings.parent / "static", Path(folder) / "static"
    if link.is_symlink():  # a venv rebuilt elsewhere since the last run
        link.unlink()
    if static.is_dir() and not link.exists():
        link.symlink_to(static, target_is_directory=True)
    return settings


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
                root: Path = REPO_ROOT / "work", app_settings: Path | None = None) -> list[str]:
    """The ``jupyter lab`` command line for the course, opening on the folder ``root`` (with the
    application settings of :func:`language_settings` when ``app_settings`` is given)."""
    command = [
        sys.executable, "-m", "jupyterlab",
        f"--ServerApp.root_dir={root}",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        "--LabApp.default_url=/lab/tree",
    ]
    if app_settings is not None:
        command.append(f"--LabApp.app_settings_dir={app_settings}")
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
    parser.add_argument("--lang", choices=sorted(LANGUAGES), default="en",
                        help="en (default): the English chapters; zh: the Chinese ones, JupyterLab in Chinese")
    parser.add_argument("--work", type=Path, default=None,
                        help="your work folder (default: work/ in the course folder, which git ignores; "
                             "work/zh/ with --lang zh)")
    parser.add_argument("--chapters", type=Path, default=None, help=argparse.SUPPRESS)
    args, extra = parser.parse_known_args(argv)
    zh = args.lang == "zh"
    work = (args.work or REPO_ROOT / "work" / ("zh" if zh else "")).resolve()
    chapters = args.chapters or REPO_ROOT / "chapters" / ("zh" if zh else "")
    locale = LANGUAGES[args.lang]
    if locale is not None and locale not in installed_locales():
        print(f"JupyterLab's {locale} language pack is missing: pip install {LANGUAGE_PACKS[locale]} "
              "(make lab-zh installs it from requirements-dev.txt)", file=sys.stderr)
        return 1

    for line in sync(work, chapters).lines():
        print(line, flush=True)
    app_settings = language_settings(work / LAB_SETTINGS, locale) if locale else None

    port = free_port(args.port)
    busy = port_message(args.port, port, "lab-zh" if zh else "lab")
    if busy:
        print(busy, flush=True)
    token = os.environ.get("COURSE_LAB_TOKEN") or secrets.token_hex(16)
    headless = not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") or sys.platform == "darwin")
    as_root = hasattr(os, "geteuid") and os.geteuid() == 0
    command = lab_command(port, token, headless=headless, as_root=as_root, extra=extra, root=work,
                          app_settings=app_settings)
    url = f"http://127.0.0.1:{port}/lab/tree?token={token}"
    print(f"\n  Attention, Step by Step: your work folder is {work}\n  Open this URL in your browser\n\n"
          f"    {url}\n", flush=True)
    if args.dry_run:
        print(" ".join(command))
        return 0
    return run_server(command, cwd=work)


if __name__ == "__main__":
    raise SystemExit(main())
