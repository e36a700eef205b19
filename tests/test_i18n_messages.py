"""The message catalogue: what a learner reads outside the prose, in English or Chinese."""

from __future__ import annotations

import re
import shutil

import pytest
from i18n_support import english_by_default  # noqa: F401  (autouse: every test starts in English)

from utils.i18n import messages
from utils.i18n.catalog import catalogue_text, read_catalogue
from utils.i18n.extract import all_messages, marked_source
from utils.i18n.message_catalog import message_catalogue_path, message_status, updated_domain
from utils.i18n.messages import LANG_ENV, current_language, set_language, tr, translate, using_language
from utils.i18n.pofile import read_entries

LOCALE_FILES = sorted((messages.LOCALE_DIR / "zh_CN").glob("*.po"))


@pytest.fixture
def scratch_locale(tmp_path, monkeypatch):
    """A locale folder of our own holding one catalogue, read instead of the package's."""
    (tmp_path / "zh_CN").mkdir()
    (tmp_path / "zh_CN" / "demo.po").write_text(
        'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=utf-8\\n"\n\n'
        'msgid "{n} heads"\nmsgstr "{n} 个头"\n\n'
        '#, fuzzy\nmsgid "old news"\nmsgstr "旧闻"\n\n'
        'msgctxt "ch1.f:mistake:x"\nmsgid "you forgot the scale"\nmsgstr "你忘了缩放"\n', encoding="utf-8")
    monkeypatch.setattr(messages, "LOCALE_DIR", tmp_path)
    messages.message_table.cache_clear()
    yield tmp_path
    messages.message_table.cache_clear()


def test_english_is_the_default_and_the_source(scratch_locale):
    assert current_language() == "en"
    assert tr("{n} heads", n=4) == "4 heads" and translate("you forgot the scale") == "you forgot the scale"


def test_setup_cell_language_then_environment(scratch_locale, monkeypatch):
    set_language("zh-CN")
    assert tr("{n} heads", n=4) == "4 个头" and translate("you forgot the scale") == "你忘了缩放"
    assert translate("old news") == "old news", "a fuzzy translation is not used"
    assert translate("never translated") == "never translated"
    set_language(None)
    monkeypatch.setenv(LANG_ENV, "zh")
    assert current_language() == "zh"
    with using_language("en"):
        assert tr("{n} heads", n=2) == "2 heads"
    assert current_language() == "zh"


def test_setup_chooses_the_language(monkeypatch):
    import utils

    utils.setup(device="cpu", lang="zh")
    assert current_language() == "zh"
    utils.setup(device="cpu")
    assert current_language() == "en"


def test_a_wrong_language_names_the_argument_or_the_variable(monkeypatch):
    with pytest.raises(ValueError, match="lang='fr' is not a course language"):
        set_language("fr")
    monkeypatch.setenv(LANG_ENV, "klingon")
    with pytest.raises(ValueError, match="COURSE_LANG='klingon'"):
        current_language()


def test_unreadable_marks_are_reported_with_their_line():
    found, problems = marked_source('a = tr("ok {x}", x=1)\nb = tr(f"no {a}")\nc = obj.tr(name)\nd = tr("")\n', "w")
    assert [m.msgid for m in found] == ["ok {x}"] and found[0].formatted
    assert [p.line for p in problems] == [2, 3, 4]
    assert "string literal" in problems[0].reason


def test_every_tr_call_in_the_package_is_readable():
    _, problems = all_messages()
    assert problems == [], "\n".join(map(str, problems))


def test_every_message_has_a_current_chinese_translation():
    problems, _ = message_status()
    assert problems == [], f"{len(problems)} messages lack Chinese, e.g.\n" + "\n".join(map(str, problems[:15]))


def test_every_exercise_message_is_in_the_catalogues():
    by_domain, _ = all_messages()
    diagnoses = [m for ms in by_domain.values() for m in ms if m.context and ":mistake:" in m.context]
    assert len(diagnoses) > 250, "every Mistake of every exercise is a message"
    for domain in by_domain:
        assert message_catalogue_path(domain).is_file(), f"{domain} has no catalogue: python -m utils.i18n update"


@pytest.mark.parametrize("po", LOCALE_FILES, ids=lambda p: p.stem)
def test_run_time_reader_agrees_with_babel(po):
    babel = {(m.context, m.id): (m.string, m.fuzzy) for m in read_catalogue(po) if m.id}
    ours = {(e.context, e.msgid): (e.msgstr, e.fuzzy) for e in read_entries(po)}
    assert ours == babel


def _catalogue(tmp_path, domain, msgs):
    """Write ``updated_domain`` of ``msgs`` for a scratch domain and read it back."""
    path = tmp_path / f"{domain}.po"
    old = read_catalogue(path) if path.is_file() else None
    path.write_text(catalogue_text(updated_domain(old, domain, msgs)), encoding="utf-8")
    return path


def test_update_keeps_translations_and_marks_changes_fuzzy(tmp_path):
    from utils.i18n.extract import MarkedMessage as M

    first = [M("d", None, "Scores of the query {q}", "utils/d.py", True), M("d", None, "Keys", "utils/d.py"),
             M("d", "ch1.f:mistake:a", "you forgot the scale", "utils/d.py")]
    path = _catalogue(tmp_path, "d", first)
    text = path.read_text(encoding="utf-8")
    translated = text
    for english, chinese in {"Keys": "键", "Scores of the query {q}": "查询 {q} 的分数",
                             "you forgot the scale": "你忘了缩放"}.items():
        translated = translated.replace(f'msgid "{english}"\nmsgstr ""', f'msgid "{english}"\nmsgstr "{chinese}"')
    path.write_text(translated, encoding="utf-8")
    again = _catalogue(tmp_path, "d", first)
    assert again.read_text(encoding="utf-8") == translated, "an update with nothing to do writes the same bytes"
    second = [M("d", None, "Scores of the query {q}!", "utils/d.py", True),
              M("d", "ch1.f:mistake:a", "you forgot to scale by 1/sqrt(D)", "utils/d.py")]
    path = _catalogue(tmp_path, "d", second)
    catalog = read_catalogue(path)
    changed = catalog.get("Scores of the query {q}!")
    assert changed.string == "查询 {q} 的分数" and changed.fuzzy and changed.previous_id == ["Scores of the query {q}"]
    diagnosis = catalog.get("you forgot to scale by 1/sqrt(D)", context="ch1.f:mistake:a")
    assert diagnosis.fuzzy and diagnosis.previous_id == ["you forgot the scale"]
    assert [m.id for m in catalog.obsolete.values()] == ["Keys"], "a removed message's Chinese is kept, obsolete"
    assert "python-brace-format" in changed.flags


def test_check_catches_a_field_the_translation_lost(tmp_path, monkeypatch):
    from utils.i18n import message_catalog

    domain = "widgets.qkv"
    real = message_catalogue_path(domain)
    if not real.is_file():
        pytest.skip("no widgets.qkv catalogue yet")
    locale = tmp_path / "locale"
    shutil.copytree(messages.LOCALE_DIR, locale)
    path = message_catalogue_path(domain, locale)
    catalog = read_catalogue(path)
    formatted = [m for m in catalog if m.id and "python-brace-format" in m.flags and m.string]
    if not formatted:
        pytest.skip("no translated template in widgets.qkv yet")
    formatted[0].string = "没有字段"
    path.write_text(catalogue_text(catalog), encoding="utf-8")
    problems, _ = message_catalog.message_status(locale)
    assert any("fields differ" in p.reason for p in problems)


@pytest.mark.parametrize("po", LOCALE_FILES, ids=lambda p: p.stem)
def test_messages_use_the_glossary_and_keep_code_and_numbers(po):
    from utils.i18n.glossary import GLOSSARY_FILE, glossary_problems, kept_problems, load_glossary
    from utils.paths import REPO_ROOT

    terms = load_glossary(REPO_ROOT / GLOSSARY_FILE)

    def words(text: str) -> str:  # a {field}'s name is code, not an English word to translate
        return re.sub(r"\{[^{}]*\}", "{}", text)

    problems = [f"{m.context or m.id[:40]}: {p}" for m in read_catalogue(po) if m.id and m.string
                for p in glossary_problems(words(m.id), words(m.string), terms) + kept_problems(m.id, m.string)]
    assert problems == []


@pytest.mark.parametrize("po", LOCALE_FILES, ids=lambda p: p.stem)
def test_messages_avoid_the_reviewed_drifts(po):
    from utils.i18n.glossary import GLOSSARY_FILE, drift_problems, load_avoid
    from utils.paths import REPO_ROOT

    rules = load_avoid(REPO_ROOT / GLOSSARY_FILE)
    problems = [f"{m.context or m.id[:40]}: {p}" for m in read_catalogue(po) if m.id and m.string
                for p in drift_problems(m.string, rules, chapter=False)]
    assert problems == []


def test_one_english_message_has_one_chinese_translation():
    """The run-time table is keyed by the English alone: two catalogues must agree on a shared message."""
    seen: dict[str, dict[str, list[str]]] = {}
    for po in LOCALE_FILES:
        for entry in read_entries(po):
            if entry.msgstr and not entry.fuzzy:
                seen.setdefault(entry.msgid, {}).setdefault(entry.msgstr, []).append(po.stem)
    conflicts = {english: chinese for english, chinese in seen.items() if len(chinese) > 1}
    assert conflicts == {}


@pytest.mark.slow
def test_the_wheel_ships_every_message_catalogue(course_wheel):
    """A pip-installed course (Colab, the grader) speaks Chinese too: the catalogues are package data."""
    import zipfile

    with zipfile.ZipFile(course_wheel) as archive:
        shipped = {name for name in archive.namelist() if name.startswith("utils/i18n/locale/")}
        assert shipped == {f"utils/i18n/locale/zh_CN/{po.name}" for po in LOCALE_FILES}
        assert all(archive.read(f"utils/i18n/locale/zh_CN/{po.name}") == po.read_bytes() for po in LOCALE_FILES)
