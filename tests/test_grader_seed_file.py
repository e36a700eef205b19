"""The seed need not be on the command line (red team R3, issue 35).

Every process on a machine may read every other process's command line (``/proc/PID/cmdline``). At the
``uid`` level (no PID namespace: a container without ``CAP_SYS_ADMIN``) that includes the student's code,
which the red team had scan ``/proc`` and raise with what it found: ``python -m utils.grade ... --seed N``
(the README's way to re-grade, and to grade nbgrader's submissions with the course's permanent secret) put
N into that student's own feedback. ``--seed-file FILE`` reads the seed from a file of mode 0600 (such
as nbgrader's ``grading_secret.txt``), and ``--seed`` at a level without a PID namespace says so.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys

import grader_fixtures as gf
import nbformat
import pytest

from utils.grading import cli
from utils.grading.course_secret import write_secret

SEED = 7315209461

# At the top of chapter 1's first exercise cell: every command line the cell can read that looks like the
# grader's, in the exception's text (public feedback shows a public run's exception). It climbs its ancestors
# through /proc (the grader started the worker that runs it) with open() alone: the static check refuses os.
SCAN = (
    "SEEN, _pid = [], 'self'\nfor _ in range(64):\n    try:\n"
    "        _status = open('/proc/' + _pid + '/status', 'rb').read().decode()\n"
    "        _line = open('/proc/' + _pid + '/cmdline', 'rb').read().replace(bytes(1), b' ').decode()\n"
    "    except (OSError, ValueError):\n        break\n"
    "    if 'utils.grade' in _line:\n        SEEN.append(_line)\n"
    "    _pid = _status.split('PPid:')[1].split()[0]\n    if _pid == '0':\n        break\n"
    "raise ValueError('saw-grader ' + ' '.join(SEEN) if SEEN else 'saw-nothing')\n"
)


def test_seed_and_seed_file_are_one_choice_and_a_bad_file_is_refused_by_name(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main([str(tmp_path), "--seed", "1", "--seed-file", str(tmp_path / "s")])
    assert exit_info.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
    assert cli.main([str(tmp_path), "--seed-file", str(tmp_path / "missing.txt")]) == 2
    assert "--seed-file" in capsys.readouterr().err
    shared = tmp_path / "shared.txt"
    shared.write_text(f"{SEED}\n")
    os.chmod(shared, 0o644)
    assert cli.main([str(tmp_path), "--seed-file", str(shared)]) == 2
    err = capsys.readouterr().err
    assert "readable by other users" in err and "chmod 600" in err and str(SEED) not in err


@pytest.fixture(scope="module")
def capless_cli(tmp_path_factory):
    if os.geteuid() != 0 or not shutil.which("capsh"):
        pytest.skip("needs root and capsh")
    top = tmp_path_factory.mktemp("seedfile")
    os.chmod(top, 0o755)
    nb = nbformat.read(str(gf.REPO / "solutions" / "01_queries_keys_values.ipynb"), as_version=4)
    cell = next(c for c in nb.cells if c.get("metadata", {}).get("course", {}).get("exercise") == "ch1.project_qkv")
    cell.source = SCAN + cell.source
    gf.student(top / "subs", "scanner", {"01.ipynb": nb})
    secret = top / "private" / "grading_secret.txt"
    secret.parent.mkdir()
    write_secret(secret, SEED)

    def run(*seed_args: str) -> tuple[subprocess.CompletedProcess, str]:
        out = top / f"out{len(seed_args[0])}"
        command = [sys.executable, "-m", "utils.grade", str(top / "subs"), "--out", str(out), "--chapters", "1",
                   "--jobs", "1", "--timeout", "20", "--feedback", "public", *seed_args]
        done = subprocess.run(["capsh", "--drop=cap_sys_admin", "--", "-c", shlex.join(command)], cwd=gf.REPO,
                              capture_output=True, text=True, timeout=600, check=False)
        if done.returncode == 2 and "refusing to grade" in done.stderr:
            pytest.skip("no safe level without CAP_SYS_ADMIN here (a Python an unprivileged user cannot run)")
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        return done, (out / "results.csv").read_text(encoding="utf-8")

    return {"run": run, "secret": secret}


@pytest.mark.sandbox
def test_a_seed_file_keeps_the_seed_from_the_students_code_where_the_process_list_is_shared(capless_cli):
    done, results = capless_cli["run"]("--seed-file", str(capless_cli["secret"]))
    assert "saw-grader" in results  # the cell did see the grader's command line ...
    assert str(SEED) not in results  # ... and no seed in it
    assert f"grader: seed {SEED}" not in done.stderr + done.stdout  # not even printed back: it is in the file


@pytest.mark.sandbox
def test_a_seed_on_the_command_line_is_named_as_readable_where_the_process_list_is_shared(capless_cli):
    done, results = capless_cli["run"]("--seed", str(SEED))
    assert str(SEED) in results  # what the red team found: the student's own feedback holds the seed
    assert "--seed-file" in done.stderr and "can read" in done.stderr, done.stderr[-2000:]


def test_the_nbgrader_exports_secret_is_a_seed_file_and_help_says_what_one_holds(tmp_path, capsys, monkeypatch):
    """W4: grading_secret.txt carries '#' comment lines, while --seed-file read as "one integer"."""
    from utils.builder import nbgrader

    seen = []

    class Graded(Exception):
        pass

    def grade(*_args, seed, **_kwargs):  # the seed the grader would grade with; nothing is graded
        seen.append(seed)
        raise Graded

    monkeypatch.setattr(cli, "grade", grade)
    assert nbgrader._secret(tmp_path, SEED)
    exported = tmp_path / nbgrader.SECRET_NAME
    assert exported.read_text().startswith("#")  # what the export writes: comment lines, then the seed
    with pytest.raises(Graded):
        cli.main([str(tmp_path), "--seed-file", str(exported)])
    hand = tmp_path / "hand.txt"
    hand.write_text(f"# mine\n\n  {SEED + 1}  \n# kept away from the command line\n")
    os.chmod(hand, 0o600)
    with pytest.raises(Graded):
        cli.main([str(tmp_path), "--seed-file", str(hand)])
    assert seen == [SEED, SEED + 1]
    hand.write_text(f"{SEED}\n{SEED}\n")
    assert cli.main([str(tmp_path), "--seed-file", str(hand)]) == 2
    assert "should hold one non-negative integer (and '#' comment lines)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "one non-negative integer on a line of its own; lines starting with '#' are comments and blank lines " \
           "are skipped (the grading_secret.txt that python -m utils.build --nbgrader writes is such a file)" in text
