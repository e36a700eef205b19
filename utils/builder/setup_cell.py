"""The setup cell of every notebook, kept as real code so that ruff lints it.

``utils.builder.stamps`` reads this file as text and stamps what follows the ``TEMPLATE BELOW`` line
into the cell tagged ``course-setup`` of each notebook. It is never imported: importing it would
seed torch and edit ``sys.path``. The builder makes two replacements:

- ``{{PIP_SOURCE_ENV}}`` becomes the environment variable named by ``utils.build.PIP_SOURCE_ENV``,
  and ``"{{PIP_SOURCE}}"`` the quoted pip requirement made from ``[tool.course]``;
- a line ``# %magic`` becomes the IPython magic ``%magic`` (a magic is not Python).

The cell must stay short (it is the first code a learner reads), ruff-clean as a notebook cell, and
print nothing (its output is the same everywhere). Everything that need not be in it is in
:func:`utils.notebook_setup.setup`. It finds the course package as Python does: ``make lab`` and Binder
install it, and on Colab the cell installs it. A different ``utils`` (PyPI has one; a learner's project
may have a ``utils/`` folder) is stopped with one sentence saying what was found where.
"""

# The cell imports the exercise preamble after installing the course, and for the learner's use:
# ruff: noqa: E402, F401
# ---- TEMPLATE BELOW ----
# Setup, stamped by `python -m utils.build` from utils/builder/setup_cell.py: edit that, not this cell.
import math
import os
import subprocess
import sys

if "google.colab" in sys.modules:  # Colab: install the course at a pinned ref (Colab's own torch stays)
    COURSE_PIP_SOURCE = os.environ.get(
        "{{PIP_SOURCE_ENV}}",
        "{{PIP_SOURCE}}",
    )
    _pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", COURSE_PIP_SOURCE],
                          capture_output=True, text=True)
    if _pip.returncode:
        raise RuntimeError(f"installing the course failed:\n{_pip.stdout}{_pip.stderr}")
import torch
import torch.nn as nn
import torch.nn.functional as F

import utils

if getattr(utils, "COURSE", None) != "attention-step-by-step":
    raise ImportError(f"`import utils` found {getattr(utils, '__file__', utils)}, which is not this course's "
                      "package: run `make lab` (or `pip install -e .` in the course folder), then restart the kernel.")
from utils.exercises import check

DEVICE = utils.setup()  # seeds, widgets on Colab, inline figures; returns the device the course runs on
