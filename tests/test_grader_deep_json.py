"""A notebook whose JSON is nested 100,000 deep (red team R14, issue 35) is reported as too deeply nested
to read, not as invalid JSON (it is valid JSON; Python's reader gives up on its depth)."""

from __future__ import annotations

import pytest

from utils.grading.course import InvalidNotebook, parse_notebook


def test_json_nested_too_deeply_says_so():
    deep = b'{"cells": [], "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with pytest.raises(InvalidNotebook, match="nested too deeply") as info:
        parse_notebook(deep)
    assert "not valid JSON" not in str(info.value)
    with pytest.raises(InvalidNotebook, match="is not valid JSON"):
        parse_notebook(b'{"cells": [')
