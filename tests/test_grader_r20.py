"""Red team R20 (issue 35): correct cells the notebook's check passed got 0 from the grader.

* The check cell looked at the function's own source only, the grader at the whole cell: ``import json`` beside
  the function passed in the notebook and was ``forbidden`` in the grader (also walkthrough W19). The check cell
  now reads the whole cell IPython ran (:func:`utils.exercises.forbidden._own_source`).
* The Mac device line (``torch.backends.mps.is_available()``) and ``torch.cuda.empty_cache()`` were refused.
* A cell with IPython syntax (``%%time`` first, a ``!pip list`` line) was a "syntax error on line 1": the grader
  grades its Python (:mod:`utils.exercises.magics`), and runs no magic and no shell command.
"""

from __future__ import annotations

import grader_fixtures as gf
import pytest
from IPython.core.interactiveshell import InteractiveShell
from test_grader_units import grade_class, row

from utils.attention import scaled_dot_product_attention
from utils.exercises.forbidden import forbidden_in_function, unsafe_in_source
from utils.exercises.magics import python_of
from utils.grading.course import syntax_problem

ADD_ONE = "def add_one(x):\n    return x + 1\n"


@pytest.fixture(scope="module")
def shell():
    return InteractiveShell.instance()


def _defined(shell, cell: str):
    result = shell.run_cell(cell, store_history=True)  # as Jupyter runs a cell
    assert result.success, result.error_in_exec or result.error_before_exec
    return shell.user_ns["add_one"]


@pytest.mark.parametrize("module", ["json", "os", "warnings"])
def test_the_check_cell_sees_an_import_beside_the_function_as_the_grader_does(shell, module):
    cell = f"import {module}\n" + ADD_ONE
    assert unsafe_in_source(cell)  # the grader refuses the cell
    said = forbidden_in_function(_defined(shell, cell), ())
    assert said is not None and module in said, said  # and the notebook's check says so, before handing in


def test_the_same_function_alone_passes_and_a_module_s_function_is_read_alone(shell):
    assert forbidden_in_function(_defined(shell, "import math\n" + ADD_ONE), ()) is None
    # the course's own functions live in files: their own source, not their module's, is read
    assert forbidden_in_function(scaled_dot_product_attention, ()) is None


FAIR_DEVICE = [
    'DEVICE = torch.device("mps" if torch.backends.mps.is_available() else "cpu")\n',
    'import torch as t\nBUILT = t.backends.mps.is_built()\n',
    "torch.cuda.empty_cache()\n",
    "torch.cuda.reset_peak_memory_stats()\n",
]
STILL_REFUSED = [
    "torch.backends.mps.set_rng_state\n",
    "torch.backends.cudnn.enabled\n",
    "b = torch.backends\nb.mps.is_available()\n",
    "torch.backends.mps.is_available.__code__\n",
    "torch.cuda.jiterator\n",
]


@pytest.mark.parametrize("line", FAIR_DEVICE)
def test_device_queries_are_fair(line):
    assert unsafe_in_source(line + ADD_ONE) is None


@pytest.mark.parametrize("line", STILL_REFUSED)
def test_the_rest_of_torch_backends_and_cuda_stays_refused(line):
    assert unsafe_in_source(line + ADD_ONE)


def test_ipython_lines_are_skipped_and_python_is_kept():
    cell = "%%time\n%load_ext autoreload\ndef add_one(x):\n    !echo hi\n    return x + 1\n"
    python, skipped = python_of(cell)
    assert skipped == [1, 2, 4] and syntax_problem(python) is None
    namespace: dict = {}
    exec(compile(python, "<cell>", "exec"), namespace)  # noqa: S102  (the test's own text)
    assert namespace["add_one"](1) == 2
    assert python_of(ADD_ONE) == (ADD_ONE, [])
    modulo = "y = (7\n % 3)\n"  # Python's modulo on a line of its own: untouched
    assert python_of(modulo) == (modulo, [])


def test_a_cell_magic_that_is_not_python_is_named():
    cell = "%%bash\necho hi\n"
    assert python_of(cell) == (cell, [])
    assert syntax_problem(cell) == "the cell starts with the IPython cell magic %%bash, which is not Python: remove it"


@pytest.mark.sandbox
def test_a_correct_cell_with_ipython_lines_or_device_queries_gets_full_marks(tmp_path):
    right = gf.TOY_SOLUTIONS["ch1.add_one"]
    students = {
        "time_magic": {"ch1.add_one": "%%time\n" + right},
        "shell_line": {"ch1.add_one": "!pip list\n" + right},
        "mps_device": {"ch1.add_one": FAIR_DEVICE[0] + right},
        "bash_magic": {"ch1.add_one": "%%bash\necho hi\n"},
    }
    batch = grade_class(tmp_path, students)
    for name in ("time_magic", "shell_line", "mps_device"):
        got = row(batch, name)
        assert got["status"] == "passed" and got["points"] == got["max_points"], (name, got)
    got = row(batch, "bash_magic")
    assert got["status"] == "error" and "%%bash" in got["feedback"] and got["points"] == "0", got


def test_the_check_cell_says_the_grader_gives_0_for_a_refused_import_and_names_a_forbidden_function(shell):
    """Walkthrough W21: a refused import read "this exercise asks you to implement it yourself", the wording for a
    forbidden function. Each now has its own sentence."""
    from utils.exercises import get
    from utils.exercises.check_cell import _static_verdict

    exercise = get("ch2.causal_mask")
    imported = _defined(shell, "import json\n" + ADD_ONE)
    verdict = _static_verdict(exercise, imported)
    assert verdict is not None and "import json" in verdict.message, verdict
    assert "the grader gives this exercise 0 for it: remove it" in verdict.message, verdict
    shell.run_cell("def add_one(x):\n    return torch.nn.functional.scaled_dot_product_attention(x, x, x)\n")
    sdpa = get("ch2.scaled_dot_product_attention")
    verdict = _static_verdict(sdpa, shell.user_ns["add_one"])
    assert verdict is not None and "this exercise asks you to implement it yourself" in verdict.message, verdict
