"""The setup cell of every notebook, kept as real code so that ruff lints it.

``utils.builder.stamps`` reads this file as text and stamps what follows the ``TEMPLATE BELOW`` line
into the cell tagged ``course-setup`` of each notebook. It is never imported: importing it would
seed torch and edit ``sys.path``. The builder makes two replacements:

- ``{{PIP_SOURCE_ENV}}`` becomes the environment variable named by ``utils.build.PIP_SOURCE_ENV``,
  and ``"{{PIP_SOURCE}}"`` the quoted pip requirement made from ``[tool.course]``;
- a line ``# %magic`` becomes the IPython magic ``%magic`` (a magic is not Python).

The cell must stay ruff-clean as a notebook cell and print nothing (its output is the same
everywhere). Its first comment points at ``utils/build.py``, the builder's entry point, which names
this file.
"""

# The cell imports the exercise preamble after finding the course, and for the learner's use:
# ruff: noqa: E402, F401
# ---- TEMPLATE BELOW ----
# Setup: stamped by `python -m utils.build` from [tool.course] in pyproject.toml. Edit the template
# in utils/build.py, not this cell.
import os
import sys

COURSE_PIP_SOURCE = os.environ.get("{{PIP_SOURCE_ENV}}", "{{PIP_SOURCE}}")
if "google.colab" in sys.modules:
    # Colab: install the course package at a pinned ref. No --upgrade: our requirements are ranges,
    # so Colab's own torch satisfies them and stays.
    import importlib
    import subprocess

    _pip = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", COURSE_PIP_SOURCE],
        capture_output=True,
        text=True,
    )
    if _pip.returncode != 0:
        raise RuntimeError(f"pip install {COURSE_PIP_SOURCE} failed:\n{_pip.stdout}{_pip.stderr}")
    importlib.invalidate_caches()
    from google.colab import output as _colab_output

    _colab_output.enable_custom_widget_manager()
else:
    # Locally or on Binder: use the course folder around the notebook (repo root, chapters/ or
    # solutions/), found by walking up to utils/__init__.py; else an installed `utils`.
    from pathlib import Path

    for _folder in [Path.cwd(), *Path.cwd().parents]:
        if (_folder / "utils" / "__init__.py").is_file():
            if str(_folder) not in sys.path:
                sys.path.insert(0, str(_folder))
            break

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

import utils
from utils.exercises import check

DEVICE = utils.get_device()
utils.seed_everything(0)
# %matplotlib inline
