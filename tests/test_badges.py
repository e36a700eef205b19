"""Every notebook in chapters/ and solutions/ opens with an "Open in Colab" and a Binder badge whose
URLs point at the configured repository ([tool.course] in pyproject.toml) and at the notebook's real
path, so no badge points at a moved file or at someone else's fork.

The expected URLs are built here independently of utils.build (only the configuration is shared), so
a bug in the builder's URL scheme fails this test too.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import nbformat
import pytest

from utils.build import NOTEBOOK_GLOB, load_config

REPO = Path(__file__).resolve().parent.parent
CONFIG = load_config(REPO / "pyproject.toml")
NOTEBOOKS = sorted([*(REPO / "solutions").glob(NOTEBOOK_GLOB), *(REPO / "chapters").glob(NOTEBOOK_GLOB)])
LINK = re.compile(r"\[!\[([^\]]*)\]\(([^)\s]+)\)\]\(([^)\s]+)\)")  # [![alt](image)](target)


def owner_and_name(repository: str) -> tuple[str, str]:
    parts = urlsplit(repository)
    assert parts.scheme == "https" and parts.netloc == "github.com", f"not a GitHub URL: {repository}"
    owner, name = parts.path.strip("/").removesuffix(".git").split("/")
    return owner, name


def badges_of(nb) -> dict[str, tuple[str, str]]:
    """{alt text: (image URL, link target)} of the badges in the first cell's badge region."""
    first = nb.cells[0]
    assert first.cell_type == "markdown", "the first cell must be the markdown header"
    region = re.search(r"<!-- badges -->(.*?)<!-- /badges -->", first.source, re.S)
    assert region, "the header has no <!-- badges --> ... <!-- /badges --> region"
    return {alt: (image, target) for alt, image, target in LINK.findall(region[1])}


def test_there_are_notebooks_to_check():
    assert any(p.parent.name == "solutions" for p in NOTEBOOKS) and any(p.parent.name == "chapters" for p in NOTEBOOKS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_badges_point_at_this_notebook(path):
    rel = path.relative_to(REPO).as_posix()
    owner, name = owner_and_name(CONFIG.repository)
    nb = nbformat.read(path, as_version=4)
    badges = badges_of(nb)
    assert set(badges) == {"Open In Colab", "Binder"}, f"{rel}: badges found: {sorted(badges)}"

    image, target = badges["Open In Colab"]
    assert image == "https://colab.research.google.com/assets/colab-badge.svg"
    url = urlsplit(target)
    assert (url.scheme, url.netloc) == ("https", "colab.research.google.com"), target
    prefix = f"/github/{owner}/{name}/blob/{CONFIG.branch}/"
    assert url.path.startswith(prefix), f"{rel}: Colab badge {target} is not for {owner}/{name}@{CONFIG.branch}"
    assert unquote(url.path[len(prefix):]) == rel, f"{rel}: Colab badge points at {url.path[len(prefix):]}"

    image, target = badges["Binder"]
    assert image == "https://mybinder.org/badge_logo.svg"
    url = urlsplit(target)
    assert (url.scheme, url.netloc, url.path) == ("https", "mybinder.org", f"/v2/gh/{owner}/{name}/{CONFIG.branch}"), (
        f"{rel}: Binder badge {target} is not for {owner}/{name}@{CONFIG.branch}"
    )
    assert parse_qs(url.query).get("labpath") == [rel], f"{rel}: Binder badge opens {url.query}"
    assert (REPO / rel).is_file()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_setup_cell_follows_the_badges(path):
    nb = nbformat.read(path, as_version=4)
    setup = nb.cells[1]
    assert setup.cell_type == "code" and "course-setup" in setup.metadata.get("tags", []), (
        "cell 2 must be the setup cell"
    )
    assert '"google.colab" in sys.modules' in setup.source
    assert f"git+{CONFIG.repository.rstrip('/')}@" in setup.source, "the setup cell installs from another repository"
