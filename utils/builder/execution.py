"""Step 6 (``--execute``): run solution notebooks in place and store their outputs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from utils.builder.chapter import KERNELSPEC
from utils.builder.config import load_config
from utils.builder.course import notebook_text, read_source_notebook
from utils.builder.errors import BuildError
from utils.builder.stamps import stamp
from utils.paths import REPO_ROOT

__all__ = ["execute"]


def execute(paths: Sequence[str | Path], root: str | Path = REPO_ROOT, log=print) -> None:
    """Stamp, execute in place (cwd = the notebook's folder) and store the outputs of each solution."""
    from utils.notebook_run import execute_notebook

    root = Path(root)
    config = load_config(root / "pyproject.toml")
    for given in paths:
        path = Path(given).resolve()
        try:
            rel = path.relative_to(root.resolve()).as_posix()
        except ValueError as exc:
            raise BuildError(given, None, f"is not inside the course at {root}") from exc
        if not rel.startswith("solutions/"):
            raise BuildError(rel, None, "only solution notebooks are executed (chapters/ is generated from them)")
        if rel.startswith("solutions/zh/"):
            raise BuildError(rel, None, "is generated (outputs copied from the English solution): execute that one")
        nb = read_source_notebook(path, rel)
        if stamp(nb, config, rel):
            path.write_text(notebook_text(nb), encoding="utf-8")
        result = execute_notebook(path)
        executed = result.notebook
        executed.metadata["kernelspec"] = dict(KERNELSPEC)
        executed.metadata.get("language_info", {}).pop("version", None)
        path.write_text(notebook_text(executed), encoding="utf-8")
        rss = "n/a" if result.peak_rss_mib is None else f"{result.peak_rss_mib:.0f} MiB"
        log(f"executed {rel}: {result.wall_s:.1f} s, kernel peak RSS {rss}")
