"""``gradescope-bundle --seed-file FILE`` (issue 35, W5): a regrade rebuilds the bundle with the seed the
students were graded with, and ``--seed N`` put it on a command line, which any process on the machine can
read. The seed file is read as ``python -m utils.grade --seed-file`` reads it (mode 0600, one integer,
``#`` comments), and it excludes ``--seed``.
"""

from __future__ import annotations

import json
import os
import zipfile

import pytest

from utils.grade import main as grade_main

SEED = 918273645


def seed_file(folder, mode: int = 0o600, text: str = f"# the course's seed\n{SEED}\n"):
    path = folder / "seed"
    path.write_text(text, encoding="utf-8")
    os.chmod(path, mode)
    return path


def test_the_bundle_takes_its_seed_from_a_private_file(tmp_path):
    out = tmp_path / "ch2.zip"
    assert grade_main(["gradescope-bundle", str(out), "--chapters", "2", "--seed-file", str(seed_file(tmp_path))]) == 0
    with zipfile.ZipFile(out) as archive:
        assert json.loads(archive.read("gradescope.json"))["seed"] == SEED


@pytest.mark.parametrize(("mode", "text", "said"), [
    (0o644, f"{SEED}\n", "readable by other users"),
    (0o600, "not a number\n", "should hold one non-negative integer"),
    (None, "", "is missing"),
])
def test_a_seed_file_it_cannot_use_is_refused_by_name_and_nothing_is_written(tmp_path, capsys, mode, text, said):
    path = seed_file(tmp_path, mode, text) if mode is not None else tmp_path / "nowhere"
    out = tmp_path / "ch2.zip"
    assert grade_main(["gradescope-bundle", str(out), "--chapters", "2", "--seed-file", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gradescope-bundle: --seed-file: ") and said in err and str(path) in err, err
    assert str(SEED) not in err and not out.exists()


def test_seed_and_seed_file_are_one_choice(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        grade_main(["gradescope-bundle", str(tmp_path / "a.zip"), "--seed", "1", "--seed-file",
                    str(seed_file(tmp_path))])
    assert exit_info.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
    assert not (tmp_path / "a.zip").exists()
    with pytest.raises(SystemExit):
        grade_main(["gradescope-bundle", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--seed-file FILE" in text and "mode 0600" in text, text
