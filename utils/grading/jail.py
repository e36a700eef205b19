"""Private mounts for one sandboxed worker: run as root inside its new mount namespace, then ``exec``.

``python -I -S jail.py SPEC -- COMMAND...`` (the sandbox puts it between ``unshare`` and ``setpriv``).
``SPEC`` is JSON with three lists:

* ``cover``: ``[path, mode, size]`` folders covered with an empty, size-limited ``tmpfs`` (``/tmp``,
  ``/var/tmp``, ``/home``, ``/dev/shm``): whatever classmates or other programs left there is out of
  sight, and what the worker writes there is in RAM it cannot grow past ``size``, freed when the
  namespace's last process exits;
* ``keep``: paths the worker needs (its own unit folder, read-write; Python and the course package,
  read-only) that a cover hid. Each is opened *before* the covers go on, then bind-mounted back from
  that descriptor at the same path;
* ``cover_last``: folders covered after ``keep`` is restored (the submissions and output folders),
  so that a ``keep`` path above them cannot bring them back.

Standard library only: it runs before anything of the course is importable in the sandbox. A step
that fails stops the worker with a one-line reason on stderr (the grader reports it); nothing runs
half-jailed.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]


class JailError(RuntimeError):
    pass


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def enc(text: str | None) -> bytes | None:
        return None if text is None else os.fsencode(text)

    if _libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)) != 0:
        errno = ctypes.get_errno()
        raise JailError(f"mount {fstype or 'bind'} on {target}: {os.strerror(errno)}")


def _same(path: str, fd: int) -> bool:
    """Whether ``path`` still shows the object behind ``fd`` (not hidden by a cover)."""
    try:
        now, then = os.stat(path), os.fstat(fd)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (then.st_dev, then.st_ino)


def _cover(path: str, mode: str, size: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode={mode}")


def jail(spec: dict) -> None:
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing below propagates back to the grader's mounts
    held: list[tuple[str, bool, int, bool]] = []
    for path, writable in spec.get("keep", []):
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue  # not there: nothing to restore
        held.append((os.path.abspath(path), bool(writable), fd, os.path.isdir(path)))
    for path, mode, size in spec.get("cover", []):
        _cover(path, mode, size)
    covered = {os.path.abspath(path) for path, _mode, _size in spec.get("cover", [])}
    # read-only paths first, shortest first; then the writable ones, always mounted (on top of a
    # read-only path that holds them, they would otherwise stay read-only)
    for path, writable, fd, is_dir in sorted(held, key=lambda item: (item[1], len(item[0]))):
        if path in covered or any(root.startswith(path.rstrip("/") + "/") for root in covered):
            raise JailError(f"{path} would bring back a covered folder")
        if _same(path, fd) and not writable:
            continue
        if is_dir:
            os.makedirs(path, mode=0o755, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
            with open(path, "a", encoding="utf-8"):
                pass
        _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND)
        if not writable:
            try:
                _mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
            except JailError:
                pass  # a user namespace may refuse to change locked flags; the uid's permissions still apply
        if not _same(path, fd):
            raise JailError(f"could not restore {path}")
    for path, mode, size in spec.get("cover_last", []):
        _cover(path, mode, size)
    for _path, _writable, fd, _is_dir in held:
        os.close(fd)


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("jail: usage: jail.py SPEC -- COMMAND...", file=sys.stderr)
        return 2
    try:
        jail(json.loads(argv[0]))
    except (JailError, OSError, ValueError) as exc:
        print(f"jail: {exc}", file=sys.stderr)
        return 3
    os.execvp(argv[2], argv[2:])
    return 127  # pragma: no cover  (execvp does not return)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
