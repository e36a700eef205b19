"""The Chinese edition: catalogues keyed by cell id, generated notebooks, the sync check, the glossary."""

from __future__ import annotations

import io
import shutil
import tokenize
from pathlib import Path

import nbformat
import pytest

from utils.builder.cli import main as build_main
from utils.builder.course import NOTEBOOK_GLOB, render
from utils.builder.stamps import SETUP_TAG
from utils.i18n.catalog import CATALOGUE_DIR, LOCALE, entries_by_cell, markdown_entries, read_catalogue
from utils.i18n.cli import main as i18n_main
from utils.i18n.cli import update
from utils.i18n.glossary import (
    GLOSSARY_FILE,
    drift_problems,
    glossary_problems,
    kept_problems,
    load_avoid,
    load_glossary,
    markup_problems,
)
from utils.i18n.notebooks import EXECUTED_KEY, code_digest, translation_status

REPO = Path(__file__).resolve().parent.parent
CATALOGUES = sorted(p for p in (REPO / CATALOGUE_DIR).glob("*.po") if p.stem != "README")  # the notebooks'
STEM = "01_queries_keys_values"


@pytest.fixture
def course(tmp_path):
    """A scratch course holding chapter 1 and its catalogue."""
    (tmp_path / "solutions").mkdir()
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    shutil.copy(REPO / "solutions" / f"{STEM}.ipynb", tmp_path / "solutions")
    (tmp_path / CATALOGUE_DIR).mkdir(parents=True)
    shutil.copy(REPO / CATALOGUE_DIR / f"{STEM}.po", tmp_path / CATALOGUE_DIR)
    return tmp_path


def edit_cell(course: Path, cell_id: str, new_source: str) -> str:
    path = course / "solutions" / f"{STEM}.ipynb"
    nb = nbformat.read(path, as_version=4)
    [cell] = [c for c in nb.cells if c.id == cell_id]
    old, cell.source = cell.source, new_source
    nbformat.write(nb, path)
    return old


def code_tokens(source: str) -> list[tuple[int, str]]:
    """The tokens of a code cell without comments and layout (IPython magics become plain lines)."""
    lines = [line if not line.lstrip().startswith(("%", "!")) else "" for line in source.splitlines()]
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
    stream = tokenize.generate_tokens(io.StringIO("\n".join(lines) + "\n").readline)
    return [(tok.type, tok.string) for tok in stream if tok.type not in skip]


def test_catalogues_exist_for_generated_notebooks_only():
    assert CATALOGUES, "chapter 1 has a catalogue"
    generated = sorted(p.stem for p in (REPO / "solutions" / "zh").glob(NOTEBOOK_GLOB))
    assert generated == [p.stem for p in CATALOGUES]
    assert sorted(p.stem for p in (REPO / "chapters" / "zh").glob(NOTEBOOK_GLOB)) == generated


def test_every_catalogued_cell_has_a_current_translation():
    untranslated, without = translation_status(REPO)
    assert untranslated == [], "\n".join(map(str, untranslated))
    assert STEM not in without


def test_noop_update_is_byte_stable(course):
    po = course / CATALOGUE_DIR / f"{STEM}.po"
    before = po.read_bytes()
    assert update(course, log=lambda _: None) == []
    assert po.read_bytes() == before


def test_changed_cell_becomes_fuzzy_with_previous_id(course):
    po = course / CATALOGUE_DIR / f"{STEM}.po"
    old_english = edit_cell(course, "why", "## 1. Why self-attention?\n\nA new first paragraph.")
    before = entries_by_cell(read_catalogue(po))
    assert update(course, log=lambda _: None) == [po]
    after = entries_by_cell(read_catalogue(po))
    why = after["why"]
    assert why.fuzzy and why.previous_id == [old_english] and why.string == before["why"].string
    for cell_id, message in after.items():  # the other entries are untouched
        if cell_id != "why":
            assert (message.id, message.string, message.fuzzy) == (before[cell_id].id, before[cell_id].string, False)
    text = po.read_bytes()
    assert update(course, log=lambda _: None) == [] and po.read_bytes() == text  # stable once updated
    edit_cell(course, "why", old_english)  # reverting the English restores the translation as it was
    update(course, log=lambda _: None)
    assert not entries_by_cell(read_catalogue(po))["why"].fuzzy


def test_new_cell_is_added_and_removed_cell_is_obsolete(course):
    path = course / "solutions" / f"{STEM}.ipynb"
    nb = nbformat.read(path, as_version=4)
    removed = next(c for c in nb.cells if c.id == "batch")
    nb.cells.remove(removed)
    nb.cells.insert(3, nbformat.v4.new_markdown_cell("A brand-new cell.", id="brand-new"))
    nbformat.write(nb, path)
    update(course, log=lambda _: None)
    catalog = read_catalogue(course / CATALOGUE_DIR / f"{STEM}.po")
    assert entries_by_cell(catalog)["brand-new"].string == ""
    assert "batch" not in entries_by_cell(catalog)
    assert [m.string for (_, ctx), m in catalog.obsolete.items() if ctx == "batch"] != [""]
    assert [cid for cid, _ in markdown_entries(nb)] == [m.context for m in catalog if m.id]  # notebook order


def test_sync_check_names_notebook_cell_and_first_words(course, capsys):
    edit_cell(course, "weakness", "### Its weakness, shown twice\n\nChanged.")
    assert i18n_main(["--root", str(course), "check"]) == 1
    out = capsys.readouterr().out
    assert "solutions/01_queries_keys_values.ipynb, cell 'weakness' (stale" in out
    assert "### Its weakness, shown twice" in out
    update(course, log=lambda _: None)
    assert i18n_main(["--root", str(course), "check"]) == 1
    assert "cell 'weakness' (fuzzy" in capsys.readouterr().out
    # the builder's --check fails on it too, and names the notebooks that have no catalogue yet
    shutil.copy(REPO / "solutions" / "02_scaled_dot_product_attention.ipynb", course / "solutions")
    assert build_main(["--check", "--root", str(course)]) == 1
    out = capsys.readouterr().out
    assert "cell 'weakness' (fuzzy" in out and "not yet translated: 02 " in out


def test_untranslated_cell_keeps_its_english_in_the_generated_notebook(course):
    edit_cell(course, "batch", "### The batch dimension\n\nNew English.")
    files = render(course)
    zh = nbformat.reads(files[course / "solutions" / "zh" / f"{STEM}.ipynb"], as_version=4)
    sources = {c.id: c.source for c in zh.cells}
    assert sources["batch"] == "### The batch dimension\n\nNew English."
    assert sources["why"].startswith("## 1. 为什么需要自注意力")


@pytest.mark.parametrize("po", CATALOGUES, ids=lambda p: p.stem)
def test_generated_notebooks_follow_source_and_catalogue(po):
    english = nbformat.read(REPO / "solutions" / f"{po.stem}.ipynb", as_version=4)
    zh = nbformat.read(REPO / "solutions" / "zh" / f"{po.stem}.ipynb", as_version=4)
    chapter = nbformat.read(REPO / "chapters" / "zh" / f"{po.stem}.ipynb", as_version=4)
    messages = entries_by_cell(read_catalogue(po))
    assert [(c.id, c.cell_type) for c in zh.cells] == [(c.id, c.cell_type) for c in english.cells]
    assert [c.id for c in chapter.cells] == [c.id for c in english.cells]
    assert zh.metadata["course"]["language"] == LOCALE == chapter.metadata["course"]["language"]
    assert zh.metadata["course"].get(EXECUTED_KEY) == code_digest(zh), "executed in Chinese, for this code"
    for en, cn, ch in zip(english.cells, zh.cells, chapter.cells):
        if SETUP_TAG in en.metadata.get("tags", []):
            assert cn.source == en.source.replace("utils.setup()", 'utils.setup(lang="zh")') == ch.source
            assert cn.source != en.source
        elif en.cell_type == "code":
            assert code_tokens(cn.source) == code_tokens(en.source), f"code cell {en.id} differs"
            assert ch.outputs == []
        elif en.source.strip() and en.id != english.cells[0].id:
            assert cn.source == messages[en.id].string == ch.source
    assert f"solutions/zh/{po.stem}.ipynb" in zh.cells[0].source
    assert f"chapters/zh/{po.stem}.ipynb" in chapter.cells[0].source


def test_code_tokens_ignore_comments_only():
    assert code_tokens("x = 1  # one\n") == code_tokens("x = 1  # 一\n")
    assert code_tokens("x = 1\n") != code_tokens("x = 2\n")
    assert code_tokens("s = 'a'\n") != code_tokens("s = '一'\n")


GLOSSARY = load_glossary(REPO / GLOSSARY_FILE)


def test_glossary_has_one_term_per_english_form():
    forms = [form.lower() for term in GLOSSARY for form in term.english]
    assert len(forms) == len(set(forms))
    assert {"查询", "键", "值", "注意力权重", "缩放点积注意力", "多头注意力", "位置编码", "掩码", "填充", "因果掩码",
            "层规范化", "残差连接", "前馈网络", "词元", "嵌入", "自注意力", "梯度"} <= {t.chinese for t in GLOSSARY}


@pytest.mark.parametrize("po", CATALOGUES, ids=lambda p: p.stem)
def test_translations_use_the_glossary_and_keep_formulas_code_links_numbers(po):
    problems = []
    for message in read_catalogue(po):
        if message.id and message.string:
            found = glossary_problems(message.id, message.string, GLOSSARY) + kept_problems(message.id, message.string)
            problems += [f"{message.context}: {p}" for p in found]
    assert problems == []


@pytest.mark.parametrize("po", CATALOGUES, ids=lambda p: p.stem)
def test_translations_keep_their_emphasis_rendered(po):
    """A bold label ending in Chinese punctuation and followed by a character shows its ``**``."""
    problems = [f"{m.context}: {p}" for m in read_catalogue(po) if m.id and m.string
                for p in markup_problems(m.id, m.string)]
    assert problems == []


def test_markup_check_catches_bold_that_does_not_close():
    assert markup_problems("**Myth check:** it", "**误区检验：**一篇") != []
    assert markup_problems("*it* is `a*b`", "*it* 是 `a*b`") == []
    assert markup_problems("$a*b$ and **x**", "$a*b$ 和 **x**") == []


AVOID = load_avoid(REPO / GLOSSARY_FILE)


@pytest.mark.parametrize("po", CATALOGUES, ids=lambda p: p.stem)
def test_translations_avoid_the_reviewed_drifts(po):
    """No calque or drift that the glossary's second table rules out (大小 for a dimension, 学到的 for a
    parameter, 遮住, LayerNorm where the prose term is 层规范化, 种子文章 ...)."""
    chapter = po.stem[:2].isdigit()
    problems = [f"{m.context}: {p}" for m in read_catalogue(po) if m.id and m.string
                for p in drift_problems(m.string, AVOID, chapter=chapter)]
    assert problems == []


@pytest.mark.parametrize(("chinese", "rule"), [
    ("每个词元得到一个大小为 E = `d_model` 的固定随机向量", "维度"),  # the review's P4
    ("嵌入大小", "维度"),
    ("D 是每个查询和键的大小", "维度"),
    ("让每个词元从三个学到的视角来呈现自己", "可学习的"),  # P5
    ("用学到的位置嵌入表示它们的位置", "可学习的"),
    ("被掩码遮住的键", "被屏蔽"),
    ("再做一次 LayerNorm", "层规范化"),  # P18
    ("不许使用现成的层", "请不要"),  # P17
    ("种子文章 000 的例子", "《五步拆解》"),  # P22
    ("你用 笔记本里的全局变量", "no space"),  # P21
    ("熵 2.02（最大 2.48 nats）", "奈特"),  # P12
])
def test_drift_check_catches_what_the_review_found(chinese, rule):
    found = drift_problems(chinese, AVOID, chapter=True)
    assert len(found) == 1 and rule in found[0], found


def test_drift_check_lets_the_right_terms_through():
    right = ("一个 E 维的固定随机向量；查询和键的维度；三个可学习的视角；模型学到的模式；被屏蔽的键；"
             "层规范化（LayerNorm），之后再做一次层规范化；请不要使用；《五步拆解》一文；笔记本里的变量；`nn.LayerNorm`")
    assert drift_problems(right, AVOID, chapter=True) == []
    assert drift_problems("LayerNorm 的权重", AVOID, chapter=False) == []  # a diagnosis may name the module


def test_glossary_check_catches_a_wrong_term():
    assert glossary_problems("Each token has a key.", "每个标记都有一个键。", GLOSSARY) == ["'token' must be 词元"]
    assert glossary_problems("see `tokens` and $key$", "见", GLOSSARY) == []


def test_build_guards_and_removes_generated_translations(course):
    from utils.builder.course import build
    from utils.notebook_files import BuildError

    build(course, log=lambda _: None)
    zh = course / "solutions" / "zh" / f"{STEM}.ipynb"
    chapter = course / "chapters" / "zh" / f"{STEM}.ipynb"
    assert zh.is_file() and chapter.is_file()
    assert build(course, log=lambda _: None) == []  # nothing to do the second time
    nb = nbformat.read(zh, as_version=4)
    nb.cells[2].source += "\n\nmy own note"
    nbformat.write(nb, zh)
    with pytest.raises(BuildError, match="solutions/zh/01_queries_keys_values.ipynb: was edited"):
        build(course, log=lambda _: None)
    build(course, force=True, log=lambda _: None)
    (course / CATALOGUE_DIR / f"{STEM}.po").unlink()
    build(course, log=lambda _: None)
    assert not zh.exists() and not chapter.exists()


def _mark_executed(path: Path, text: str) -> None:
    """Give every code cell of the Chinese notebook at ``path`` the output ``text``, as if executed."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
    nb.metadata["course"][EXECUTED_KEY] = code_digest(nb)
    nbformat.write(nb, path)


def test_outputs_of_a_chinese_run_are_kept_until_the_code_changes(course):
    from utils.builder.course import build

    build(course, log=lambda _: None)
    zh = course / "solutions" / "zh" / f"{STEM}.ipynb"
    problems, _ = translation_status(course)
    assert [p.cell_id for p in problems] == ["(all code cells)"], "not executed in Chinese yet"
    _mark_executed(zh, "中文输出\n")
    assert build(course, log=lambda _: None) == [] and translation_status(course)[0] == []
    kept = nbformat.read(zh, as_version=4)
    assert all(c.outputs[0].text == "中文输出\n" for c in kept.cells if c.cell_type == "code")
    # the English code changes: the Chinese outputs belong to other code, so they go, and the check says so
    path = course / "solutions" / f"{STEM}.ipynb"
    nb = nbformat.read(path, as_version=4)
    [cell] = [c for c in nb.cells if c.cell_type == "code" and SETUP_TAG not in c.metadata.get("tags", [])][:1]
    cell.source += "\nprint('new')"
    nbformat.write(nb, path)
    build(course, log=lambda _: None)
    fresh = nbformat.read(zh, as_version=4)
    assert EXECUTED_KEY not in fresh.metadata["course"]
    assert not any(o.get("text") == "中文输出\n" for c in fresh.cells if c.cell_type == "code" for o in c.outputs)
    problems, _ = translation_status(course)
    assert [p.cell_id for p in problems] == ["(all code cells)"]
    assert "--execute solutions/zh/01_queries_keys_values.ipynb" in problems[0].reason


def test_a_chinese_run_keeps_its_own_widget_state_not_the_english_one(course):
    """The saved explorer widgets (what a static viewer and the HTML edition show) belong to the run that
    made the outputs: Chinese labels with the Chinese outputs, never the English solution's."""
    from utils.builder.course import build

    state = "application/vnd.jupyter.widget-state+json"
    path = course / "solutions" / f"{STEM}.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.metadata["widgets"] = {state: {"state": {"m1": {"state": {"description": "step"}}}}}
    nbformat.write(nb, path)
    build(course, log=lambda _: None)
    zh = course / "solutions" / "zh" / f"{STEM}.ipynb"
    _mark_executed(zh, "中文输出\n")
    ran = nbformat.read(zh, as_version=4)
    ran.metadata["widgets"] = {state: {"state": {"m2": {"state": {"description": "步"}}}}}
    nbformat.write(ran, zh)
    build(course, log=lambda _: None)
    kept = nbformat.read(zh, as_version=4)
    assert kept.metadata["widgets"][state]["state"] == {"m2": {"state": {"description": "步"}}}
    del ran.metadata["widgets"]  # a Chinese run that saved no widgets shows none, not the English ones
    nbformat.write(ran, zh)
    build(course, log=lambda _: None)
    assert "widgets" not in nbformat.read(zh, as_version=4).metadata


def test_executing_a_translation_needs_its_catalogue(course):
    from utils.builder.execution import execute
    from utils.notebook_files import BuildError

    (course / "solutions" / "zh").mkdir()
    (course / CATALOGUE_DIR / f"{STEM}.po").unlink()
    with pytest.raises(BuildError, match="no English solution with a catalogue"):
        execute([course / "solutions" / "zh" / f"{STEM}.ipynb"], course)
