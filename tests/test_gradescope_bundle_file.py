"""``gradescope-bundle OUT.zip``: the zip holds the seed the students' hidden cases are drawn with (issue
35, W4): a second run never replaces it unless ``--overwrite``, and it is written mode 0600. Its
``--help`` says ``--memory`` bounds all of a student's processes together, as the grader's does.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import zipfile
from pathlib import Path

import pytest

from utils.builder.gradescope_bundle import checkout_warnings, write_gradescope_bundle
from utils.grade import main as grade_main

REPO = Path(__file__).resolve().parent.parent


def seed_of(path) -> int:
    with zipfile.ZipFile(path) as archive:
        return json.loads(archive.read("gradescope.json"))["seed"]


def test_an_existing_bundle_keeps_its_seed_unless_overwrite_and_is_private(tmp_path, capsys):
    out = tmp_path / "ch2.zip"
    old = os.umask(0o022)
    try:
        assert grade_main(["gradescope-bundle", str(out), "--seed", "5", "--chapters", "2"]) == 0
        assert stat.S_IMODE(out.stat().st_mode) == 0o600
        capsys.readouterr()
        assert grade_main(["gradescope-bundle", str(out), "--chapters", "2"]) == 2
        err = capsys.readouterr().err
        assert f"gradescope-bundle: {out} exists, and it holds the seed" in err and "--overwrite" in err, err
        assert seed_of(out) == 5 and sorted(p.name for p in tmp_path.iterdir()) == ["ch2.zip"]
        with pytest.raises(FileExistsError, match="--overwrite"):
            write_gradescope_bundle(out, seed=6, chapters="2")
        assert seed_of(out) == 5
        assert grade_main(["gradescope-bundle", str(out), "--seed", "7", "--chapters", "2", "--overwrite"]) == 0
    finally:
        os.umask(old)
    assert seed_of(out) == 7 and stat.S_IMODE(out.stat().st_mode) == 0o600
    # no partial file left beside it; the replaced zip, whose seed differed, is kept (W8)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ch2.previous.zip", "ch2.zip"]
    assert seed_of(tmp_path / "ch2.previous.zip") == 5


def test_overwrite_that_changes_the_seed_keeps_the_old_zip_and_says_how_to_keep_its_seed(tmp_path, capsys):
    """W8 (issue 35): the quick start's bundle had a drawn seed, never printed; step 7's ``--seed-file ...
    --overwrite`` replaced it silently, so "Regrade all" would have drawn other hidden cases."""
    out, seed_file = tmp_path / "ch2.zip", tmp_path / "seed"
    assert grade_main(["gradescope-bundle", str(out), "--chapters", "2"]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert f"the seed was drawn now and is stored only in {out}'s gradescope.json" in said, said
    assert str(seed_of(out)) not in said  # not printed: a shared console or a log must not show it
    drawn = seed_of(out)
    seed_file.write_text(f"{drawn + 1}\n")
    seed_file.chmod(0o600)
    assert grade_main(["gradescope-bundle", str(out), "--chapters", "2", "--seed-file", str(seed_file),
                       "--overwrite"]) == 0
    kept = tmp_path / "ch2.previous.zip"
    err = " ".join(capsys.readouterr().err.split())
    assert f"gradescope-bundle: warning: {out} held another seed, so the hidden cases change" in err, err
    assert f"The replaced zip is kept as {kept} (mode 0600): unzip -p {kept} gradescope.json shows its seed" in err
    assert "--seed-file" in err and str(drawn) not in err, err
    assert seed_of(out) == drawn + 1 and seed_of(kept) == drawn and stat.S_IMODE(kept.stat().st_mode) == 0o600
    # the same seed again: nothing to warn about, nothing kept; a second change never replaces the first copy
    assert grade_main(["gradescope-bundle", str(out), "--chapters", "2", "--seed-file", str(seed_file),
                       "--overwrite"]) == 0
    captured = capsys.readouterr()
    assert "seed" not in captured.err and "drawn" not in captured.out, captured
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ch2.previous.zip", "ch2.zip", "seed"]
    write_gradescope_bundle(out, seed=3, chapters="2", overwrite=True)
    assert "ch2.previous-2.zip" in capsys.readouterr().err and seed_of(kept) == drawn
    assert seed_of(tmp_path / "ch2.previous-2.zip") == drawn + 1 and seed_of(out) == 3


def test_bundle_help_says_memory_is_per_student(capsys):
    with pytest.raises(SystemExit):
        grade_main(["gradescope-bundle", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "MiB of RAM per student: all of a student's processes together" in text, text
    assert "per exercise" not in text.split("--memory")[1].split("--")[0] and "--overwrite" in text
    assert "when the seed changes, the old zip is kept as NAME.previous.zip, with a warning" in text, text  # W8


def _git(folder, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=folder, check=True,
                   capture_output=True, timeout=60)


def test_a_bundle_inside_the_checkout_or_from_changed_files_is_warned_about(tmp_path, capsys):
    """W6 (issue 35): a zip written into the checkout, or packing uncommitted edits, is named on stderr."""
    checkout = tmp_path / "course"
    (checkout / "utils").mkdir(parents=True)
    (checkout / "utils" / "attention.py").write_text("x = 1\n")
    (checkout / "README.md").write_text("course\n")
    _git(checkout, "init", "-q")
    _git(checkout, "add", "-A")
    _git(checkout, "commit", "-q", "-m", "course")
    outside = tmp_path / "grading" / "ch2.zip"
    assert checkout_warnings(outside, checkout) == []  # outside the checkout, nothing changed
    inside = checkout_warnings(checkout / "ch2.zip", checkout)
    assert len(inside) == 1 and "inside the course checkout" in inside[0] and "grading seed" in inside[0]
    (checkout / "utils" / "attention.py").write_text("x = 2\n")
    (checkout / "utils" / "new.py").write_text("y = 1\n")
    (checkout / "notes.txt").write_text("not packed\n")
    changed = checkout_warnings(outside, checkout)
    assert len(changed) == 1
    assert "2 of them differ from its last commit (utils/attention.py, utils/new.py)" in changed[0]
    (tmp_path / "plain").mkdir()
    assert checkout_warnings(outside, tmp_path / "plain") == []  # not a git checkout: nothing to say

    # the command prints them after writing the zip (this checkout, a zip inside it: build/ is ignored)
    out = REPO / "build" / f"bundle-warning-test-{os.getpid()}.zip"
    try:
        assert grade_main(["gradescope-bundle", str(out), "--seed", "5", "--chapters", "1"]) == 0
        err = capsys.readouterr().err
        assert f"gradescope-bundle: warning: {out} is inside the course checkout" in err, err
    finally:
        out.unlink(missing_ok=True)
