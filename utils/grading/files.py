"""Reading and removing what learner code may have touched, treating every path as hostile (trusted side).

* :func:`read_regular` opens with ``O_NOFOLLOW | O_NONBLOCK``, checks the *open descriptor* with
  ``fstat`` (a regular file, not too large) and reads from that descriptor, so a file swapped for a
  FIFO, a symbolic link or a device between a check and a read can neither hang nor redirect the grader.
* :func:`open_dir` walks folders below a trusted one without following symbolic links.
* :func:`remove_tree` removes a folder tree without recursion and with a constant number of open
  descriptors, so a tree thousands of levels deep (or longer than ``PATH_MAX``) is removed like any other.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
_DIR = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC


class Refused(OSError):
    """A file that is missing, not a regular file, a link, or too large; ``str()`` is a short reason."""


class TooLarge(Refused):
    def __init__(self, size: int) -> None:
        super().__init__(f"is too large ({size} bytes)")
        self.size = size


def read_regular(name: str | Path, limit: int, *, dir_fd: int | None = None) -> bytes:
    """The bytes of the regular file ``name`` (relative to ``dir_fd`` when given), at most ``limit``."""
    try:
        fd = os.open(name, _READ, dir_fd=dir_fd)
    except FileNotFoundError:
        raise Refused("is missing") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Refused("is a symbolic link") from None
        raise Refused(f"cannot be opened ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Refused("is not a regular file")
        if info.st_size > limit:
            raise TooLarge(info.st_size)
        chunks, total = [], 0
        while True:  # the size may change while we read: never read more than the limit
            chunk = os.read(fd, min(2**20, limit + 1 - total))
            if not chunk:
                return b"".join(chunks)
            total += len(chunk)
            if total > limit:
                raise TooLarge(total)
            chunks.append(chunk)
    except BlockingIOError:
        raise Refused("is not a regular file") from None
    finally:
        os.close(fd)


@contextlib.contextmanager
def open_dir(base: Path, *parts: str) -> Iterator[int]:
    """A descriptor of ``base/part/...``: ``base`` is trusted, each part must be a real folder (no link).
    Raises :class:`Refused` otherwise."""
    fd = os.open(base, _DIR)
    try:
        for part in parts:
            try:
                inner = os.open(part, _DIR, dir_fd=fd)
            except FileNotFoundError:
                raise Refused(f"{part} is missing") from None
            except OSError as exc:
                raise Refused(f"{part} is not a folder ({exc.strerror})") from None
            os.close(fd)
            fd = inner
        yield fd
    finally:
        os.close(fd)


def remove_tree(path: Path | str) -> None:
    """Remove ``path`` and everything below it, iteratively, never following a symbolic link.

    Depth-first with a stack of names (not of descriptors): descend into the first sub-folder, come
    back up through ``..``, and remove each folder once it is empty. Folders without write or search
    permission are given it (we own them, or we are root). Errors on single entries are skipped; a
    missing ``path`` is no error.
    """
    top = Path(path)
    try:
        fd = os.open(top, _DIR)
    except FileNotFoundError:
        return
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(top)
        return
    names: list[str] = []  # the path from top to the current folder
    skipped: set[tuple[int, int]] = set()  # (dev, inode) of folders we could not empty
    try:
        while True:
            sub = _empty_files_find_folder(fd, skipped)
            if sub is not None:
                try:
                    inner = os.open(sub, _DIR, dir_fd=fd)
                except OSError:
                    with contextlib.suppress(OSError):
                        os.chmod(sub, 0o700, dir_fd=fd, follow_symlinks=False)
                    try:
                        inner = os.open(sub, _DIR, dir_fd=fd)
                    except OSError:
                        info = os.stat(sub, dir_fd=fd, follow_symlinks=False)
                        skipped.add((info.st_dev, info.st_ino))
                        continue
                with contextlib.suppress(OSError):
                    os.fchmod(inner, 0o700)
                os.close(fd)
                fd, names = inner, [*names, sub]
                continue
            if not names:
                break
            parent = os.open("..", _DIR, dir_fd=fd)
            os.close(fd)
            fd, name = parent, names.pop()
            try:
                os.rmdir(name, dir_fd=fd)
            except OSError:
                with contextlib.suppress(OSError):
                    info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                    skipped.add((info.st_dev, info.st_ino))
    finally:
        os.close(fd)
    with contextlib.suppress(OSError):
        os.rmdir(top)


def _empty_files_find_folder(fd: int, skipped: set[tuple[int, int]]) -> str | None:
    """Unlink every non-folder entry of ``fd``; return the name of a sub-folder still to remove."""
    with os.scandir(fd) as entries:
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    info = entry.stat(follow_symlinks=False)
                    if (info.st_dev, info.st_ino) not in skipped:
                        return entry.name
                    continue
                os.unlink(entry.name, dir_fd=fd)
            except OSError:
                continue
    return None
