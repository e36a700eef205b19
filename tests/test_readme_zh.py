"""README.zh-CN.md: generated from README.md and i18n/zh_CN/README.po, kept in sync like the notebooks."""

import re
import shutil
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from utils.build import load_config
from utils.builder import cli as build_cli
from utils.i18n import cli as i18n_cli
from utils.i18n.catalog import catalogue_text, read_catalogue
from utils.i18n.glossary import GLOSSARY_FILE, glossary_problems, kept_problems, load_glossary, markup_problems
from utils.i18n.readme import (
    README_CATALOGUE,
    README_GENERATED,
    README_SOURCE,
    README_TARGET,
    readme_blocks,
    readme_entries,
    readme_status,
    render_readme,
    update_readme_catalogue,
    write_readme,
)

REPO = Path(__file__).resolve().parent.parent
CONFIG = load_config(REPO / "pyproject.toml")
BADGE = re.compile(r"\[!\[([^\]]*)\]\(([^)\s]+)\)\]\(([^)\s]+)\)")


@pytest.fixture
def course(tmp_path):
    """A scratch root holding the README, its catalogue and the generated Chinese README."""
    for rel in (README_SOURCE, README_CATALOGUE, README_TARGET):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, tmp_path / rel)
    return tmp_path


def replace_in_readme(root: Path, old: str, new: str) -> None:
    path = root / README_SOURCE
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new), encoding="utf-8")


def test_the_chinese_readme_is_generated_and_current():
    problems, stale = readme_status(REPO)
    assert problems == [], "\n".join(map(str, problems))
    assert not stale, f"{README_TARGET} is not what README.md + {README_CATALOGUE} make: run `python -m utils.build`"
    text = (REPO / README_TARGET).read_text(encoding="utf-8")
    assert text.startswith(README_GENERATED) and "do not edit" in text.splitlines()[0]


def test_the_readmes_link_to_each_other_at_the_top():
    english = (REPO / README_SOURCE).read_text(encoding="utf-8").split("\n## ")[0]
    chinese = (REPO / README_TARGET).read_text(encoding="utf-8").split("\n## ")[0]
    assert "](README.zh-CN.md)" in english and "](README.md)" in chinese


@pytest.mark.parametrize("name", [README_SOURCE, README_TARGET])
def test_both_readmes_open_the_chinese_chapters_on_colab_and_binder(name):
    owner, repo = urlsplit(CONFIG.repository).path.strip("/").removesuffix(".git").split("/")
    targets = [target for _, _, target in BADGE.findall((REPO / name).read_text(encoding="utf-8"))]
    colab = [t for t in targets if t.startswith("https://colab.research.google.com/") and "/chapters/zh/" in t]
    binder = [t for t in targets if t.startswith("https://mybinder.org/") and "chapters/zh" in t]
    assert colab and binder, f"{name}: no Colab or Binder badge for chapters/zh/: {targets}"
    prefix = f"/github/{owner}/{repo}/blob/{CONFIG.branch}/"
    for target in colab:
        path = urlsplit(target).path
        assert path.startswith(prefix) and (REPO / path[len(prefix):]).is_file(), target
    for target in binder:
        url = urlsplit(target)
        assert url.path == f"/v2/gh/{owner}/{repo}/{CONFIG.branch}", target
        assert url.query == "urlpath=lab/tree/chapters/zh" and (REPO / "chapters" / "zh").is_dir(), target


def test_blocks_join_back_to_the_readme_and_keys_are_unique():
    text = (REPO / README_SOURCE).read_text(encoding="utf-8")
    assert "".join(block + sep for block, sep in readme_blocks(text)) == text
    contexts = [context for context, _ in readme_entries(text)]
    assert len(contexts) == len(set(contexts)) > 30
    fenced = [block for _, block in readme_entries(text) if block.startswith("```")]
    assert fenced and all(block.endswith("```") for block in fenced)  # a fence is one block, blank lines and all


GLOSSARY = load_glossary(REPO / GLOSSARY_FILE)


def without_comments(block: str) -> list[str]:
    """The lines of a fenced block with ``# ...`` comments (shell and Python) and trailing spaces removed."""
    return [re.sub(r"(^|\s)#(?!#).*$", "", line).rstrip() for line in block.splitlines()]


def test_the_translation_uses_the_glossary_and_keeps_code_links_numbers():
    problems = []
    for message in read_catalogue(REPO / README_CATALOGUE):
        if message.id.startswith("```"):  # a code block: the same code, only its comments translated
            if without_comments(message.string) != without_comments(message.id):
                problems.append(f"{message.context}: the code differs from the English once comments are removed")
        elif message.id and message.string:
            found = (glossary_problems(message.id, message.string, GLOSSARY)
                     + kept_problems(message.id, message.string) + markup_problems(message.id, message.string))
            problems += [f"{message.context}: {p}" for p in found]
    assert problems == [], "\n".join(problems)


def test_a_changed_paragraph_becomes_fuzzy_alone_and_fails_the_check(course, capsys):
    before = {m.context: m for m in read_catalogue(course / README_CATALOGUE) if m.id}
    replace_in_readme(course, "On a fresh clone, two commands are all of it:", "On a fresh clone, two commands do it:")
    assert update_readme_catalogue(course, log=lambda line: None)
    after = {m.context: m for m in read_catalogue(course / README_CATALOGUE) if m.id}
    changed = [c for c in after if (after[c].id, after[c].fuzzy) != (before[c].id, before[c].fuzzy)]
    assert changed == ["setup/1"]
    assert after["setup/1"].fuzzy and after["setup/1"].previous_id == [before["setup/1"].id]
    assert after["setup/1"].string == before["setup/1"].string  # the Chinese is kept for the translator

    problems, stale = readme_status(course)
    assert [p.cell_id for p in problems] == ["setup/1"] and "fuzzy" in str(problems[0])
    assert stale  # the generated file shows the English of that block until it is translated
    assert "On a fresh clone, two commands do it:" in render_readme(course)
    assert not update_readme_catalogue(course, log=lambda line: None)  # nothing more to do: nothing written


def test_moved_and_removed_blocks_keep_their_translations(course):
    text = (course / README_SOURCE).read_text(encoding="utf-8")
    first = "On a fresh clone, two commands are all of it:\n\n"
    (course / README_SOURCE).write_text(text.replace(first, ""), encoding="utf-8")  # removed: the rest shifts up
    update_readme_catalogue(course, log=lambda line: None)
    catalog = read_catalogue(course / README_CATALOGUE)
    assert [m.context for m in catalog if m.id and (m.fuzzy or not m.string)] == []
    assert [m.id for m in catalog.obsolete.values()] == [first.strip()]  # its Chinese kept, as #~
    (course / README_SOURCE).write_text(text, encoding="utf-8")  # and back: it comes back translated
    update_readme_catalogue(course, log=lambda line: None)
    assert readme_status(course) == ([], False)


def test_build_check_and_i18n_check_fail_when_the_readme_changes_untranslated(course, monkeypatch, capsys):
    monkeypatch.setattr(build_cli, "outdated", lambda root: [])  # the notebooks are not under test here
    monkeypatch.setattr("utils.i18n.notebooks.translation_status", lambda root: ([], []))
    monkeypatch.setattr(i18n_cli, "translation_status", lambda root: ([], []))
    assert build_cli.main(["--check", "--root", str(course)]) == 0
    replace_in_readme(course, "## Performance\n", "## Performance\n\nA new paragraph.\n")
    assert build_cli.main(["--check", "--root", str(course)]) == 1  # README.zh-CN.md is stale
    assert f"out of date: {README_TARGET}" in capsys.readouterr().out
    assert i18n_cli.main(["--root", str(course), "update"]) == 0
    assert i18n_cli.main(["--root", str(course), "check"]) == 1
    out = capsys.readouterr().out
    assert "untranslated: README.md, cell 'performance/1' (missing: no Chinese yet): A new paragraph." in out
    assert build_cli.main(["--check", "--root", str(course)]) == 1

    catalog = read_catalogue(course / README_CATALOGUE)
    untranslated = [m.context for m in catalog if m.id and (m.fuzzy or not m.string)]
    assert untranslated == ["performance/1"]  # the blocks it shifted kept their translations
    for message in catalog:
        if message.context == "performance/1":
            message.string = "新的一段。"
    (course / README_CATALOGUE).write_text(catalogue_text(catalog), encoding="utf-8")
    assert write_readme(course, log=lambda line: None)
    assert build_cli.main(["--check", "--root", str(course)]) == 0


def test_a_hand_edit_of_the_chinese_readme_is_caught(course):
    target = course / README_TARGET
    target.write_text(target.read_text(encoding="utf-8") + "\n手工添加的一行\n", encoding="utf-8")
    assert readme_status(course) == ([], True)
    assert write_readme(course, log=lambda line: None) and readme_status(course) == ([], False)


def test_no_catalogue_means_no_chinese_readme(course):
    (course / README_CATALOGUE).unlink()
    (course / README_TARGET).unlink()
    assert render_readme(course) is None and readme_status(course) == ([], False)
    assert not write_readme(course, log=lambda line: None) and not (course / README_TARGET).exists()


def test_the_chinese_readme_puts_its_reader_first():
    """The language switch shows 简体中文 as the current page, and the Chinese badges come before the English."""
    top = (REPO / README_TARGET).read_text(encoding="utf-8").split("\n## ")[0]
    assert "[English](README.md) · **简体中文**" in top and "[简体中文](" not in top
    targets = [target for _, _, target in BADGE.findall(top)]
    assert "/chapters/zh/" in targets[0] and any("/chapters/zh/" not in t for t in targets[1:]), targets
    english = (REPO / README_SOURCE).read_text(encoding="utf-8").split("\n## ")[0]
    assert "/chapters/zh/" not in [t for _, _, t in BADGE.findall(english)][0]  # the English README: English first
