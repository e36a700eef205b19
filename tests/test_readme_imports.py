"""The README's lists of the modules an exercise cell may import equal the grader's allow-list
(``utils.exercises._cell_rules.ALLOWED_IMPORTS``), in English and Chinese: walkthroughs W17 and W18 found the
"what to tell students" list naming ``os``, ``time`` and ``json`` as allowed, and a student who followed it
lost the exercise."""

import re
from pathlib import Path

import pytest

from utils.exercises._cell_rules import ALLOWED_IMPORTS

ROOT = Path(__file__).resolve().parent.parent
_NAME = r"`([A-Za-z_][\w.]*)`"
_RUN = re.compile(_NAME + r"(?:\s*(?:,|、|\band\b|和)\s*" + _NAME + r")+")


def import_lists(text: str) -> list[set[str]]:
    """Each run of backticked module names (``a``, ``b`` and ``c``; ``a``、``b`` 和 ``c``) that names
    ``__future__``: the README writes the allowed modules as such a run, and nothing else names ``__future__``."""
    found = []
    for match in _RUN.finditer(text):
        names = set(re.findall(_NAME, match.group(0)))
        if "__future__" in names:
            found.append(names)
    return found


@pytest.mark.parametrize("readme", ["README.md", "README.zh-CN.md"])
def test_every_list_of_allowed_imports_is_the_grader_s(readme):
    lists = import_lists((ROOT / readme).read_text(encoding="utf-8"))
    assert len(lists) == 2, f"{readme}: expected the students' list and the sandbox's list, found {len(lists)}"
    for names in lists:
        assert names == set(ALLOWED_IMPORTS), (
            f"{readme} lists {sorted(names - ALLOWED_IMPORTS)} not allowed by the grader and leaves out "
            f"{sorted(ALLOWED_IMPORTS - names)}"
        )


def test_the_reader_sees_a_module_the_grader_refuses():
    """The check above cannot pass by reading nothing: W17's wrong list is caught."""
    text = "imports `math`, `torch`, `os`, `__future__` and `sys`; elsewhere `json`."
    assert import_lists(text) == [{"math", "torch", "os", "__future__", "sys"}]
    assert import_lists("只能导入 `math`、`os`、\n    `__future__` 和 `sys`（") == [{"math", "os", "__future__", "sys"}]
