"""Gradescope runs the student's code as a stranger, whatever capabilities the container has.

The runner (``run_autograder``, Gradescope runs it as root) is the trusted parent: it makes the seed
(``source/gradescope.json``) and ``submission_metadata.json`` (earlier submissions' results) root's alone
and the results folder root's, has the grader's sandbox run the student's code as an unprivileged uid, and
writes ``results.json`` itself once the student's processes are gone. Where the sandbox cannot switch
uids it refuses to grade, unless ``--allow-weak-isolation`` accepts it; the level reached is in every
``results.json``, in a test only instructors see.

The red team's attack is run as they ran it: ``run_autograder`` under ``capsh --drop=cap_sys_admin`` (a
default Docker container: no namespaces), with a cell that reads the seed and the metadata and prints what it
got (its write of ``results.json`` is refused by the static check now: :data:`ATTACK`). The venv the bundle's own
``setup.sh`` builds inside the autograder root is used (the system's Python, as on Gradescope's Ubuntu image;
the packages come from this checkout's venv, offline).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grader_fixtures as gf
import pytest
import test_gradescope as tg
from test_gradescope import TOY, instructor_notes, lay_out, scored

from utils.builder.gradescope_bundle import write_gradescope_bundle
from utils.grade import main as grade_main
from utils.grading import gradescope, sandbox
from utils.grading.gradescope import (
    SANDBOX_UIDS,
    lock_down,
    run_gradescope,
    write_results,
)

ISOLATION = "grader isolation (instructors only)"
AS_ROOT = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv, as Gradescope's runner has"
)
SYSTEM_PYTHON = Path("/usr/bin/python3")
DEPENDENCIES = Path(next(p for p in sys.path if p.endswith("site-packages")))


def _system_python_fits() -> bool:
    """Whether the system's Python can build a venv that loads this checkout's packages (same version)."""
    if not SYSTEM_PYTHON.exists():
        return False
    probe = subprocess.run(
        [str(SYSTEM_PYTHON), "-c", "import sys, ensurepip, venv; print(sys.version_info[:2])"],
        capture_output=True,
        text=True,
    )
    return probe.returncode == 0 and probe.stdout.strip() == str(tuple(sys.version_info[:2]))


WITH_SETUP_VENV = pytest.mark.skipif(
    not _system_python_fits(),
    reason=(f"needs {SYSTEM_PYTHON} with venv, of this Python's version, to build the venv setup.sh builds"),
)
WITH_CAPSH = pytest.mark.skipif(not shutil.which("capsh"), reason="needs capsh to drop capabilities")

ATTACK = """ROOT = {root!r}
GOT = []
for path in (ROOT + "/source/gradescope.json", ROOT + "/submission_metadata.json"):
    try:
        with open(path, encoding="utf-8") as handle:
            GOT.append(handle.read())
    except OSError:
        pass
print("PWNED", GOT)


def add_one(x):
    return x + 1 + len(GOT)  # right only when the cell could read nothing it should not
"""
"""The red team's cell, less its write: it also wrote ``results.json`` with 999 points, which the static check now
refuses before anything runs (``open(..., 'w')``, tests/test_grader_no_writes.py); the parent writing
``results.json`` last is tested in-process (test_results_json_is_written_over_a_planted_link)."""
METADATA = {"users": [{"id": 4217}], "previous_submissions": [{"results": {"score": 1, "output": "EARLIER"}}]}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return tg.make_bundle(tmp_path_factory)


@pytest.fixture
def autograder_root():
    with tg.temporary_root() as root:
        yield root


def lay_out_attack(root: Path, bundle_zip: Path) -> Path:
    cell = ATTACK.format(root=str(root))
    root = lay_out(root, bundle_zip, {"01_toy.ipynb": gf.toy_submission({"ch1.add_one": cell})})
    (root / "submission_metadata.json").write_text(json.dumps(METADATA), encoding="utf-8")
    for path in (root / "submission_metadata.json", root / "source" / "gradescope.json"):
        os.chmod(path, 0o644)  # as a zip and Gradescope leave them: the runner must lock them down itself
    return root


def _reachable_by_any_user(path: Path) -> bool:
    """Whether every folder on the way to ``path`` lets any user pass (``o+x``), as the sandbox uid must."""
    return all(os.stat(folder).st_mode & 0o001 for folder in [*path.parents, path])


@contextlib.contextmanager
def _dependencies_for_any_user(root: Path) -> Iterator[Path]:
    """This checkout's site-packages where the sandbox uid can reach it. A fresh clone in a private temporary
    folder (CI's ``mkdtemp``, mode 0700) hides it from every other user, so it is bound, read-only, into
    ``root`` (which is world-traversable) for the module's runs, and unbound before ``root`` is removed."""
    if _reachable_by_any_user(DEPENDENCIES):
        yield DEPENDENCIES
        return
    target = root / "dependencies"
    target.mkdir()
    subprocess.run(["mount", "--bind", str(DEPENDENCIES), str(target)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(target)], check=True)
        yield target
    finally:
        subprocess.run(["umount", "-l", str(target)], check=False)


def run_setup_sh(root: Path, dependencies: Path = DEPENDENCIES) -> Path:
    """Run the bundle's ``setup.sh`` in ``root`` as Gradescope does (the system's ``python3``), offline: pip
    finds every pin already installed in this checkout's venv. Then the venv gets that folder through a
    ``.pth`` file, standing for the packages pip would have downloaded into its ``site-packages``."""
    env = {
        "PATH": f"{SYSTEM_PYTHON.parent}:/usr/bin:/bin",
        "HOME": str(root),
        "AUTOGRADER_ROOT": str(root),
        "PIP_NO_INDEX": "1",
        "PIP_NO_BUILD_ISOLATION": "0",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PYTHONPATH": str(dependencies),
        "LANG": "C.UTF-8",
    }
    done = subprocess.run(
        ["bash", str(root / "source" / "setup.sh")], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    python = root / "venv" / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(site, "course-dependencies.pth").write_text(f"{dependencies}\n", encoding="utf-8")
    return python


@pytest.fixture(scope="module")
def setup_venv(bundle):
    """A venv built by the bundle's setup.sh, for the runs that point AUTOGRADER_PYTHON at it."""
    if not _system_python_fits():
        pytest.skip("no system Python to build setup.sh's venv with")
    with tg.temporary_root("autograder-venv-") as root, _dependencies_for_any_user(root) as dependencies:
        with zipfile.ZipFile(bundle) as archive:
            archive.extractall(root / "source")
        yield run_setup_sh(root, dependencies)


def run_dropped(root: Path, drop: str, python: Path, *args: str, refused: bool = False) -> Any:
    """``run_autograder`` under ``capsh --drop=DROP`` (capabilities gone from the bounding set, as in a
    container started without them), with ``python`` as the runner's interpreter: ``results.json``, or with
    ``refused`` the finished process (a refused run writes no ``results.json``)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env |= {
        "AUTOGRADER_ROOT": str(root),
        "AUTOGRADER_PYTHON": str(python),
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": str(gf.REPO / "tests"),
    }
    result = subprocess.run(
        ["capsh", f"--drop={drop}", "--", "-c", 'exec "$0" "$@"', str(root / "source" / "run_autograder"), *args, *TOY],
        env=env,
        cwd="/",
        capture_output=True,
        text=True,
        timeout=600,
    )
    if refused:
        return result
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))


def assert_honest(data: dict) -> None:
    """Nothing the cell planted or read is in ``results.json``: it is the parent's."""
    text = json.dumps(data)
    assert data["score"] != 999
    for planted in ("PWNED", "EARLIER", '"seed"', "previous_submissions"):
        assert planted not in text, (planted, text[:3000])


# --------------------------------------------------------------------------------------------------
# Before and after the student's code
# --------------------------------------------------------------------------------------------------


@AS_ROOT
def test_the_secrets_and_the_results_folder_become_roots_alone(bundle, autograder_root):
    root = lay_out_attack(autograder_root, bundle)
    assert lock_down(root) == METADATA
    uid = str(SANDBOX_UIDS.start + 999)
    stranger = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    for name in ("submission_metadata.json", "source/gradescope.json"):
        info = (root / name).stat()
        assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (0, 0o600), name
        assert subprocess.run([*stranger, "cat", str(root / name)], capture_output=True).returncode != 0, name
    info = (root / "source").stat()  # the seed and the course's reference code: the worker runs from its kit
    assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (0, 0o700)
    reference = root / "source" / "course" / "utils" / "attention.py"
    assert reference.is_file() and subprocess.run([*stranger, "cat", str(reference)], capture_output=True).returncode
    info = (root / "results").stat()
    assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (0, 0o755)
    planted = subprocess.run([*stranger, "touch", str(root / "results" / "results.json")], capture_output=True)
    assert planted.returncode != 0 and not (root / "results" / "results.json").exists()


def test_results_json_is_written_over_a_planted_link(tmp_path):
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text("untouched", encoding="utf-8")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "results.json").symlink_to(elsewhere)
    written = write_results(tmp_path / "results", {"score": 1.0})
    assert not written.is_symlink() and json.loads(written.read_text(encoding="utf-8")) == {"score": 1.0}
    assert elsewhere.read_text(encoding="utf-8") == "untouched"
    assert [p.name for p in (tmp_path / "results").iterdir()] == ["results.json"]


ORPHAN = """
import os, subprocess, sys, time
from utils.grading.gradescope import become_subreaper, end_student_processes, student_processes
assert become_subreaper()
uid = sys.argv[1]
subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "sh", "-c",
                "setsid sleep 300 > /dev/null 2>&1 < /dev/null &"], check=True)
for _ in range(500):  # the shell is gone; its orphan is re-parented to this subreaper
    left = student_processes()
    if left:
        break
    time.sleep(0.01)
print(len(left), end_student_processes(), len(student_processes()))
"""


@AS_ROOT
def test_a_student_process_that_left_its_parent_is_killed_before_results_json():
    done = subprocess.run(
        [sys.executable, "-c", ORPHAN, str(SANDBOX_UIDS.start + 998)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=gf.REPO,
    )
    assert done.returncode == 0, done.stderr
    found, killed, left = map(int, done.stdout.split())
    assert (found, left) == (1, 0) and killed >= 1


# --------------------------------------------------------------------------------------------------
# Refusing a weak sandbox, unless allowed
# --------------------------------------------------------------------------------------------------


def test_grading_is_refused_where_the_sandbox_cannot_switch_uid(bundle, autograder_root, monkeypatch, capsys):
    root = lay_out_attack(autograder_root, bundle)
    monkeypatch.setattr(sandbox, "isolation", lambda *a, **k: sandbox.Isolation("session", (), ""))
    graded = []
    monkeypatch.setattr(gradescope, "grade", lambda *a, **k: graded.append(1) or {"rows": []})
    assert run_gradescope(root, registry=gf.TOY_REGISTRY) is None and graded == []
    assert not (root / "results" / "results.json").exists()  # an autograder error on Gradescope, not a 0
    said = capsys.readouterr().out
    assert "refused to grade" in said and "--allow-weak-isolation" in said and "session" in said

    allowed = run_gradescope(root, registry=gf.TOY_REGISTRY, allow_weak_isolation=True)
    assert graded == [1]
    assert "WEAK" in instructor_notes(allowed)[ISOLATION]["output"]


def test_allow_weak_isolation_passes_from_the_bundle_and_the_command_line(tmp_path, monkeypatch):
    with zipfile.ZipFile(write_gradescope_bundle(tmp_path / "a.zip", seed=3, allow_weak_isolation=True)) as archive:
        assert json.loads(archive.read("gradescope.json"))["allow_weak_isolation"] is True
    assert grade_main(["gradescope-bundle", str(tmp_path / "b.zip"), "--allow-weak-isolation"]) == 0
    with zipfile.ZipFile(tmp_path / "b.zip") as archive:
        assert json.loads(archive.read("gradescope.json"))["allow_weak_isolation"] is True
    seen = []
    monkeypatch.setattr(gradescope, "run_gradescope", lambda root, **kw: seen.append(kw["allow_weak_isolation"]))
    monkeypatch.setattr(gradescope, "become_subreaper", lambda: True)
    gradescope.main(["--root", str(tmp_path), "--allow-weak-isolation"])
    gradescope.main(["--root", str(tmp_path)])
    assert seen == [True, None]  # None: the bundle's setting


# --------------------------------------------------------------------------------------------------
# The red team's attack, with the capability dropped
# --------------------------------------------------------------------------------------------------


@pytest.mark.sandbox
@AS_ROOT
@WITH_CAPSH
@WITH_SETUP_VENV
def test_without_cap_sys_admin_the_students_code_runs_as_a_stranger(bundle, autograder_root, setup_venv):
    root = lay_out_attack(autograder_root, bundle)
    data = run_dropped(root, "cap_sys_admin", setup_venv)
    note = instructor_notes(data)[ISOLATION]
    assert note["status"] == "passed" and "unprivileged uid" in note["output"], note
    assert "read the course's reference code" not in note["output"], note  # source/ is root's alone
    assert {t["name"]: t["score"] for t in scored(data)}["ch1.add_one"] == 2  # it read nothing
    assert data["score"] == 6
    assert_honest(data)


@pytest.mark.sandbox
@AS_ROOT
@WITH_CAPSH
@WITH_SETUP_VENV
def test_where_no_uid_switch_is_possible_grading_is_refused_and_nothing_runs(bundle, autograder_root, setup_venv):
    root = lay_out_attack(autograder_root, bundle)
    done = run_dropped(root, "cap_sys_admin,cap_setuid,cap_setgid", setup_venv, refused=True)
    assert done.returncode == 1 and not (root / "results" / "results.json").exists()
    assert "refused to grade" in done.stdout and "--allow-weak-isolation" in done.stdout
    assert "PWNED" not in done.stdout + done.stderr  # the cell never ran


@pytest.mark.sandbox
@AS_ROOT
@WITH_CAPSH
@WITH_SETUP_VENV
def test_weak_isolation_when_allowed_is_named_and_only_the_parent_writes_results(bundle, autograder_root, setup_venv):
    """The attack works once the instructor accepts weak isolation (the cell reads the seed): the points show it,
    and nothing it read reaches results.json."""
    root = lay_out_attack(autograder_root, bundle)
    data = run_dropped(root, "cap_sys_admin,cap_setuid,cap_setgid", setup_venv, "--allow-weak-isolation")
    assert "WEAK" in instructor_notes(data)[ISOLATION]["output"]
    assert {t["name"]: t["score"] for t in scored(data)}["ch1.add_one"] == 0
    assert data["score"] == 4
    assert_honest(data)


# --------------------------------------------------------------------------------------------------
# The venv setup.sh builds inside the autograder root
# --------------------------------------------------------------------------------------------------


@pytest.mark.sandbox
@AS_ROOT
@WITH_SETUP_VENV
def test_with_the_venv_setup_sh_builds_the_sandbox_keeps_every_extra(bundle, autograder_root):
    here = sandbox.isolation()
    if set(here.extras) != set(sandbox.EXTRAS):
        pytest.skip(f"this machine's sandbox lacks some extras itself: {here.describe()}")
    root = lay_out(autograder_root, bundle, {"01_toy.ipynb": gf.toy_submission()})
    run_setup_sh(root)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AUTOGRADER_PYTHON")}
    env |= {"AUTOGRADER_ROOT": str(root), "OMP_NUM_THREADS": "1", "PYTHONPATH": str(gf.REPO / "tests")}
    done = subprocess.run(
        [str(root / "source" / "run_autograder"), *TOY], env=env, cwd="/", capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    note = instructor_notes(data)[ISOLATION]["output"]
    assert "not active on this machine" not in note and "read the course's reference code" not in note, note
    assert data["score"] == 6
