"""Step 1 of a build: where the course lives (``[tool.course]`` in ``pyproject.toml``) and the badge
line made from it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from utils.notebook_files import BuildError
from utils.paths import REPO_ROOT

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

__all__ = ["CourseConfig", "load_config"]


@dataclass(frozen=True)
class CourseConfig:
    """Where the course lives. ``ref`` is the tag or commit Colab installs (default: the branch).

    >>> config = CourseConfig("https://github.com/acme/course", "main")
    >>> config.slug, config.pip_source
    ('acme/course', 'attention-step-by-step @ git+https://github.com/acme/course@main')
    """

    repository: str
    branch: str
    ref: str | None = None
    package: str = "attention-step-by-step"

    @property
    def slug(self) -> str:
        """``owner/name`` of the GitHub repository."""
        match = re.fullmatch(r"https://github\.com/([\w.-]+)/([\w.-]+?)(?:\.git)?/?", self.repository)
        if not match:
            raise BuildError(
                "pyproject.toml", None,
                f"[tool.course] repository = {self.repository!r} is not a https://github.com/<owner>/<name> URL",
            )
        return f"{match[1]}/{match[2]}"

    @property
    def pip_source(self) -> str:
        """The pip requirement the setup cell installs on Colab."""
        url = self.repository.rstrip("/")
        return f"{self.package} @ git+{url}@{self.ref or self.branch}"

    def colab_url(self, path: str) -> str:
        """The URL that opens the notebook at ``path`` (relative to the repository root) in Colab."""
        return f"https://colab.research.google.com/github/{self.slug}/blob/{self.branch}/{quote(path)}"

    def binder_url(self, path: str) -> str:
        """The URL that opens the notebook at ``path`` in JupyterLab on Binder."""
        return f"https://mybinder.org/v2/gh/{self.slug}/{self.branch}?labpath={quote(path)}"

    def badges(self, path: str) -> str:
        """The badge line for the notebook at ``path`` (relative to the repository root)."""
        return (
            f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({self.colab_url(path)}) "
            f"[![Binder](https://mybinder.org/badge_logo.svg)]({self.binder_url(path)})"
        )


def load_config(pyproject: str | Path = REPO_ROOT / "pyproject.toml") -> CourseConfig:
    """Read ``[tool.course]`` from ``pyproject.toml``.

    Args:
        pyproject: the file. Default: the repository's own.

    Returns:
        A :class:`CourseConfig` with ``repository``, ``branch``, the optional ``ref`` and the
        package name of ``[project]``. Raises :class:`BuildError` when a key is missing or the
        repository is not a GitHub URL.
    """
    pyproject = Path(pyproject)
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise BuildError(pyproject, None, f"cannot read it: {exc}") from exc
    course = data.get("tool", {}).get("course", {})
    missing = [key for key in ("repository", "branch") if not isinstance(course.get(key), str)]
    if missing:
        raise BuildError(pyproject, None, f"[tool.course] needs {' and '.join(missing)} (strings)")
    config = CourseConfig(
        repository=course["repository"],
        branch=course["branch"],
        ref=course.get("ref") or None,
        package=data.get("project", {}).get("name", CourseConfig.package),
    )
    config.slug  # noqa: B018 - validates the URL early
    return config
