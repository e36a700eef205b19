"""``gradescope-bundle OUT.zip``: the zip holds the seed the students' hidden cases are drawn with (issue
35, W4): a second run never replaces it unless ``--overwrite``, and it is written mode 0600. Its
``--help`` says ``--memory`` bounds all of a student's processes together, as the grader's does.
"""

from __future__ import annotations

import json
import os
import stat
import zipfile

import pytest

from utils.builder.gradescope_bundle import write_gradescope_bundle
from utils.grade import main as grade_main


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
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ch2.zip"]  # no partial file left beside it


def test_bundle_help_says_memory_is_per_student(capsys):
    with pytest.raises(SystemExit):
        grade_main(["gradescope-bundle", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "MiB of RAM per student: all of a student's processes together" in text, text
    assert "per exercise" not in text.split("--memory")[1].split("--")[0] and "--overwrite" in text
