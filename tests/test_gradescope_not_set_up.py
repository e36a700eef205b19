"""``run_autograder`` before ``setup.sh`` (issue 35, W17): the bundle's script failed with bash's bare
``.../venv/bin/python: No such file or directory``. It now says in one line that the autograder's
environment is missing, names the interpreter it looked for and how to make it, and exits non-zero.
``setup.sh`` is never run here (it installs torch).
"""

from __future__ import annotations

import os
import subprocess
import zipfile
from pathlib import Path

from utils.builder.gradescope_bundle import write_gradescope_bundle


def unpacked_run_autograder(tmp_path: Path) -> Path:
    """A bundle built in ``tmp_path`` and its ``run_autograder`` laid out as Gradescope lays it out."""
    bundle = write_gradescope_bundle(tmp_path / "bundle.zip", seed=3, chapters="2")
    root = tmp_path / "autograder"
    for folder in ("source", "submission", "results"):
        (root / folder).mkdir(parents=True)
    with zipfile.ZipFile(bundle) as archive:
        archive.extract("run_autograder", root / "source")
    script = root / "source" / "run_autograder"
    os.chmod(script, 0o755)  # zipfile does not restore modes; Gradescope does
    return script


def run(script: Path, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AUTOGRADER_")}
    return subprocess.run([str(script)], env=clean | env, cwd="/", capture_output=True, text=True, timeout=60)


def test_run_autograder_before_setup_says_so_in_one_line_and_fails(tmp_path):
    script = unpacked_run_autograder(tmp_path)
    root = script.parent.parent
    result = run(script, AUTOGRADER_ROOT=str(root))
    assert result.returncode != 0, result
    venv_python = f"{root}/venv/bin/python"
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and not result.stdout, result
    assert "the autograder's environment is missing: run setup.sh first" in lines[0], lines
    assert venv_python in lines[0], lines
    assert "No such file or directory" not in result.stderr
    assert not any((root / "results").iterdir())  # no results.json pretends to be a grade


def test_a_missing_autograder_python_is_named_as_that_variable(tmp_path):
    script = unpacked_run_autograder(tmp_path)
    missing = tmp_path / "nowhere" / "python"
    result = run(script, AUTOGRADER_ROOT=str(script.parent.parent), AUTOGRADER_PYTHON=str(missing))
    assert result.returncode != 0 and not result.stdout, result
    [line] = result.stderr.splitlines()
    assert f"AUTOGRADER_PYTHON={missing}" in line and "not found" in line, line
