"""Execute a notebook with nbclient and measure it: wall time and the kernel's peak memory.

Used by ``python -m utils.build --execute`` (to store a solution's outputs, printing what it measured)
and by the Binder and Colab tests. The budgets themselves (every solution under 60 s, kernel peak RSS
under 1 GiB, because Binder gives 1-2 GB) are checked during ``make nbval-solutions`` by the plugin
``tests/nbval_budgets.py``.

The kernel runs like Jupyter runs it: its working directory is the notebook's folder. Its environment
is made deterministic (``PYTHONHASHSEED=0``, the inline matplotlib backend), so outputs stored by
``--execute`` match what nbval sees.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from utils._proc import peak_rss_bytes

__all__ = ["CELL_TIMEOUT_S", "RunResult", "deterministic_env", "execute_notebook"]

CELL_TIMEOUT_S = 300
"""Seconds any one cell may run before the execution fails."""


@dataclass
class RunResult:
    """What :func:`execute_notebook` measured.

    ``peak_rss_bytes`` is the kernel's ``VmHWM`` read just before shutdown
    (:func:`utils._proc.peak_rss_bytes`), or None where ``/proc`` is not available (not Linux).
    """

    notebook: nbformat.NotebookNode
    wall_s: float
    peak_rss_bytes: int | None
    epilogue: str = ""
    """What the ``epilogue`` code printed (stdout), run in the kernel after the last cell."""

    @property
    def peak_rss_mib(self) -> float | None:
        return None if self.peak_rss_bytes is None else self.peak_rss_bytes / 2**20


def deterministic_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a kernel gets: ``base`` (default ``os.environ``) with ``PYTHONHASHSEED=0`` and
    the inline matplotlib backend, so that set iteration order and figure output are the same on
    every run."""
    env = dict(os.environ if base is None else base)
    env["PYTHONHASHSEED"] = "0"
    env["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    return env


def _kernel_pid(client: NotebookClient) -> int | None:
    km = client.km
    provisioner = getattr(km, "provisioner", None)
    process = getattr(provisioner, "process", None) or getattr(km, "kernel", None)
    return getattr(process, "pid", None)


def execute_notebook(
    path: str | Path,
    *,
    timeout: int = CELL_TIMEOUT_S,
    kernel_name: str = "python3",
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
    allow_errors: bool = False,
    epilogue: str | None = None,
) -> RunResult:
    """Execute the notebook at ``path`` top to bottom and return it with its measurements.

    The file is not changed. Cells tagged ``raises-exception`` may raise; any other error raises
    ``nbclient.exceptions.CellExecutionError`` naming the cell.

    Args:
        path: the ``.ipynb`` file.
        timeout: seconds per cell.
        kernel_name: the kernel spec to start.
        env: the kernel's environment (default: :func:`deterministic_env`).
        cwd: the kernel's working directory. Default: the notebook's folder.
        allow_errors: record every error in the outputs instead of raising, so the caller can judge
            them (a student notebook run in a fresh environment). Default: ``False``.
        epilogue: code run in the same kernel after the last cell, outside the notebook (which does
            not get it); what it prints is :attr:`RunResult.epilogue`. Default: none.
    """
    path = Path(path).resolve()
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name=kernel_name,
        allow_errors=allow_errors,
        record_timing=False,
        resources={"metadata": {"path": str(cwd or path.parent)}},
    )
    client.reset_execution_trackers()
    start = time.perf_counter()
    peak = None
    with client.setup_kernel(env=deterministic_env() if env is None else env):
        info = client.wait_for_reply(client.kc.kernel_info())
        if info is not None and "language_info" in info["content"]:
            nb.metadata["language_info"] = info["content"]["language_info"]
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index, execution_count=client.code_cells_executed + 1)
        pid = _kernel_pid(client)
        peak = peak_rss_bytes(pid) if pid is not None else None
        printed = ""
        if epilogue is not None:
            extra = nbformat.v4.new_code_cell(epilogue)
            nb.cells.append(extra)  # nbclient writes the executed cell back by index
            try:
                client.execute_cell(extra, len(nb.cells) - 1, store_history=False)
            finally:
                nb.cells.pop()
            printed = "".join(o.get("text", "") for o in extra.outputs
                              if o.get("output_type") == "stream" and o.get("name") == "stdout")
        client.set_widgets_metadata()
    return RunResult(notebook=nb, wall_s=time.perf_counter() - start, peak_rss_bytes=peak, epilogue=printed)
