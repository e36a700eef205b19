"""The grader's trust boundary is an import boundary (DESIGN.md, "Trust boundary").

The sandboxed worker runs a learner's cell with only the runner side of :mod:`utils.exercises`
loaded: no exercise definition, reference, mistake or judging code is in its process for learner
code to find. The trusted side (judge, forbidden-name check, registry, engine) never imports the
runner. Each check runs in a fresh interpreter, so nothing imported by other tests can hide a leak.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from utils.exercises.registry import chapter_modules
from utils.grading import serialize

pytestmark = pytest.mark.sandbox  # each check starts a fresh interpreter: make unit, not make quick

REPO = Path(__file__).resolve().parents[1]

# What the worker may load of the course: the runner side, the value format and the package roots.
WORKER_MAY_LOAD = {
    "utils", "utils.device", "utils.notebook_setup", "utils.exercises", "utils.exercises.common",
    "utils.exercises.runner", "utils.grading", "utils.grading.files", "utils.grading.serialize",
    "utils.grading.worker",
}
CHAPTERS = tuple(module.__name__ for module in chapter_modules())  # utils.exercises.qkv, ...


def _loaded_after(code: str, *args: str) -> list[str]:
    """The ``utils`` modules a fresh interpreter has loaded after running ``code``."""
    script = code + (
        "\nimport json, sys\n"
        "print(json.dumps(sorted(m for m in sys.modules if m == 'utils' or m.startswith('utils.'))))\n"
    )
    result = subprocess.run([sys.executable, "-c", script, *args], cwd=REPO, capture_output=True, text=True,
                            timeout=300, check=False, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_worker_runs_a_cell_with_only_the_runner_side_loaded(tmp_path):
    job = {"limits": {"memory": 0, "cpu": 60, "fsize": 2**26, "nproc": 4096}}
    (tmp_path / "job.json").write_text(json.dumps(job), encoding="utf-8")
    serialize.dump([{"x": torch.arange(3.0)}], tmp_path / "in" / "0")
    (tmp_path / "in" / "0" / "cell.json").write_text(json.dumps(
        {"id": "ch1.double", "func_name": "double", "forbidden": ["torch.nn.functional.softmax"],
         "source": "def double(x):\n    return 2 * x\n"}), encoding="utf-8")
    loaded = _loaded_after("import os, sys\nfrom utils.grading.worker import main\nr, w = os.pipe()\n"
                           "os.write(w, b'run 0\\n')\nos.close(w)\nmain([sys.argv[1], '2', str(r)])",
                           str(tmp_path))
    outcomes = serialize.load_outcomes(tmp_path / "out" / "0", ["x"])
    assert len(outcomes) == 1 and torch.equal(outcomes[0].output, torch.tensor([0.0, 2.0, 4.0]))
    assert "utils.exercises.runner" in loaded  # the check below is about the code that really ran
    leaked = sorted(set(loaded) - WORKER_MAY_LOAD)
    assert not leaked, f"the sandboxed worker loaded trusted modules: {leaked}"
    for name in ("judging", "forbidden", "definition", "registry", "check_cell"):
        assert f"utils.exercises.{name}" not in loaded
    assert not set(CHAPTERS) & set(loaded)


def test_the_trusted_side_never_imports_the_runner():
    loaded = _loaded_after(
        "import utils.exercises.judging, utils.exercises.forbidden, utils.grading.engine, utils.grading.cli\n"
        "from utils.exercises import all_exercises, get\n"
        "assert len(all_exercises()) > 0 and get('ch2.causal_mask').func_name == 'causal_mask'\n"
    )
    assert "utils.exercises.judging" in loaded and "utils.exercises.sdpa" in loaded
    assert "utils.exercises.runner" not in loaded
    assert "utils.exercises.check_cell" not in loaded


def test_the_judging_module_alone_does_not_import_the_runner():
    loaded = _loaded_after("import utils.exercises.judging")
    assert "utils.exercises.runner" not in loaded
    assert not set(CHAPTERS) & set(loaded)


def test_the_check_cell_api_still_reaches_both_halves():
    loaded = _loaded_after("from utils.exercises import check\nassert 'project_qkv' in dir(check)")
    assert {"utils.exercises.runner", "utils.exercises.judging", "utils.exercises.check_cell"} <= set(loaded)
