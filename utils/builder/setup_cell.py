"""The setup cell of every notebook, kept as real code so that ruff lints it.

``utils.builder.stamps`` reads this file as text and stamps what follows the ``TEMPLATE BELOW`` line
into the cell tagged ``course-setup`` of each notebook. It is never imported: importing it would
seed torch and edit ``sys.path``. The builder makes two replacements:

- ``{{PIP_SOURCE_ENV}}`` becomes the environment variable named by ``utils.build.PIP_SOURCE_ENV``,
  and ``"{{PIP_SOURCE}}"`` the quoted pip requirement made from ``[tool.course]``;
- a line ``# %magic`` becomes the IPython magic ``%magic`` (a magic is not Python).

The cell must stay short (it is the first code a learner reads), ruff-clean as a notebook cell, and
print nothing outside Colab (its output is the same everywhere); on Colab it says that it installs the
course and shows pip's steps as they happen, so a learner never waits in silence. Everything that need
not be in it is in :func:`utils.notebook_setup.setup`. It finds the course package as Python does:
``make lab`` and Binder install it, and on Colab the cell installs it. A different ``utils`` (PyPI has
one; a learner's project may have a ``utils/`` folder) is stopped with one sentence saying what was
found where.
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
    print("Installing the course, once per Colab session (about a minute) · 正在安装课程（每个会话一次，约一分钟）",
          flush=True)
    _pip = subprocess.Popen([sys.executable, "-m", "pip", "install", "--progress-bar", "off", COURSE_PIP_SOURCE],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    _log = []
    for _line in _pip.stdout:  # pip's own steps as they happen, one short line each
        _log.append(_line)
        if _line.startswith(("Collecting", "Downloading", "Installing collected", "Successfully")):
            print("  " + _line.strip()[:100], flush=True)
    if _pip.wait():
        raise RuntimeError("installing the course failed:\n" + "".join(_log))
import torch
import torch.nn as nn
import torch.nn.functional as F

import utils

if getattr(utils, "COURSE", None) != "attention-step-by-step":
    raise ImportError(f"`import utils` found {getattr(utils, '__file__', utils)}, which is not this course's "
                      "package: run `make lab` (or `pip install -e .` in the course folder), then restart the kernel.")
from utils.exercises import check

DEVICE = utils.setup()  # seeds, widgets on Colab, inline figures; returns the device the course runs on
