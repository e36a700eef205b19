"""Binder's environment, built the way Binder builds it, runs every student notebook.

Docker and repo2docker cannot run on our machines; this is the substitute. Like repo2docker, the test
takes the repository's files (the tracked and not-ignored ones, i.e. what a clone of this commit
holds), makes a fresh Python environment that holds only the kernel machinery of Binder's base image
(``ipykernel``), then runs in the repository root

    pip install -r binder/requirements.txt
    bash binder/postBuild

and executes every ``chapters/NN_*.ipynb`` with nbclient on a kernel of that environment, from the
notebook's folder as JupyterLab does. The only errors allowed are the ones a fresh student notebook
has by design: a cell tagged ``raises-exception`` and an exercise's check line (``check.f(f)``) while
the exercise is still a stub. A package missing from binder/requirements.txt fails here: postBuild
installs the course with ``--no-deps``.

pip resolves from the machine's local wheels and reuses its cache (Binder itself uses
``--no-cache-dir``, which only matters for the image size). The kernel peak-RSS budget (< 1 GiB,
Binder's limit) is measured per solution notebook during ``make nbval-solutions`` (tests/nbval_budgets.py).

Set ``COURSE_BINDER_VENV=/some/dir`` to keep and reuse the built environment while iterating
(it is rebuilt when binder/, constraints.txt or pyproject.toml change).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from env_support import (
    CHAPTERS,
    REPO,
    copy_repository,
    displayed_widgets,
    run,
    setup_cell_errors,
    unexpected_errors,
    venv_env,
    write_kernelspec,
)

from utils.notebook_run import deterministic_env, execute_notebook

BINDER_FILES = ("binder/requirements.txt", "binder/postBuild", "constraints.txt", "pyproject.toml")
KERNEL = "course-binder"

pytestmark = pytest.mark.slow


def fingerprint(repo: Path) -> str:
    digest = hashlib.sha256()
    for name in BINDER_FILES:
        digest.update(name.encode() + b"\0" + (repo / name).read_bytes())
    return digest.hexdigest()


def build_binder_env(repo: Path, venv: Path) -> dict:
    """Install ``repo``'s binder/ environment into a fresh ``venv``; return how long each step took."""
    timings = {}
    env = venv_env(venv)
    python = venv / "bin" / "python"
    start = time.perf_counter()
    run([sys.executable, "-m", "venv", venv], cwd=repo, env=env, what="python -m venv")
    # Binder's base image: the Jupyter kernel machinery, at the versions we test with.
    run([python, "-m", "pip", "install", "--quiet", "-c", "constraints.txt", "ipykernel"],
        cwd=repo, env=env, what="installing ipykernel (Binder's base image)")
    timings["base_s"] = time.perf_counter() - start
    start = time.perf_counter()
    run([python, "-m", "pip", "install", "--quiet", "-r", "binder/requirements.txt"],
        cwd=repo, env=env, what="pip install -r binder/requirements.txt")
    timings["requirements_s"] = time.perf_counter() - start
    start = time.perf_counter()
    run(["bash", "binder/postBuild"], cwd=repo, env=env, what="binder/postBuild")
    timings["postbuild_s"] = time.perf_counter() - start
    (venv / ".course-binder").write_text(fingerprint(repo))
    return timings


@pytest.fixture(scope="module")
def binder(tmp_path_factory):
    """``(repo copy, venv, JUPYTER_PATH, kernel env)`` with the Binder environment built."""
    root = tmp_path_factory.mktemp("binder")
    repo = copy_repository(root / "repo")
    kept = os.environ.get("COURSE_BINDER_VENV")
    venv = Path(kept).resolve() if kept else root / "venv"
    marker = venv / ".course-binder"
    if kept and marker.is_file() and marker.read_text() == fingerprint(repo):
        run(["bash", "binder/postBuild"], cwd=repo, env=venv_env(venv), what="binder/postBuild")
    else:
        if venv.exists():
            shutil.rmtree(venv)
        timings = build_binder_env(repo, venv)
        print(f"\nbinder env built: {json.dumps({k: round(v, 1) for k, v in timings.items()})}")
    write_kernelspec(root / "jupyter", KERNEL, venv / "bin" / "python", "Binder environment")
    return repo, venv, root / "jupyter", deterministic_env(venv_env(venv))


def test_binder_files_are_there():
    assert (REPO / "binder" / "requirements.txt").is_file()
    assert os.access(REPO / "binder" / "postBuild", os.X_OK), "binder/postBuild must be executable"
    assert CHAPTERS, "no chapters/NN_*.ipynb to run"


def test_environment_has_cpu_torch_and_the_course(binder):
    repo, venv, _, _ = binder
    code = (
        "import json, torch, utils, ipywidgets, matplotlib; "
        "print(json.dumps({'torch': torch.__version__, 'cuda': torch.version.cuda, 'utils': utils.__file__}))"
    )
    result = subprocess.run([venv / "bin" / "python", "-c", code], cwd=venv, env=venv_env(venv),
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["cuda"] is None, f"Binder must get the CPU build of torch, got {found}"
    assert found["torch"].startswith("2.13.0"), found
    assert Path(found["utils"]).is_relative_to(venv), f"postBuild did not install `utils` into the env: {found}"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_student_notebook_runs_in_binder_env(binder, chapter, monkeypatch):
    repo, venv, jupyter_path, kernel_env = binder
    monkeypatch.setenv("JUPYTER_PATH", str(jupyter_path))
    result = execute_notebook(repo / "chapters" / chapter.name, kernel_name=KERNEL, env=kernel_env, allow_errors=True)
    nb, seconds = result.notebook, result.wall_s
    print(f"{chapter.name}: {seconds:.1f} s in the Binder env")
    assert not setup_cell_errors(nb), f"the setup cell failed: {setup_cell_errors(nb)}"
    problems = unexpected_errors(nb)
    assert not problems, f"{chapter.name} in the Binder environment:\n" + "\n".join(problems)
    assert displayed_widgets(nb), f"{chapter.name}: no widget was displayed (explorer, quiz)"
