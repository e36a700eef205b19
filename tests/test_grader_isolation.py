"""What the sandbox shares with the machine (issue 15, findings 8-11), attacked next to an honest student.

Each attacker's ``add_one`` returns the right answer only when its attack failed (``x + 1``) and a wrong
one when it succeeded (``x + 2``), so ``passed`` means "defended" and ``failed`` means "leaked". Where a
protection is not active on this machine (the probe says so on stderr), its test is skipped visibly.

The submissions and the planted files live in folders every uid can read (under the repository's
git-ignored ``build/``, and in ``/tmp`` and ``/var/tmp`` with mode 0644), so the file permissions alone
would not stop the reader: only the private file system does. So do the unix sockets (in ``/run`` and in
the course checkout, mode 0777) and the course's own reference code: the static check is switched off
for this batch (the sandbox alone must hold).
"""

from __future__ import annotations

import csv
import os
import shutil
import socket
import subprocess
import tempfile
import threading
from pathlib import Path

import grader_fixtures as gf
import pytest

from utils.grading import batch, engine, files, kit, sandbox

pytestmark = pytest.mark.sandbox  # grades batches in sandboxed workers: make unit, not make quick

TOKEN = f"grader-iso-{os.getpid()}"


def _shm_segments() -> set[str]:
    with open("/proc/sysvipc/shm", encoding="ascii") as table:
        return {line.split()[1] for line in table.read().splitlines()[1:] if line.split()}


def _sandbox_processes() -> list[int]:
    """Processes still carrying this test process's sandbox marker (none may outlive the batch)."""
    marker = f"GRADER_SANDBOX={os.getpid()}-".encode()
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/environ", "rb") as env:
                if any(item.startswith(marker) for item in env.read().split(b"\0")):
                    found.append(int(entry))
        except (OSError, ValueError):
            continue
    return found


def _readable_dir(parent: str, prefix: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    os.chmod(folder, 0o755)
    return folder


def _plant(folder: Path, name: str) -> Path:
    path = folder / name
    path.write_text('{"cells": [], "secret": "a classmate\'s answers"}', encoding="utf-8")
    os.chmod(path, 0o644)
    return path


def _unix_listener(folder: Path, name: str, accepted: list, stop: threading.Event) -> Path:
    """A unix socket at ``folder/<token>-<name>.sock`` that any user may connect to, accepting until ``stop``."""
    path = folder / f"{TOKEN}-{name}.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    os.chmod(path, 0o777)
    server.listen(8)
    server.settimeout(0.2)

    def serve() -> None:
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue
        server.close()

    threading.Thread(target=serve, daemon=True).start()
    return path


# Looks for the course's reference code and solutions wherever Python or the file system shows them, then
# tries to import a fresh copy by name and by path (the red team's bypass): runs once per run, at the top.
SEEKER = """
import importlib, os, pkgutil, sys
found = []
for entry in [*sys.path, REPO]:
    folder = entry
    while folder not in ("", "/"):
        for name in ("utils/attention.py", "attention.py", "solutions"):
            if os.path.exists(os.path.join(folder, name)):
                found.append(os.path.join(folder, name))
        folder = os.path.dirname(folder)
for folder, dirs, names in os.walk("/"):
    if folder in ("/proc", "/sys", "/dev", "/usr", "/etc") or os.path.basename(folder) in ("site-packages",
                                                                                          "dist-packages"):
        found += [os.path.join(folder, d) for d in dirs if d == "utils"]
        dirs[:] = []
        continue
    found += [os.path.join(folder, n) for n in names if n.endswith(".ipynb") or
              (n == "attention.py" and folder.endswith("utils"))]
for attempt in ("utils.attention", "attention", "utils.exercises.sdpa"):
    sys.path[:0] = [REPO, os.path.join(REPO, "utils")]
    try:
        importlib.import_module(attempt)
        found.append(attempt)
    except Exception:
        pass
try:
    pkgutil.resolve_name("utils.attention:scaled_dot_product_attention")
    found.append("resolve_name")
except Exception:
    pass
FOUND = found
def add_one(x):
    return x + 1 if not FOUND else x + 2
"""


def _cell(body: str) -> dict[str, str]:
    indented = "\n".join("    " + line for line in body.strip().splitlines())
    return {"ch1.add_one": f"import os, socket, subprocess\ndef add_one(x):\n{indented}\n"}


@pytest.fixture(scope="module")
def isolated(tmp_path_factory):
    (gf.REPO / "build").mkdir(exist_ok=True)
    top = _readable_dir(str(gf.REPO / "build"), "grader-isolation-")
    subs, out = top / "subs", top / "out"
    subs.mkdir(mode=0o755)
    planted = [_plant(_readable_dir("/tmp", f"{TOKEN}-"), "peer.ipynb"),
               _plant(_readable_dir("/var/tmp", f"{TOKEN}-"), "peer.ipynb")]
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    accepted: list[object] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    sockets = [_unix_listener(Path("/run") if os.access("/run", os.W_OK) else top, "run", accepted, stop),
               _unix_listener(top, "course", accepted, stop)]
    victim_notebook = subs / "honest" / "chapter.ipynb"
    students = {
        "honest": gf.toy_submission(),
        # Walks every folder it can see except installed software (the Python and venv the sandbox
        # restores, with 60,000 files under /root/.pyenv here, took longer than the timeout to walk on a
        # busy machine, and no classmate's file can be there).
        "reader": gf.toy_submission(_cell(f"""
found = []
for path in {[str(p) for p in planted] + [str(victim_notebook)]!r}:
    try:
        with open(path, encoding="utf-8") as handle:
            found.append(handle.read(1))
    except OSError:
        pass
import sys
installed = {{os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, {str(gf.REPO / 'node_modules')!r},
                                            {str(gf.REPO / '.git')!r})}}
for top in ("/tmp", "/var/tmp", "/home", "/root", {str(subs)!r}):
    for folder, dirs, names in os.walk(top):  # the planted files' folders and the submissions
        if {TOKEN!r} in folder or folder.startswith({str(subs)!r}):
            found += [name for name in names if name.endswith(".ipynb")]
        dirs[:] = [d for d in dirs if os.path.realpath(os.path.join(folder, d)) not in installed]
return x + 1 if not found else x + 2
""")),
        "leaker": gf.toy_submission(_cell(f"""
with open("/dev/shm/{TOKEN}-leak", "wb") as handle:
    handle.write(b"x" * 2**20)
import ctypes  # shmget(IPC_PRIVATE, 64 KiB, IPC_CREAT | 0600), as ipcmk does (no program may start here)
made = ctypes.CDLL(None).shmget(0, 65536, 0o1000 | 0o600)
return x + 1 if made >= 0 and os.path.exists("/dev/shm/{TOKEN}-leak") else x + 2
""")),
        "filler": gf.toy_submission(_cell(f"""
import errno
written = 0
try:
    for i in range(12):
        with open(f"/dev/shm/{TOKEN}-fill-{{i}}", "wb") as handle:
            handle.write(b"x" * 16 * 2**20)
        written += 1
except OSError as exc:
    return x + 1 if exc.errno == errno.ENOSPC and written <= 4 else x + 2
return x + 2
""")),
        "caller": gf.toy_submission(_cell(f"""
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
except OSError:
    return x + 1
return x + 2
""")),
        "socketeer": gf.toy_submission(_cell(f"""
reached = []
for path in {[str(path) for path in sockets]!r}:
    client = socket.socket(socket.AF_UNIX)
    client.settimeout(2)
    try:
        client.connect(path)
        reached.append(path)
    except OSError:
        pass
    finally:
        client.close()
return x + 1 if not reached else x + 2
""")),
        "seeker": gf.toy_submission({"ch1.add_one": SEEKER.replace("REPO", repr(str(gf.REPO)))}),
    }
    for name, nb in students.items():
        gf.student(subs, name, {"chapter.ipynb": nb})
    for path in subs.rglob("*"):
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    segments_before = _shm_segments()
    parent = Path(tempfile.mkdtemp(prefix="grader-isolation-work-"))
    os.chmod(parent, 0o711)
    saved = engine.TMP_PARENT
    engine.TMP_PARENT = str(parent)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(engine, "unsafe_in_source", lambda source: None)  # the sandbox alone must hold
            summary = batch.grade(subs, out, jobs=2, timeout=8, seed=3,
                                  course_root=gf.make_toy_course(top / "course"), registry=gf.TOY_REGISTRY,
                                  memory_mb=512, progress=False)
    finally:
        engine.TMP_PARENT = saved
        stop.set()
        server.join(timeout=5)
        listener.close()
        for path in sockets:
            path.unlink(missing_ok=True)
    with open(out / "results.csv", newline="", encoding="utf-8") as handle:
        rows = {(r["student"], r["exercise"]): r for r in csv.DictReader(handle)}
    yield {"rows": rows, "summary": summary, "accepted": accepted, "segments_before": segments_before,
           "segments_after": _shm_segments(), "work": parent, "out": out, "survivors": _sandbox_processes()}
    for folder in planted:
        shutil.rmtree(folder.parent, ignore_errors=True)
    for leftover in Path("/dev/shm").glob(f"{TOKEN}-*"):
        leftover.unlink()
    for segment in _shm_segments() - segments_before:  # only where the test failed: leave nothing behind
        subprocess.run(["ipcrm", "-m", segment], check=False)
    files.remove_tree(parent)
    shutil.rmtree(top, ignore_errors=True)


def needs(extra: str) -> None:
    iso = sandbox.isolation(check=False)
    if extra not in iso.extras:
        pytest.skip(f"{extra} is not active on this machine: {iso.describe()}")


def status(batch, student: str) -> str:
    return batch["rows"][(student, "ch1.add_one")]["status"]


def test_the_honest_student_keeps_full_marks_and_every_file_is_written(isolated):
    assert isolated["summary"]["totals"]["honest"] == 6
    for name in ("results.csv", "grades.csv"):
        assert (isolated["out"] / name).is_file()
    assert list(isolated["work"].iterdir()) == [], "the grader left a work folder behind"
    assert isolated["survivors"] == [], "a sandbox process outlived the batch"


def test_classmates_notebooks_and_files_in_tmp_are_out_of_sight(isolated):
    needs("mounts")
    assert status(isolated, "reader") == "passed", isolated["rows"][("reader", "ch1.add_one")]


def test_dev_shm_files_and_sysv_segments_do_not_outlive_the_student(isolated):
    needs("mounts")
    needs("ipc")
    assert status(isolated, "leaker") == "passed", "the attack did not run inside the sandbox: this proves nothing"
    assert not list(Path("/dev/shm").glob(f"{TOKEN}-*")), "a /dev/shm file outlived grading"
    assert isolated["segments_after"] <= isolated["segments_before"], "a SysV segment outlived grading"


def test_dev_shm_is_size_limited(isolated):
    needs("mounts")
    assert status(isolated, "filler") == "passed", isolated["rows"][("filler", "ch1.add_one")]


def test_no_unix_socket_outside_the_sandbox_is_reachable(isolated):
    needs("mounts")
    assert status(isolated, "socketeer") == "passed", isolated["rows"][("socketeer", "ch1.add_one")]
    assert isolated["accepted"] == [], "the sandbox connected to a unix socket of the machine"


def test_the_course_reference_and_solutions_are_not_in_the_sandbox(isolated):
    """With the static check off, a cell that searches sys.path and the file system for utils/attention.py
    or solutions/*.ipynb, and imports the reference by name, finds nothing (private file system), or at
    least cannot import it (the worker kit) where the file system is shared."""
    row = isolated["rows"][("seeker", "ch1.add_one")]
    if "mounts" in sandbox.isolation(check=False).extras:
        assert row["status"] == "passed", row
    assert isolated["summary"]["totals"]["seeker"] >= 4  # its other two exercises ran


def test_the_sandbox_cannot_reach_a_server_on_loopback(isolated):
    needs("net")
    assert status(isolated, "caller") == "passed"
    assert isolated["accepted"] == [], "the sandbox connected to a listening port on 127.0.0.1"


# --------------------------------------------------------------------------------------------------
# The probe and its line (finding 11)
# --------------------------------------------------------------------------------------------------


def test_each_extra_is_probed_alone_and_the_line_names_what_is_missing():
    level = sandbox.Isolation("pidns", ("unshare", "--pid", "--fork"), "")
    tried = []

    def probe(option, full=True):
        tried.append((tuple(sorted(option.extras)), full))
        return "net" not in option.extras  # a machine where `unshare --net` is refused

    chosen = sandbox.choose([level, sandbox.Isolation("session", (), "")], probe=probe)
    assert chosen.extras == {"mounts", "ipc"}
    assert (("net",), False) in tried and (("ipc", "mounts"), True) in tried
    line = chosen.describe()
    assert "private file system" in line and "own IPC namespace" in line
    assert line.endswith("not active on this machine: net")


def test_a_level_whose_extras_all_fail_is_used_alone():
    level = sandbox.Isolation("pidns", ("unshare", "--pid", "--fork"), "")
    chosen = sandbox.choose([level], probe=lambda option, full=True: not option.extras)
    assert chosen == level and "not active on this machine: mounts, ipc, net" in chosen.describe()


def test_the_session_level_says_that_nothing_extra_is_active():
    line = sandbox.Isolation("session", (), "").describe()
    assert "not active on this machine: mounts, ipc, net" in line


def test_the_jail_shows_only_what_it_keeps_and_covers_a_hidden_folder_a_kept_path_would_show(tmp_path):
    unit_dir = tmp_path / "out" / "unit-1"
    spec = sandbox.jail_spec(unit_dir, (str(tmp_path / "out"), str(tmp_path / "subs")))
    assert [str(unit_dir), True] in spec["keep"]
    assert spec["cover_last"] == []  # out holds the unit folder; subs is not in the jail at all
    venv = tmp_path / "venv"
    spec = sandbox.jail_spec(unit_dir, (str(venv / "subs"),))
    assert spec["cover_last"] == []
    kept = {path for path, _ in spec["keep"]}
    assert str(kit.kit()) in kept and not any(path == str(gf.REPO) or path.startswith(str(gf.REPO / "utils"))
                                              for path in kept)


def test_python_paths_never_bring_back_a_scratch_folder_or_the_course(monkeypatch):
    """A script run from /tmp puts /tmp on sys.path, an editable install the checkout: neither is kept, nor
    /, nor the course package; the worker kit is."""
    monkeypatch.setattr(sandbox.sys, "path", ["/tmp", "/", "/tmp/", str(gf.REPO), str(gf.REPO / "utils"),
                                              *sandbox.sys.path])
    paths = sandbox._python_paths()
    assert not {"/", "/tmp", "/var/tmp", "/run", "/dev/shm"} & set(paths)
    assert str(gf.REPO) not in paths and str(gf.REPO / "utils") not in paths
    assert str(kit.kit()) in paths
    assert kit.site_paths() and not any(path.startswith(str(gf.REPO / "utils")) or path == str(gf.REPO)
                                        for path in kit.site_paths())


def test_the_kit_holds_only_the_runner_side():
    names = sorted(str(path.relative_to(kit.kit())) for path in kit.kit().rglob("*.py"))
    assert names == ["utils/__init__.py", "utils/exercises/__init__.py", "utils/exercises/common.py",
                     "utils/exercises/runner.py", "utils/grading/__init__.py", "utils/grading/files.py",
                     "utils/grading/forkserver.py", "utils/grading/jail.py", "utils/grading/serialize.py",
                     "utils/grading/worker.py"]


def test_a_failing_jail_step_stops_the_worker_with_a_reason(tmp_path):
    from utils.grading import jail

    assert jail.main(["{}"]) == 2  # no command
    assert jail.main(["not json", "--", "true"]) == 3


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare")
def test_the_jail_keeps_the_unit_folder_writable_and_nothing_else_of_the_machine(tmp_path):
    import json
    import sys

    top = Path(tempfile.mkdtemp(prefix=f"{TOKEN}-jail-", dir="/tmp"))
    try:
        unit_dir = top / "unit"
        unit_dir.mkdir()
        spec = {"keep": [[str(top), False], [str(unit_dir), True], *sandbox.jail_spec(None)["keep"]]}  # + Python
        script = (f"import os\nopen({str(unit_dir / 'written')!r}, 'w').write('ok')\n"
                  f"try:\n    open({str(top / 'denied')!r}, 'w')\nexcept OSError:\n    print('read-only')\n"
                  f"print(sorted(os.listdir('/')), os.path.exists({str(gf.REPO / 'utils')!r}), "
                  "os.path.exists('/run'), sorted(os.listdir('/dev')))")
        result = subprocess.run(["unshare", "--mount", "--pid", "--fork", "--mount-proc", sys.executable, "-I",
                                 "-S", str(Path(sandbox._JAIL)), json.dumps(spec), "--", sys.executable, "-I", "-S",
                                 "-c", script], capture_output=True, text=True, timeout=60, check=False)
        assert result.returncode == 0, result.stderr
        assert (unit_dir / "written").read_text() == "ok"
        lines = result.stdout.strip().splitlines()
        assert lines[0] == "read-only" and not (top / "denied").exists()
        assert "'run'" not in lines[1] and "'home'" not in lines[1] and "False False" in lines[1], lines[1]
        assert "['fd', 'full', 'null', 'random', 'shm', 'stderr', 'stdin', 'stdout', 'urandom', 'zero']" in lines[1]
    finally:
        shutil.rmtree(top, ignore_errors=True)
