"""Reading a process's memory from ``/proc/<pid>/status`` (Linux); every reader is None elsewhere.

Standard library only, so that a benchmark's measuring child process and the notebook executor can both
use it without importing torch or nbclient.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["status_bytes", "peak_rss_bytes"]

_UNITS = {"kB": 1024, "mB": 2**20}


def status_bytes(field: str, pid: int | str = "self") -> int | None:
    """A size field of ``/proc/<pid>/status`` in bytes, e.g. ``"VmRSS"`` (now) or ``"VmHWM"`` (peak).

    Args:
        field: the field's name, without the colon.
        pid: the process id. Default: ``"self"``, this process.

    Returns:
        The size in bytes, or None where ``/proc`` is not available (not Linux) or the field is missing.

    >>> status_bytes("NoSuchField") is None
    True
    """
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(field + ":"):
            value, unit = line.split()[1:3]
            return int(value) * _UNITS.get(unit, 1)
    return None


def peak_rss_bytes(pid: int | str = "self") -> int | None:
    """The peak resident set size (``VmHWM``) of process ``pid`` in bytes, or None if unknown."""
    return status_bytes("VmHWM", pid)
