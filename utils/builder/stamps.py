"""Step 2 of a build: stamp a notebook's header badges and its setup cell.

The badges lie between ``<!-- badges -->`` and ``<!-- /badges -->`` in the first cell; the setup cell is
the second cell, tagged ``course-setup``, and comes from the template in ``setup_cell.py``. Both are
made from ``[tool.course]``; nothing else in a notebook is touched.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import nbformat

from utils.builder.config import CourseConfig
from utils.i18n.messages import LANGUAGES
from utils.notebook_files import BADGES_CLOSE, BADGES_OPEN, BuildError

__all__ = ["PIP_SOURCE_ENV", "SETUP_TAG", "notebook_language", "setup_source", "stamp"]

SETUP_TAG = "course-setup"

PIP_SOURCE_ENV = "COURSE_PIP_SOURCE"
"""Environment variable that, when set in the kernel, replaces the pip requirement the setup cell
installs on Colab (a local path or a ``file://`` URL), so a test can simulate Colab offline."""

TEMPLATE_PATH = Path(__file__).with_name("setup_cell.py")
_TEMPLATE_START = "# ---- TEMPLATE BELOW ----\n"
_MAGIC = "# %"


def _template() -> str:
    text = TEMPLATE_PATH.read_text(encoding="utf-8")
    if text.count(_TEMPLATE_START) != 1:
        raise BuildError(TEMPLATE_PATH.name, None, f"needs exactly one line {_TEMPLATE_START.strip()!r}")
    lines = text.split(_TEMPLATE_START, 1)[1].rstrip("\n").split("\n")
    return "\n".join(line[len(_MAGIC) - 1:] if line.startswith(_MAGIC) else line for line in lines)


_SETUP_CALL = "DEVICE = utils.setup()"
_LANGUAGE_DIRS = {lang: lang for lang, locale in LANGUAGES.items() if locale}  # solutions/<lang>/: a translation


def notebook_language(relpath: str) -> str:
    """The language of the notebook at ``relpath``: ``zh`` under ``solutions/zh/`` or ``chapters/zh/``.

    >>> notebook_language("chapters/zh/01_x.ipynb"), notebook_language("solutions/01_x.ipynb")
    ('zh', 'en')
    """
    parts = Path(relpath).parts
    return _LANGUAGE_DIRS.get(parts[1], "en") if len(parts) > 2 else "en"


def setup_source(config: CourseConfig, lang: str = "en") -> str:
    """The setup cell's source for ``config``: the template with its placeholders filled; a notebook in
    another language than English passes it to ``utils.setup``, which chooses the messages' language.

    >>> source = setup_source(CourseConfig("https://github.com/a/b", "main", None, "pkg"))
    >>> '"pkg @ git+https://github.com/a/b@main",' in source and '"COURSE_PIP_SOURCE",' in source
    True
    >>> source.splitlines()[-1]
    'DEVICE = utils.setup()  # seeds, widgets on Colab, inline figures; returns the device the course runs on'
    """
    source = (
        _template()
        .replace("{{PIP_SOURCE_ENV}}", PIP_SOURCE_ENV)
        .replace('"{{PIP_SOURCE}}"', json.dumps(config.pip_source))
    )
    if lang != "en":
        if source.count(_SETUP_CALL) != 1:
            raise BuildError(TEMPLATE_PATH.name, None, f"needs exactly one {_SETUP_CALL!r} line")
        source = source.replace(_SETUP_CALL, f'DEVICE = utils.setup(lang="{lang}")')
    return source


def _badge_span(nb: Mapping, path: str) -> tuple[int, int]:
    """Where the badge region (both markers included) lies in the first cell's source."""
    if not nb["cells"] or nb["cells"][0]["cell_type"] != "markdown":
        raise BuildError(path, 0, "the first cell must be the markdown header")
    source = nb["cells"][0]["source"]
    if (
        source.count(BADGES_OPEN) != 1
        or source.count(BADGES_CLOSE) != 1
        or source.index(BADGES_CLOSE) < source.index(BADGES_OPEN)
    ):
        raise BuildError(
            path, 0, f"the header needs one {BADGES_OPEN} followed by one {BADGES_CLOSE} (badges go between)"
        )
    return source.index(BADGES_OPEN), source.index(BADGES_CLOSE) + len(BADGES_CLOSE)


def _setup_index(nb: Mapping, path: str) -> int:
    tagged = [i for i, cell in enumerate(nb["cells"]) if SETUP_TAG in cell.get("metadata", {}).get("tags", [])]
    if len(tagged) != 1:
        raise BuildError(path, None, f"needs exactly one cell tagged {SETUP_TAG!r}, found {len(tagged)}")
    index = tagged[0]
    if index != 1 or nb["cells"][index]["cell_type"] != "code":
        raise BuildError(path, index, f"the cell tagged {SETUP_TAG!r} must be the second cell, a code cell")
    return index


def stamp(nb: nbformat.NotebookNode, config: CourseConfig, relpath: str) -> bool:
    """Stamp the badges and the setup cell into ``nb`` in place.

    Args:
        nb: the notebook.
        config: where the course lives.
        relpath: the notebook's path relative to the repository root, which the badges open.

    Returns:
        Whether anything changed. Raises :class:`BuildError` when the header or the setup cell is
        missing.
    """
    start, end = _badge_span(nb, relpath)
    source = nb["cells"][0]["source"]
    # Markers and badges on lines of their own: a line starting with "<!--" is a raw HTML block in
    # Markdown, so badges on the markers' line would show as literal text instead of images.
    region = f"{BADGES_OPEN}\n{config.badges(relpath)}\n{BADGES_CLOSE}"
    new_source = source[:start] + region + source[end:]
    setup = _setup_index(nb, relpath)
    changed = False
    if new_source != source:
        nb["cells"][0]["source"] = new_source
        changed = True
    wanted = setup_source(config, notebook_language(relpath))
    if nb["cells"][setup]["source"] != wanted:
        nb["cells"][setup]["source"] = wanted
        changed = True
    return changed
