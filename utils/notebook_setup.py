"""What every notebook's setup cell asks of the package, in one call: :func:`setup`.

The setup cell itself (``utils/builder/setup_cell.py``) only installs the course on Colab, imports the
exercise preamble, checks that ``utils`` is this course's package, and calls :func:`setup`.
"""

from __future__ import annotations

import sys

import torch

from utils.device import get_device, seed_everything

__all__ = ["COURSE", "setup", "verify_course_package"]

COURSE = "attention-step-by-step"
"""The marker a notebook checks on ``utils``: another package named ``utils`` does not carry it."""


def verify_course_package() -> None:
    """Raise ``ImportError`` with one sentence when the ``utils`` that ``import utils`` gives is not this
    course's package (a learner's own ``utils/`` folder, or PyPI's ``utils``, found first)."""
    found = sys.modules.get("utils")
    if found is None or getattr(found, "COURSE", None) != COURSE:
        where = getattr(found, "__file__", None) or getattr(found, "__path__", None) or found
        raise ImportError(
            f"`import utils` found {where}, which is not this course's package: run `make lab` (or "
            f"`pip install -e .` in the course folder), then restart the kernel."
        )


def setup(seed: int = 0, device: str | torch.device | None = None, lang: str | None = None) -> torch.device:
    """Prepare a notebook: seed, enable widgets on Colab, show figures inline, pick the device and the
    language of the messages (diagnoses, quizzes, explorers, figures).

    Args:
        seed: seeds Python's ``random`` and torch. Default: ``0``.
        device: passed to :func:`~utils.device.get_device`. Default: ``None`` (CUDA, then MPS, then CPU).
        lang: ``"en"`` or ``"zh"`` (the Chinese notebooks pass ``"zh"``); ``None``: the environment
            variable ``COURSE_LANG``, else English (:mod:`utils.i18n.messages`).

    Returns:
        The ``torch.device`` the chapter runs on (the notebooks call it ``DEVICE``).

    >>> setup(device="cpu")
    device(type='cpu')
    """
    verify_course_package()
    from utils.i18n.messages import set_language  # here, not at import: the grader's sandbox imports utils

    set_language(lang)
    if "google.colab" in sys.modules:  # Colab renders ipywidgets only through its custom widget manager
        from google.colab import output

        output.enable_custom_widget_manager()
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is not None and getattr(shell, "kernel", None) is not None:
        shell.run_line_magic("matplotlib", "inline")
    seed_everything(seed)
    return get_device(device)
