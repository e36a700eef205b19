"""An nbgrader export never replaces an instructor's edit of ``source/`` without asking (W18's finding).

``source/`` is generated from ``solutions/`` (utils/builder/nbgrader_sources.py): an export replaces a
source notebook only when it is still as an export wrote it; one edited since, or not written by an
export, is refused, naming it, before anything is written, and ``--force`` first moves it to
``DIR/edited_source/<assignment>/``, never beside the notebook: nbgrader's ``generate_assignment`` releases every
other file of ``source/<assignment>/`` to the students, and an edited source notebook holds the solutions
(walkthrough W20 found a ``NAME.ipynb.edited`` copy in release/, autograded/ and feedback/). A re-export of an
unedited course, and one after the course changed, go ahead.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from utils.builder.cli import main as build_main
from utils.builder.nbgrader import export_nbgrader
from utils.builder.nbgrader_sources import EDITED_DIR, SOURCE_DIGESTS_NAME
from utils.notebook_files import BuildError

CHAPTER = "01_queries_keys_values"
SOURCE = f"source/{CHAPTER}/{CHAPTER}.ipynb"


def _edit(path, marker):
    nb = json.loads(path.read_text(encoding="utf-8"))
    nb["cells"][0]["source"] = [marker]
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path.read_text(encoding="utf-8")


def test_an_unedited_source_is_exported_again_and_its_digest_recorded(tmp_path):
    export_nbgrader(tmp_path, chapters={CHAPTER})
    first = (tmp_path / SOURCE).read_text(encoding="utf-8")
    assert SOURCE in json.loads((tmp_path / SOURCE_DIGESTS_NAME).read_text(encoding="utf-8"))
    written = export_nbgrader(tmp_path, chapters={CHAPTER})
    assert (tmp_path / SOURCE).read_text(encoding="utf-8") == first
    assert not any(EDITED_DIR in path.parts for path in written) and not (tmp_path / EDITED_DIR).exists()


def test_a_changed_course_replaces_a_source_the_export_wrote(tmp_path):
    export_nbgrader(tmp_path, chapters={CHAPTER})
    source = tmp_path / SOURCE
    old = _edit(source, "an older export's text")
    digests = json.loads((tmp_path / SOURCE_DIGESTS_NAME).read_text(encoding="utf-8"))
    digests[SOURCE] = hashlib.sha256(old.encode("utf-8")).hexdigest()  # as if an export wrote it
    (tmp_path / SOURCE_DIGESTS_NAME).write_text(json.dumps(digests), encoding="utf-8")
    export_nbgrader(tmp_path, chapters={CHAPTER})
    assert "an older export's text" not in source.read_text(encoding="utf-8")
    assert not (tmp_path / EDITED_DIR).exists()


def test_an_edited_source_is_refused_by_name_and_kept_unless_forced(tmp_path):
    export_nbgrader(tmp_path, chapters={CHAPTER})
    source = tmp_path / SOURCE
    edited = _edit(source, "my own introduction for this class")
    config = tmp_path / "nbgrader_config.py"
    config.unlink()  # nothing at all is written by a refused export
    with pytest.raises(BuildError, match=rf"{SOURCE} was edited since the last export.*solutions/.*--force"):
        export_nbgrader(tmp_path, chapters={CHAPTER})
    assert source.read_text(encoding="utf-8") == edited and not config.exists()
    written = export_nbgrader(tmp_path, chapters={CHAPTER}, force=True)
    backup = tmp_path / EDITED_DIR / CHAPTER / f"{CHAPTER}.ipynb"
    assert backup in written and backup.read_text(encoding="utf-8") == edited
    assert "my own introduction" not in source.read_text(encoding="utf-8")
    # nbgrader releases every file of source/<assignment>/ to the students: only the notebook may be there
    assert sorted(p.name for p in source.parent.iterdir()) == [source.name]
    export_nbgrader(tmp_path, chapters={CHAPTER})  # now as the export wrote it: no refusal
    second = _edit(source, "a second edit")  # a second forced export keeps the first kept copy too
    written = export_nbgrader(tmp_path, chapters={CHAPTER}, force=True)
    again = tmp_path / EDITED_DIR / CHAPTER / f"{CHAPTER}-2.ipynb"
    assert again in written and again.read_text(encoding="utf-8") == second
    assert backup.read_text(encoding="utf-8") == edited
    assert sorted(p.name for p in source.parent.iterdir()) == [source.name]


def test_a_source_not_written_by_an_export_is_refused(tmp_path):
    source = tmp_path / SOURCE
    source.parent.mkdir(parents=True)
    source.write_text("{}", encoding="utf-8")
    with pytest.raises(BuildError, match="not written by"):
        export_nbgrader(tmp_path, chapters={CHAPTER})
    assert source.read_text(encoding="utf-8") == "{}"


def test_the_command_line_refuses_and_then_names_the_kept_copy(tmp_path, capsys):
    assert build_main(["--nbgrader", str(tmp_path)]) == 0
    source = tmp_path / SOURCE
    edited = _edit(source, "edited by hand")
    capsys.readouterr()
    assert build_main(["--nbgrader", str(tmp_path)]) != 0
    err = capsys.readouterr().err
    assert SOURCE in err and "--force" in err and source.read_text(encoding="utf-8") == edited
    assert build_main(["--nbgrader", str(tmp_path), "--force"]) == 0
    out = capsys.readouterr().out
    assert f"moved your edited source notebook to {tmp_path / EDITED_DIR / CHAPTER / source.name}" in out
    assert "wrote 7 assignments" in out


def test_an_edited_configuration_and_source_are_named_together_and_both_kept_under_force(tmp_path, capsys):
    """Walkthrough W22: a late penalty set in nbgrader_config.py vanished. The refusal named only the
    configuration, the forced export then replaced it without a copy, and autograde used no penalty."""
    export_nbgrader(tmp_path, chapters={CHAPTER})
    config = tmp_path / "nbgrader_config.py"
    penalty = config.read_text(encoding="utf-8") + 'c.LateSubmissionPlugin.penalty_method = "zero"\n'
    config.write_text(penalty, encoding="utf-8")
    edited = _edit(tmp_path / SOURCE, "an edited introduction")
    with pytest.raises(BuildError) as refused:
        export_nbgrader(tmp_path, chapters={CHAPTER})
    said = str(refused.value)
    assert "nbgrader_config.py differs" in said and SOURCE in said and "~/.jupyter/nbgrader_config.py" in said
    assert said.count("--force") == 1, said  # one instruction, not two (walkthrough W24)
    assert config.read_text(encoding="utf-8") == penalty and (tmp_path / SOURCE).read_text(encoding="utf-8") == edited
    capsys.readouterr()
    assert build_main(["--nbgrader", str(tmp_path), "--force"]) == 0
    out = capsys.readouterr().out
    kept = tmp_path / EDITED_DIR / "nbgrader_config.py"
    assert kept.read_text(encoding="utf-8") == penalty and f"moved your edited configuration to {kept}" in out
    assert "wrote 7 assignments" in out, out  # the moved configuration is no assignment (W24 saw 6)
    assert (tmp_path / EDITED_DIR / CHAPTER / f"{CHAPTER}.ipynb").read_text(encoding="utf-8") == edited
    assert "penalty_method" not in config.read_text(encoding="utf-8")  # the export's own, as --force asked


def test_an_edited_configuration_alone_is_refused_with_one_way_out(tmp_path):
    export_nbgrader(tmp_path, chapters={CHAPTER})
    config = tmp_path / "nbgrader_config.py"
    config.write_text(config.read_text(encoding="utf-8") + "# mine\n", encoding="utf-8")
    with pytest.raises(BuildError) as refused:
        export_nbgrader(tmp_path, chapters={CHAPTER})
    said = str(refused.value)
    assert said.count("--force") == 1 and str(tmp_path / EDITED_DIR) in said and SOURCE not in said, said


@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        (SOURCE_DIGESTS_NAME, "{not json", "cannot be read"),
        (SOURCE_DIGESTS_NAME, '["a list"]', "should map each source notebook to a digest"),
        ("secret_fingerprints.json", '{"01_queries_keys_values": 3}', "should map each assignment to a fingerprint"),
    ],
)
def test_a_damaged_record_of_an_earlier_export_is_refused_by_name_and_kept(tmp_path, name, text, says):
    export_nbgrader(tmp_path, chapters={CHAPTER})
    record = tmp_path / name
    record.write_text(text, encoding="utf-8")
    with pytest.raises(BuildError, match=says) as refused:
        export_nbgrader(tmp_path, chapters={CHAPTER})
    assert name in str(refused.value) and "fix it or move it away" in str(refused.value)
    assert record.read_text(encoding="utf-8") == text


def test_a_new_course_folder_is_private_and_an_open_one_is_named(tmp_path, capsys):
    """Walkthrough W26: the quick start left ~/course readable by every user (nbgrader then writes gradebook.db
    and feedback/ there); the export makes a new folder 0700 and names an existing open one, leaving its mode."""
    new = tmp_path / "new" / "course"
    assert build_main(["--nbgrader", str(new)]) == 0
    assert new.stat().st_mode & 0o777 == 0o700
    assert "chmod" not in capsys.readouterr().err
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    assert build_main(["--nbgrader", str(shared)]) == 0
    assert f"chmod 700 {shared}" in capsys.readouterr().err
    assert shared.stat().st_mode & 0o777 == 0o755  # the instructor's folder: named, not changed
