"""A private file system for one sandboxed worker: run as root inside its new mount namespace, then ``exec``.

``python -I -S jail.py SPEC -- COMMAND...`` (the sandbox puts it between ``unshare`` and ``setpriv``).
The jail builds a new root in an empty ``tmpfs`` and ``pivot_root`` s into it, so that the worker sees
**only** what is listed here, and nothing else of the machine: no ``/run`` or ``/var/run`` (the unix
sockets of databases, D-Bus, Docker), no ``/home``, ``/root``, ``/srv`` or ``/mnt``, no course checkout,
no classmates' notebooks, no submissions or output folders, no other unit's folder. The new root holds:

* the system's programs and libraries, read-only: ``/usr``, ``/etc`` and ``/bin``, ``/lib``... (as the
  machine has them: a folder is bound, a symbolic link is copied);
* a fresh ``/proc`` (the worker's own PID namespace) and a ``/dev`` with ``null``, ``zero``, ``full``,
  ``random`` and ``urandom`` only;
* empty, size-limited ``tmpfs`` at ``/tmp``, ``/var/tmp`` and ``/dev/shm`` (:data:`SCRATCH`): what the
  worker leaves there is RAM it cannot grow past the size, freed with the namespace;
* ``SPEC["keep"]``: ``[path, writable]`` pairs the worker needs, at the same path: Python and its
  packages and the worker kit (read-only), the unit folder (read-write). Each is opened *before* anything
  is mounted, then bound from that descriptor;
* ``SPEC["cover_last"]``: ``[path, mode, size]`` folders covered with an empty ``tmpfs`` after ``keep``
  (the course package where it is installed in a kept ``site-packages``, say).

Standard library only: it runs before anything of the course is importable in the sandbox. A step that
fails stops the worker with a one-line reason on stderr (the grader reports it); nothing runs half-jailed.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import sys

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21
MNT_DETACH = 2

SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
"""Bound read-only (or copied, when the machine has a symbolic link there)."""
DEVICES = ("null", "zero", "full", "random", "urandom")
SCRATCH = (("/tmp", "1777", "64m"), ("/var/tmp", "1777", "16m"), ("/dev/shm", "1777", "64m"))
"""``(folder, mode, tmpfs size)``: the worker's only writable places besides its unit folder."""
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "arm64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]


class JailError(RuntimeError):
    pass


def _enc(text: str | None) -> bytes | None:
    return None if text is None else os.fsencode(text)


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    if _libc.mount(_enc(source), _enc(target), _enc(fstype), flags, _enc(data)) != 0:
        errno = ctypes.get_errno()
        raise JailError(f"mount {fstype or 'bind'} on {target}: {os.strerror(errno)}")


def _same(path: str, fd: int) -> bool:
    """Whether ``path`` shows the object behind ``fd``."""
    try:
        now, then = os.stat(path), os.fstat(fd)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (then.st_dev, then.st_ino)


def _hold(path: str) -> int | None:
    try:
        return os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return None  # not there: nothing to bind


def _bind(fd: int, target: str, *, writable: bool, is_dir: bool, device: bool = False) -> None:
    """Bind the object behind ``fd`` at ``target`` (made if missing), read-only unless ``writable``."""
    if is_dir:
        os.makedirs(target, mode=0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
        with open(target, "a", encoding="utf-8"):
            pass
    _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | (MS_REC if is_dir else 0))
    flags = MS_BIND | MS_REMOUNT | MS_NOSUID | (0 if device else MS_NODEV) | (0 if writable else MS_RDONLY)
    try:
        _mount(None, target, None, flags | _locked(target))
    except JailError:
        if not writable and not device:
            raise
    if not _same(target, fd):
        raise JailError(f"could not restore {target}")


def _locked(target: str) -> int:
    """The flags ``target``'s mount already has that a remount must keep: in a user namespace the kernel
    locks them, and a remount that would drop one is refused."""
    have = os.statvfs(target).f_flag
    pairs = ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
             (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME), (os.ST_RELATIME, MS_RELATIME))
    return sum(flag for st, flag in pairs if have & st)


def _tmpfs(target: str, mode: str, size: str) -> None:
    os.makedirs(target, mode=0o755, exist_ok=True)
    _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode={mode}")


def _pivot(new_root: str) -> None:
    number = _PIVOT_ROOT.get(platform.machine())
    if number is None:
        raise JailError(f"pivot_root: unknown system call number on {platform.machine()}")
    os.chdir(new_root)
    if _libc.syscall(number, b".", b".") != 0:
        raise JailError(f"pivot_root: {os.strerror(ctypes.get_errno())}")
    if _libc.umount2(b".", MNT_DETACH) != 0:
        raise JailError(f"detaching the old root: {os.strerror(ctypes.get_errno())}")
    os.chdir("/")


def jail(spec: dict) -> None:
    os.umask(0o022)
    cwd = os.getcwd()
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing below propagates back to the grader's mounts
    links = [(path, os.readlink(path)) for path in SYSTEM if os.path.islink(path)]
    system = [(path, fd) for path in SYSTEM if not os.path.islink(path) and (fd := _hold(path)) is not None]
    devices = [(name, fd) for name in DEVICES if (fd := _hold(f"/dev/{name}")) is not None]
    keep = []
    for path, writable in spec.get("keep", []):
        path = os.path.abspath(path)
        fd = _hold(path)
        if fd is not None:
            keep.append((path, bool(writable), fd, os.path.isdir(path)))
    proc = _hold("/proc")
    root = "/tmp"  # any folder will do as the mount point of the new root: it is private to this namespace
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755")
    for path, target in links:
        os.symlink(target, root + path)
    for path, fd in system:
        _bind(fd, root + path, writable=False, is_dir=True)
    os.makedirs(root + "/proc", mode=0o555)
    try:
        _mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    except JailError:
        if proc is None:
            raise
        _mount(f"/proc/self/fd/{proc}", root + "/proc", None, MS_BIND | MS_REC)
    _tmpfs(root + "/dev", "755", "64k")
    for name, fd in devices:
        _bind(fd, f"{root}/dev/{name}", writable=True, is_dir=False, device=True)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{root}/dev/{name}")
    for path, mode, size in SCRATCH:
        _tmpfs(root + path, mode, size)
    # read-only paths first, shortest first; then the writable ones, always bound (on top of a read-only
    # path that holds them, they would otherwise stay read-only)
    for path, writable, fd, is_dir in sorted(keep, key=lambda item: (item[1], len(item[0]))):
        if _same(root + path, fd) and not writable:
            continue  # already there, e.g. a Python under /usr
        _bind(fd, root + path, writable=writable, is_dir=is_dir)
    for path, mode, size in spec.get("cover_last", []):
        if os.path.isdir(root + path) and not os.path.islink(root + path):
            _mount("tmpfs", root + path, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode={mode}")
    for _path, fd in [*system, *devices] + [(p, fd) for p, _w, fd, _d in keep] + ([("", proc)] if proc else []):
        os.close(fd)
    _pivot(root)
    try:  # the new root's own tmpfs: only mount points and links live there
        _mount(None, "/", None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    except JailError:
        pass
    os.chdir(cwd if os.path.isdir(cwd) else "/")


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
