"""The grader grades a Chinese submission exactly as the English one, and writes Chinese feedback with
``--lang zh`` (issue 20)."""

from __future__ import annotations

import csv
from pathlib import Path

import grader_fixtures as gf
import nbformat
import pytest

from utils.exercises import all_exercises
from utils.grading import batch, cli
from utils.i18n.messages import translate, using_language

pytestmark = pytest.mark.sandbox  # grades batches in sandboxed workers: make unit, not make quick

REPO = Path(__file__).resolve().parent.parent
STEM = "01_queries_keys_values"
TRANSPOSED = "ch1.project_qkv"


def _with_transposed_weights(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The Chinese solution with ch1.project_qkv multiplying by the transposed weights (a listed Mistake)."""
    wrong = nbformat.from_dict(nb)
    [cell] = [c for c in wrong.cells if c.get("metadata", {}).get("course", {}).get("exercise") == TRANSPOSED]
    cell.source = cell.source.replace("x @ w_q ", "x @ w_q.T ").replace("x @ w_k ", "x @ w_k.T ").replace(
        "x @ w_v ", "x @ w_v.T ")
    assert cell.source.count(".T ") == 3
    return wrong


def _rows(out: Path) -> dict[tuple[str, str, str], dict[str, str]]:
    """``results.csv`` by (student, exercise, part), chapter 1's exercises only (the others are missing)."""
    with open(out / "results.csv", encoding="utf-8", newline="") as handle:
        return {(r["student"], r["exercise"], r["part"]): r for r in csv.DictReader(handle)
                if r["exercise"].startswith("ch1.")}


@pytest.fixture(scope="module")
def chinese_batch(tmp_path_factory):
    english = nbformat.read(REPO / "solutions" / f"{STEM}.ipynb", as_version=4)
    chinese = nbformat.read(REPO / "solutions" / "zh" / f"{STEM}.ipynb", as_version=4)
    tmp = tmp_path_factory.mktemp("lang")
    subs = tmp / "subs"
    gf.student(subs, "en", {f"{STEM}.ipynb": english})
    gf.student(subs, "zh", {f"{STEM}.ipynb": chinese})
    gf.student(subs, "zh_wrong", {f"{STEM}.ipynb": _with_transposed_weights(chinese)})
    gf.student(subs, "zh_untouched", {f"{STEM}.ipynb": nbformat.read(REPO / "chapters" / "zh" / f"{STEM}.ipynb",
                                                                       as_version=4)})
    summary = batch.grade(subs, tmp / "out", jobs=2, timeout=20, seed=5, progress=False, lang="zh")
    return tmp / "out", summary


@pytest.mark.slow
def test_a_chinese_submission_gets_the_same_ids_points_and_statuses(chinese_batch):
    rows = _rows(chinese_batch[0])
    english = {key[1:]: (r["points"], r["max_points"], r["status"]) for key, r in rows.items() if key[0] == "en"}
    chinese = {key[1:]: (r["points"], r["max_points"], r["status"]) for key, r in rows.items() if key[0] == "zh"}
    assert english and english == chinese
    assert all(status == "passed" and points == maximum for points, maximum, status in chinese.values())
    untouched = {key[1:]: r["status"] for key, r in rows.items() if key[0] == "zh_untouched"}
    assert set(untouched) == set(english) and set(untouched.values()) == {"not attempted"}


@pytest.mark.slow
def test_feedback_is_chinese_with_lang_zh(chinese_batch):
    out = chinese_batch[0]
    mistake = next(m for m in all_exercises()[TRANSPOSED].mistakes if m.name == "transposed_weight")
    with using_language("zh"):
        diagnosis = translate(mistake.diagnosis)
    assert diagnosis != mistake.diagnosis, "the diagnosis has its Chinese in utils/i18n/locale/zh_CN/"
    wrong = [r for key, r in _rows(out).items() if key[0] == "zh_wrong" and key[1] == TRANSPOSED]
    # square weights give a wrong value (failed), (E, D) ones a shape error (error): both 0 points
    assert wrong and all(r["status"] in ("failed", "error") and r["points"] == "0" for r in wrong)
    assert any(diagnosis[:30] in r["feedback"] for r in wrong), wrong[0]["feedback"]
    text = (out / "feedback" / "zh_wrong.md").read_text(encoding="utf-8")
    assert "# zh_wrong 的反馈" in text and "**总分：" in text and "| 练习 | 得分 | 状态 | 下一步怎么做 |" in text
    assert "❌ 未通过" in text, "the status is shown in Chinese (the CSVs keep 'failed')"


def test_a_wrong_language_is_refused_before_grading(tmp_path, capsys):
    with pytest.raises(SystemExit):
        cli.main([str(tmp_path), "--lang", "fr"])
    assert "--lang" in capsys.readouterr().err
    with pytest.raises(ValueError, match="lang='fr'"):
        batch.grade(tmp_path, tmp_path / "out", lang="fr", progress=False)
