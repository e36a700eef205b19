"""The secret seed of an nbgrader course: one file in the instructor's course directory (trusted side).

``python -m utils.build --nbgrader DIR`` draws the seed (or takes ``--seed``) and writes it to
``DIR/grading_secret.txt``, mode 0600, next to ``nbgrader_config.py``: never in ``source/`` or
``release/``, never in a notebook, never in the package. The course's judge
(:mod:`utils.grading.nbgrader_judge`) reads it when nbgrader autogrades, and derives each student's
hidden cases from it as ``python -m utils.grade --seed SEED`` does. Standard library only.

>>> import tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> write_secret(folder / SECRET_NAME, 12345)
>>> read_secret(folder / SECRET_NAME), oct(secret_mode(folder / SECRET_NAME))
(12345, '0o600')
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["SECRET_NAME", "SecretError", "read_secret", "secret_mode", "write_secret"]

SECRET_NAME = "grading_secret.txt"
"""The secret's file name, in the nbgrader course directory."""
_HEADER = (
    "# The seed of this nbgrader course's hidden cases, written by `python -m utils.build --nbgrader`.\n"
    "# Keep it private (mode 0600) and keep a copy: every student's hidden cases depend on it.\n"
)
_MAX_BYTES = 4096


class SecretError(ValueError):
    """The secret file is missing, unreadable, readable by other users, or malformed."""


def secret_mode(path: Path) -> int:
    """The permission bits of ``path`` (``0o600`` for a secret as written)."""
    return stat.S_IMODE(os.stat(path).st_mode)


def write_secret(path: Path, seed: int) -> None:
    """Create ``path`` holding ``seed``, mode 0600 from the start; an existing file is never overwritten
    (``FileExistsError``)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        os.fchmod(fd, 0o600)  # whatever the umask
        os.write(fd, f"{_HEADER}{seed}\n".encode("ascii"))
    finally:
        os.close(fd)


def read_secret(path: Path) -> int:
    """The seed in ``path``; raises :class:`SecretError` saying what is wrong and how to fix it."""
    path = Path(path)
    how = (
        f"it is written by `python -m utils.build --nbgrader {path.parent}`; restore your copy of it, or "
        f"export again with --seed SEED (the seed the students were graded with, to keep their hidden cases)"
    )
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise SecretError(
            f"the course's grading secret {path} is missing, so the hidden cases cannot be drawn: {how}"
        ) from None
    except OSError as exc:
        raise SecretError(f"cannot read the course's grading secret {path}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SecretError(f"the course's grading secret {path} is not a regular file")
        if info.st_mode & 0o007:
            raise SecretError(
                f"the course's grading secret {path} is readable by other users (mode "
                f"{oct(stat.S_IMODE(info.st_mode))}): run `chmod 600 {path}`"
            )
        data = os.read(fd, _MAX_BYTES + 1)
    finally:
        os.close(fd)
    lines = [line.strip() for line in data.decode("ascii", "replace").splitlines()]
    values = [line for line in lines if line and not line.startswith("#")]
    if len(data) > _MAX_BYTES or len(values) != 1 or not values[0].isdigit():
        raise SecretError(
            f"the course's grading secret {path} should hold one non-negative integer (and '#' comment lines): {how}"
        )
    return int(values[0])
