"""The grader run by an ordinary user: an instructor's laptop or a JupyterHub account, no root and no
capabilities (issue 35: "a full grader run as a non-root user").

As root, the test makes this Python reachable for an unprivileged uid (pyenv under a private ``/root`` is
not) and becomes that uid with ``setpriv``, every capability gone; then it runs ``python -m utils.grade`` on
real chapter 1 submissions, as the README's quick start says. Without root the grader cannot give learner
code a uid of its own; it runs it as the instructor's user inside a user namespace with a PID namespace and
a private file system, which the grader counts as safe only with those mounts. So learner code, running as
the very user who owns the seed file and the submissions, must still be unable to read either.
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import grader_fixtures as gf
import nbformat
import pytest

from utils.grading import isolation

UID = isolation.UID_BASE - 11  # an unprivileged uid that no sandbox and no other test uses

# The learner's project_qkv is right, but gives a wrong answer if it can read the instructor's secret seed
# or a classmate's notebook: both belong to the user the grader runs as.
SNOOP = """
SEEN = []
for path in ({seed!r}, {classmate!r}):
    try:
        with open(path, "rb") as handle:
            SEEN.append(handle.read(1))
    except OSError:
        pass
"""


def _chown_tree(top: Path) -> None:
    for folder, dirs, files in os.walk(top):
        for name in [folder, *(os.path.join(folder, n) for n in dirs + files)]:
            os.chown(name, UID, UID)


@pytest.fixture(scope="module")
def as_user():
    if os.geteuid() != 0 or not shutil.which("setpriv") or not shutil.which("unshare"):
        pytest.skip("needs root (to become an unprivileged user for the test), setpriv and unshare")
    top = Path(tempfile.mkdtemp(prefix="grader-nonroot-"))  # pytest's own folder is root's alone (0700)
    os.chmod(top, 0o755)
    subs, seed = top / "subs", top / "private" / "seed"
    seed.parent.mkdir()
    seed.write_text("271828\n")
    solution = gf.REPO / "solutions" / "01_queries_keys_values.ipynb"
    gf.student(subs, "honest", {"01.ipynb": nbformat.read(str(solution), as_version=4)})
    gf.student(subs, "empty", {"01.ipynb": gf.student_version(solution)})
    snoop = nbformat.read(str(solution), as_version=4)
    for cell in snoop.cells:
        if cell.get("metadata", {}).get("course", {}).get("exercise") == "ch1.project_qkv":
            cell.source = (SNOOP.format(seed=str(seed), classmate=str(subs / "honest" / "01.ipynb"))
                           + cell.source.replace("    return q, k, v", "    return (q + len(SEEN), k, v)"))
    gf.student(subs, "snoop", {"01.ipynb": snoop})
    _chown_tree(top)
    os.chmod(seed.parent, 0o700)
    os.chmod(seed, 0o600)

    def run(*command: str) -> subprocess.CompletedProcess:
        argv = ["setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups", "--inh-caps=-all",
                "--bounding-set=-all", "--", "env", f"HOME={top}", *command]
        setup = gf.REACHABLE.format(repo=str(gf.REPO), blocked=gf.blocked_folders(), argv=argv)
        return subprocess.run(["unshare", "--mount", sys.executable, "-c", setup], cwd=gf.REPO,
                              capture_output=True, text=True, timeout=900, check=False)

    if run("unshare", "--user", "--map-root-user", "--pid", "--fork", "true").returncode != 0:
        shutil.rmtree(top, ignore_errors=True)
        pytest.skip("this kernel gives an unprivileged user no user or PID namespace (the grader refuses there)")

    yield {"top": top, "subs": subs, "seed": seed, "run": run}
    shutil.rmtree(top, ignore_errors=True)


@pytest.mark.sandbox
def test_an_ordinary_user_grades_a_class_and_learner_code_cannot_read_the_users_own_files(as_user):
    top = as_user["top"]
    done = as_user["run"](sys.executable, "-m", "utils.grade", str(as_user["subs"]), "--out", str(top / "out"),
                          "--chapters", "1", "--jobs", "2", "--seed-file", str(as_user["seed"]))
    log = (done.stdout + done.stderr)[-4000:]
    assert done.returncode == 0, log  # namespaces work for this user (the fixture checked): no refusal
    line = done.stdout.strip().splitlines()[-1]
    assert line.startswith("grader isolation: pidns") and "mounts" in line and "WEAK" not in line, log
    with open(top / "out" / "results.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    status = {}
    for row in rows:
        status.setdefault((row["student"], row["exercise"]), set()).add(row["status"])
    exercises = {exercise for _, exercise in status}
    assert exercises == {"ch1.project_qkv", "ch1.attention_scores"}, status
    assert all(status["honest", e] == {"passed"} for e in exercises), status
    assert all(status["empty", e] == {"not attempted"} for e in exercises), status
    # run as the user who owns both files, the snoop still read neither: its answer stayed right
    assert status["snoop", "ch1.project_qkv"] == {"passed"}, status
    assert (top / "out" / "results.csv").stat().st_uid == UID  # written by the user, as root never ran it
