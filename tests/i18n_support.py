"""What the tests of the Chinese messages share: every test starts and ends in English; what a hanzi is."""

from __future__ import annotations

import re

import matplotlib.pyplot as plt
import pytest

from utils.i18n.messages import LANG_ENV, set_language

HAN = re.compile(r"[\u4e00-\u9fff]")
"""A hanzi (CJK Unified Ideographs): ``HAN.search(text)`` tells Chinese text from English."""


@pytest.fixture(autouse=True)
def english_by_default(monkeypatch):
    """No ``COURSE_LANG`` and no chosen language before the test; English again after it, figures closed."""
    monkeypatch.delenv(LANG_ENV, raising=False)
    set_language(None)
    yield
    monkeypatch.delenv(LANG_ENV, raising=False)
    set_language(None)
    plt.close("all")
