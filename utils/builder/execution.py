"""Step 6 (``--execute``): run solution notebooks in place and store their outputs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from utils.builder.chapter import KERNELSPEC
from utils.builder.config import load_config
from utils.builder.course import notebook_text, render
from utils.builder.stamps import stamp
from utils.notebook_files import BuildError, read_source_notebook
from utils.paths import REPO_ROOT

__all__ = ["execute"]


def execute(paths: Sequence[str | Path], root: str | Path = REPO_ROOT, log=print) -> None:
    """Stamp, execute in place (cwd = the notebook's folder) and store the outputs of each solution; a
    Chinese solution (``solutions/zh/``) is generated afresh first and records the code it ran."""
    from utils.i18n.catalog import OUTPUT_DIR  # Babel: only where catalogues are built
    from utils.i18n.notebooks import EXECUTED_KEY, code_digest
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
        translated = rel.startswith(f"solutions/{OUTPUT_DIR}/")
        if translated:  # generated: made afresh from the English solution and its catalogue, then run
            expected = render(root).get(root / rel)
            if expected is None:
                raise BuildError(rel, None, "has no English solution with a catalogue to be generated from")
            path.write_text(expected, encoding="utf-8")
        else:
            nb = read_source_notebook(path, rel)
            if stamp(nb, config, rel):
                path.write_text(notebook_text(nb), encoding="utf-8")
        result = execute_notebook(path)
        executed = result.notebook
        executed.metadata["kernelspec"] = dict(KERNELSPEC)
        executed.metadata.get("language_info", {}).pop("version", None)
        if translated:
            executed.metadata["course"][EXECUTED_KEY] = code_digest(executed)
        path.write_text(notebook_text(executed), encoding="utf-8")
        rss = "n/a" if result.peak_rss_mib is None else f"{result.peak_rss_mib:.0f} MiB"
        log(f"executed {rel}: {result.wall_s:.1f} s, kernel peak RSS {rss}")
