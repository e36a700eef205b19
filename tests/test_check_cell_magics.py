"""Walkthrough W25 (issue 35): a cell that starts with ``%%time`` got ✅ in the notebook and 0 from the grader.

Under ``%%time`` IPython compiles the cell's body under the name ``<timed exec>``, which :mod:`linecache` does not
hold, so the check cell found no source and checked nothing: ``%%time`` + ``import json`` + a correct function
passed there and was ``forbidden`` in the grader. The check cell now reads what the grader reads: the raw text of
the newest cell that defines the function, with its IPython lines skipped (:mod:`utils.exercises.magics`).
Cells with ``!`` and ``%`` lines are read the same way (their IPython form, ``get_ipython().system(...)``, is
not what the grader sees).
"""

from __future__ import annotations

import pytest
from IPython.core.interactiveshell import InteractiveShell

from utils.exercises.cell_source import cell_source
from utils.exercises.forbidden import forbidden_in_function, unsafe_in_source
from utils.exercises.magics import python_of

BODY = "def add_one(x):\n    return x + 1\n"


@pytest.fixture(scope="module")
def shell():
    return InteractiveShell.instance()


def _defined(shell, cell: str):
    shell.user_ns.pop("add_one", None)
    result = shell.run_cell(cell, store_history=True)  # as Jupyter runs a cell
    assert result.success, result.error_in_exec or result.error_before_exec
    return shell.user_ns["add_one"]


REFUSED = {  # the cell -> the module the grader names
    "time_magic": ("%%time\nimport json\n" + BODY, "json"),
    "capture_magic": ("%%capture\nimport os\n" + BODY, "os"),
    "shell_line": ("!true\nimport json\n" + BODY, "json"),
    "line_magic": ("%load_ext autoreload\nimport warnings\n" + BODY, "warnings"),
}
FAIR = {
    "time_magic": "%%time\nimport math\n" + BODY,
    "shell_line": "!true\n" + BODY,
    "line_magic_inside": "def add_one(x):\n    %time y = x\n    return x + 1\n",
    "capture_magic": "%%capture\n" + BODY,
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_cell_with_ipython_lines_is_refused_in_the_notebook_as_the_grader_refuses_it(shell, name):
    cell, module = REFUSED[name]
    graded = unsafe_in_source(python_of(cell)[0])
    assert graded is not None and module in graded, graded  # what the grader says
    said = forbidden_in_function(_defined(shell, cell), ())
    assert said is not None and module in said, said  # and the notebook's check, before handing in


@pytest.mark.parametrize("name", sorted(FAIR))
def test_a_fair_cell_with_ipython_lines_passes_in_the_notebook_as_in_the_grader(shell, name):
    cell = FAIR[name]
    assert unsafe_in_source(python_of(cell)[0]) is None
    assert forbidden_in_function(_defined(shell, cell), ()) is None


def test_the_newest_cell_that_defines_the_function_is_read(shell):
    _defined(shell, "%%time\nimport json\n" + BODY)
    fn = _defined(shell, "%%time\n" + BODY)  # the learner removed the import and ran the cell again
    assert "json" not in cell_source(fn) and "def add_one" in cell_source(fn)
    shell.run_cell("y = add_one(1)  # a later cell that only uses it", store_history=True)
    assert "json" not in cell_source(fn)


def test_outside_ipython_a_function_s_own_source_is_read():
    def local(x):
        return x

    assert cell_source(local).lstrip().startswith("def local(x):")
    assert cell_source(len) is None


# Red team R25: where the check cell could not find the function's cell (a functools.partial, an instance with
# __call__, a function made by exec), it checked nothing and showed ✅ while the grader refused the cell.
_RMS = "def _rms(x, eps=1e-6):\n    return x / (x * x).mean().sqrt()\n"
OTHER_STYLES = {  # name -> the exercise cell (add_one), refused by the grader for its import
    "partial": "import json\nimport functools\n" + _RMS + "add_one = functools.partial(_rms, eps=1e-6)\n",
    "instance": "import json\nclass AddOne:\n    def __call__(self, x):\n        return x + 1\nadd_one = AddOne()\n",
    "exec": 'exec("def add_one(x):\\n    return x + 1\\n")\n',
    "nested": "import json\nif True:\n    def add_one(x):\n        return x + 1\n",
}


def _bound(shell, cell: str):
    shell.user_ns.pop("add_one", None)
    result = shell.run_cell(cell, store_history=True)
    assert result.success, result.error_in_exec or result.error_before_exec
    return shell.user_ns["add_one"]


@pytest.mark.parametrize("style", sorted(OTHER_STYLES))
def test_a_function_in_another_style_is_read_from_its_cell_as_the_grader_reads_it(shell, style):
    cell = OTHER_STYLES[style]
    assert unsafe_in_source(python_of(cell)[0]) is not None  # the grader refuses the cell
    fn = _bound(shell, cell)
    shell.run_cell("y = 1  # a later cell", store_history=True)
    said = forbidden_in_function(fn, (), "add_one")
    assert said is not None, style  # and so does the notebook's check
    if style == "exec":
        assert "exec" in said and "add_one" in said, said


@pytest.mark.parametrize("style", ["partial", "instance", "nested"])
def test_the_same_styles_without_a_refused_import_pass(shell, style):
    cell = OTHER_STYLES[style].replace("import json\n", "")
    assert unsafe_in_source(python_of(cell)[0]) is None
    assert forbidden_in_function(_bound(shell, cell), (), "add_one") is None
