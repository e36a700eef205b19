"""Build the student notebooks: ``solutions/NN_*.ipynb`` -> ``chapters/NN_*.ipynb``.

``python -m utils.build`` (``make chapters``):

1. stamps, in each solution, the header badges (what lies between ``<!-- badges -->`` and
   ``<!-- /badges -->`` in the first cell) and the setup cell (the cell tagged ``course-setup``), both
   made from ``[tool.course]`` in ``pyproject.toml``; nothing else in a solution is touched;
2. writes ``chapters/NN_*.ipynb``: every exercise cell (cell metadata ``course.exercise``) has what lies
   between whole-line ``# BEGIN SOLUTION`` / ``# END SOLUTION`` markers replaced by
   ``# YOUR CODE HERE`` / ``raise NotImplementedError`` at the marker's indentation; outputs and
   execution counts are cleared, cell ids kept, notebook metadata reduced to what is not
   machine-specific, plus the builder's ``course.generated`` marker.

A file is written only when its content changes. A chapter notebook without the marker, or whose
cells were edited since it was generated (a learner's work), is never overwritten without ``--force``.

Other modes::

    python -m utils.build --check                   # exit 1 if anything is out of date; writes nothing
    python -m utils.build --execute solutions/01_queries_keys_values.ipynb   # run, store outputs, build

Every problem is a :class:`BuildError` naming the file, the cell and what to fix.

The setup cell's template is ``utils/builder/setup_cell.py``. The steps live in :mod:`utils.builder`
(one module each); this module is the command line and the builder's public names.
"""

import sys

from utils.builder.chapter import STEPS, chapter_path, render_chapter
from utils.builder.cli import main
from utils.builder.config import CourseConfig, load_config
from utils.builder.course import build, outdated, render
from utils.builder.execution import execute
from utils.builder.stamps import PIP_SOURCE_ENV, SETUP_TAG, setup_source, stamp
from utils.builder.strip import BEGIN, END, STUB, strip_solution
from utils.notebook_files import BADGES_CLOSE, BADGES_OPEN, NOTEBOOK_GLOB, BuildError

__all__ = [
    "BADGES_CLOSE",
    "BADGES_OPEN",
    "BEGIN",
    "BuildError",
    "CourseConfig",
    "END",
    "NOTEBOOK_GLOB",
    "PIP_SOURCE_ENV",
    "SETUP_TAG",
    "STEPS",
    "STUB",
    "build",
    "chapter_path",
    "execute",
    "load_config",
    "main",
    "outdated",
    "render",
    "render_chapter",
    "setup_source",
    "stamp",
    "strip_solution",
]


if __name__ == "__main__":
    sys.exit(main())
