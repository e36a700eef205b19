"""Setup on a learner's machine: the pins install on every Python we claim, torch's wheel is chosen by
one variable, a half-made .venv is rebuilt, and `make test` names missing tools first."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from env_support import pip_download_failed, run_pip, venv_env
from packaging.markers import Marker
from packaging.requirements import Requirement

from utils import prereqs

REPO = Path(__file__).resolve().parent.parent
NEWEST_MINOR = 14


def lowest_python() -> tuple[int, int]:
    text = (REPO / "pyproject.toml").read_text()
    major, minor = re.search(r'requires-python = ">=(\d+)\.(\d+)"', text).groups()
    return int(major), int(minor)


def pins_for(python: str) -> dict[str, list[str]]:
    """constraints.txt as pip reads it on ``python`` ("3.10"): package -> the versions pinned for it."""
    environment = {"python_version": python, "python_full_version": python + ".0"}
    pins: dict[str, list[str]] = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        requirement = Requirement(line)
        if requirement.marker is None or requirement.marker.evaluate(environment):
            pins.setdefault(requirement.name.lower(), []).append(str(requirement.specifier))
    return pins


def supported_pythons() -> list[str]:
    major, minor = lowest_python()
    return [f"{major}.{m}" for m in range(minor, NEWEST_MINOR + 1)]


@pytest.mark.parametrize("python", supported_pythons())
def test_every_supported_python_gets_one_exact_pin_per_package(python):
    pins = pins_for(python)
    assert {name: specs for name, specs in pins.items() if len(specs) != 1} == {}
    assert all(specs[0].startswith("==") for specs in pins.values())
    assert pins_for(f"3.{NEWEST_MINOR}").keys() <= pins.keys()  # an older Python may add pins, never lose one


def test_version_markers_only_split_by_python_version():
    for line in (REPO / "constraints.txt").read_text().splitlines():
        if ";" in line:
            marker = Marker(line.split(";", 1)[1])
            assert re.fullmatch(r'python_version (<|>=) "3\.\d+"', str(marker)), line


# torch's own requirements, resolved in its place: torch itself is asked of the index without its wheel
# being downloaded (on a machine without a CPU wheel for that Python, that would be 3 GB of CUDA wheels).
TORCH_REQUIREMENTS = ("filelock", "fsspec", "Jinja2", "networkx", "sympy", "typing-extensions")


@pytest.mark.slow
def test_pinned_set_resolves_for_the_lowest_supported_python(tmp_path):
    """What `make setup-dev` installs, resolved by pip for the lowest Python that requires-python names.

    pip evaluates constraint markers on the interpreter it runs on, so the markers are applied here for
    the target version first. pip downloads wheels to read their metadata, hence slow."""
    python = "{}.{}".format(*lowest_python())
    pins = pins_for(python)
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("".join(f"{name}{specs[0]}\n" for name, specs in pins.items()))
    wanted = [line.strip() for name in ("requirements.txt", "requirements-lab.txt", "requirements-dev.txt")
              for line in (REPO / name).read_text().splitlines()
              if line.strip() and not line.startswith(("#", "-r")) and not line.startswith("torch")]
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("\n".join([*wanted, *TORCH_REQUIREMENTS]) + "\n")
    target = ["--python-version", python, "--only-binary=:all:"]
    command = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
               "--disable-pip-version-check", *target, "--target", str(tmp_path / "target"),
               "-c", str(constraints), "-r", str(requirements), "--report", str(tmp_path / "report.json")]
    result = run_pip(command, cwd=REPO, timeout=1800)
    assert result.returncode == 0, result.stderr[-3000:]
    installed = {item["metadata"]["name"].lower(): item["metadata"]["version"]
                 for item in json.loads((tmp_path / "report.json").read_text())["install"]}
    assert installed["numpy"] == pins["numpy"][0].removeprefix("==")
    assert installed["networkx"] == pins["networkx"][0].removeprefix("==")  # torch's requirement, 3.10 pin
    listing = run_pip([sys.executable, "-m", "pip", "index", "versions", "torch", *target,
                       "--disable-pip-version-check"], timeout=600)
    torch_pin = pins["torch"][0].removeprefix("==")
    assert torch_pin in listing.stdout, listing.stdout[-2000:] + listing.stderr[-2000:]


# What CI's pip printed on 2026-12-02 when a playwright wheel arrived corrupt (fetched again, its hash matches
# PyPI's), and what it prints when the pins cannot be resolved.
CORRUPT_DOWNLOAD = """ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE. If you have updated the
package versions, please update the hashes. Otherwise, examine the package contents carefully.
    playwright from https://files.pythonhosted.org/packages/de/c3/playwright-1.65.2-py3-none-manylinux1_x86_64.whl:
        Expected sha256 58932d35f56767ab7ebcdd3d4a733bfb3e62a1a5bc43c08e28b9fa9b3e61cf33
             Got        1e23d4c1e3d6761d8b845d1d0260f519304c22c6643de2193ad6e172e2f93d79
"""
UNRESOLVABLE = """ERROR: Cannot install numpy==2.3.0 because these package versions have conflicting dependencies.
ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/en/latest/topics/dependency-resolution/
"""
# A stand-in for pip: it appends its argv to a log, then fails with the stderr given for each call in turn.
FAKE_PIP = """import json, sys
log, plan = sys.argv[1], json.loads(sys.argv[2])
with open(log, "a") as f:
    f.write(json.dumps(sys.argv[3:]) + "\\n")
calls = sum(1 for _ in open(log))
stderr = plan[min(calls, len(plan)) - 1]
sys.stderr.write(stderr)
sys.exit(1 if stderr else 0)
"""


def test_a_download_corrupted_in_transit_is_told_apart_from_unresolvable_pins():
    assert pip_download_failed(CORRUPT_DOWNLOAD)
    assert pip_download_failed("pip._vendor.urllib3.exceptions.ProtocolError: ('Connection broken: IncompleteRead")
    assert not pip_download_failed(UNRESOLVABLE)
    assert not pip_download_failed("ERROR: No matching distribution found for torch==2.13.0")


@pytest.mark.parametrize("plan, calls, ok", [
    ([CORRUPT_DOWNLOAD, ""], 2, True),                           # corrupt once: fetched again, without the cache
    ([UNRESOLVABLE, ""], 1, False),                              # the pins are wrong: no second try
    ([CORRUPT_DOWNLOAD] * 4, 3, False),                          # corrupt every time: fails after three
])
def test_run_pip_fetches_again_only_after_a_download_failed(tmp_path, plan, calls, ok):
    log = tmp_path / "argv.log"
    result = run_pip([sys.executable, "-c", FAKE_PIP, log, json.dumps(plan), "pip", "install", "x"])
    argvs = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(argvs) == calls and (result.returncode == 0) is ok
    assert argvs[0] == ["pip", "install", "x"]
    assert all(argv == ["pip", "--no-cache-dir", "install", "x"] for argv in argvs[1:])
    if not ok:
        assert result.stderr == plan[calls - 1]  # the caller sees the last failure's own message


def test_a_test_venvs_pip_installs_without_byte_compiling(tmp_path):
    """venv_env's pip leaves the compiling to the first import (half the CPU time of a test venv's install)."""
    target = tmp_path / "site"
    result = run_pip([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", target, "idna"],
                     env=venv_env(tmp_path / "venv", {**os.environ, "PIP_COMPILE": "1"}))
    assert result.returncode == 0, result.stderr
    assert (target / "idna" / "core.py").is_file()
    assert not list(target.rglob("*.pyc"))


# --- torch's wheel: one variable -------------------------------------------------------------------
def test_torch_index_setting(monkeypatch):
    assert prereqs.torch_index_args("") == []
    url = "https://download.pytorch.org/whl/cu126"
    assert prereqs.torch_index_args(url) == ["--extra-index-url", url]
    asked = []
    monkeypatch.setattr(prereqs, "index_offers", lambda name, version, python: asked.append(version) or False)
    assert prereqs.torch_index_args("auto") == ["--extra-index-url", prereqs.CPU_INDEX]
    assert asked == [prereqs.pinned_version("torch") + "+cpu"]
    monkeypatch.setattr(prereqs, "index_offers", lambda name, version, python: True)
    assert prereqs.torch_index_args("auto") == []


def test_pinned_version_reads_the_unmarked_pin(tmp_path):
    constraints = tmp_path / "c.txt"
    constraints.write_text('numpy==2.4.6; python_version >= "3.11"\ntorch==2.13.0\n')
    assert prereqs.pinned_version("torch", constraints) == "2.13.0"
    with pytest.raises(ValueError, match="numpy"):
        prereqs.pinned_version("numpy", constraints)


def make(*args: str, **env: str) -> subprocess.CompletedProcess:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    return subprocess.run(["make", "--no-print-directory", *args], cwd=REPO, capture_output=True, text=True,
                          env=dict(os.environ, **env), timeout=600)


def test_make_passes_torch_index_and_port(tmp_path):
    dry = make("-n", "setup", "lab", f"VENV={tmp_path / 'v'}", "TORCH_INDEX=https://example.invalid/whl",
               "PORT=9123")
    assert dry.returncode == 0, dry.stderr
    assert 'utils/prereqs.py torch-index "https://example.invalid/whl"' in dry.stdout
    assert "-m utils.lab --port 9123" in dry.stdout


# --- the half-made .venv ---------------------------------------------------------------------------
def test_half_made_venv_is_named(tmp_path):
    assert prereqs.half_made_venv(tmp_path / "absent") is None
    (tmp_path / "nopython").mkdir()
    assert "no bin/python" in prereqs.half_made_venv(tmp_path / "nopython")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", tmp_path / "nopip"], check=True)
    assert "no pip" in prereqs.half_made_venv(tmp_path / "nopip")
    assert prereqs.half_made_venv(Path(sys.prefix)) is None


@pytest.mark.slow
def test_make_rebuilds_a_venv_left_without_pip(tmp_path):
    venv = tmp_path / "venv"
    # What Debian's python3 without python3-venv leaves behind: bin/python, but ensurepip never ran.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    result = make("venv", f"VENV={venv}", f"PYTHON={sys.executable}")
    assert result.returncode == 0, result.stderr
    assert f"{venv} has no pip" in result.stderr and "python3-venv" in result.stderr
    assert subprocess.run([venv / "bin" / "python", "-m", "pip", "--version"]).returncode == 0
    (venv / "keep").touch()
    again = make("venv", f"VENV={venv}", f"PYTHON={sys.executable}")  # a healthy venv is left alone
    assert again.returncode == 0 and again.stderr == "" and (venv / "keep").exists()


# --- make test's tools ------------------------------------------------------------------------------
def test_missing_tools_are_named_with_how_to_get_them(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_CHROMIUM", str(tmp_path / "no-chromium"))
    missing = prereqs.missing_for_test(which=lambda name: None)
    assert len(missing) == 2
    assert "npm" in missing[0] and "apt-get install npm" in missing[0]
    assert str(tmp_path / "no-chromium") in missing[1] and "COURSE_CHROMIUM" in missing[1]
    chromium = tmp_path / "chromium"
    chromium.write_text("#!/bin/sh\n")
    chromium.chmod(0o755)
    monkeypatch.setenv("COURSE_CHROMIUM", str(chromium))
    assert prereqs.missing_for_test(which=lambda name: "/usr/bin/" + name) == []


def test_make_test_stops_first_with_one_line(tmp_path):
    result = make("test-prereqs", f"PYTHON={sys.executable}", COURSE_CHROMIUM=str(tmp_path / "none"))
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.startswith("make test needs")]
    assert len(lines) == 1 and "COURSE_CHROMIUM" in lines[0]



def test_make_s_test_targets_let_python_write_bytecode_whatever_the_environment_says():
    """With PIP_COMPILE=0 nothing installed is compiled, so the first process that imports a module must
    write its bytecode: each test target empties PYTHONDONTWRITEBYTECODE (CI's environment sets it), and
    make's own database says so for each of them."""
    targets = re.search(r"^([\w -]+): export PYTHONDONTWRITEBYTECODE =$", (REPO / "Makefile").read_text(), re.M)
    wanted = {"test", "quick", "unit", "doctest", "nbval-solutions", "nbval-chapters", "binder-test", "browser"}
    assert targets and wanted <= set(targets.group(1).split())
    shown = subprocess.run(["make", "-pn", "help", "PYTHON=true"], cwd=REPO, capture_output=True, text=True,
                           timeout=60, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}).stdout
    assert {t for t in wanted if re.search(rf"^{re.escape(t)}: PYTHONDONTWRITEBYTECODE = $", shown, re.M)} == wanted
