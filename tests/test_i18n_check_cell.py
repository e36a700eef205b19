"""What a learner reads from a check cell, and chapters 1-2's explorers and figures, in Chinese: every
message is translated when shown, and the English stays byte for byte what it was."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import torch
from i18n_support import english_by_default  # noqa: F401  (autouse: every test starts in English)

from utils.exercises import credit
from utils.exercises.check_cell import run_check
from utils.exercises.judging import category_text
from utils.exercises.registry import all_exercises
from utils.i18n.messages import translate, using_language


def _exercise(exercise_id):
    return all_exercises()[exercise_id]


def _mistake(exercise, name):
    return next(m for m in exercise.mistakes if m.name == name)


def test_a_diagnosis_is_shown_in_chinese_with_chinese_framing(capsys):
    exercise = _exercise("ch1.project_qkv")
    mistake = _mistake(exercise, "transposed_weight")
    with using_language("zh"):
        chinese = translate(mistake.diagnosis)
        verdict = run_check(exercise, mistake.fn)
    assert chinese != mistake.diagnosis and "“用 `nn.Linear` 做同样的投影”" in chinese
    assert verdict.line.startswith(f"❌ {chinese}（用例 1/") and capsys.readouterr().out.strip() == verdict.line


def test_english_lines_are_unchanged(capsys):
    exercise = _exercise("ch1.project_qkv")
    mistake = _mistake(exercise, "transposed_weight")
    verdict = run_check(exercise, mistake.fn)
    assert verdict.line.startswith(f"❌ {mistake.diagnosis} (case 1 of 6: x(")
    passed = run_check(exercise, exercise.reference)
    assert passed.line == "✅ project_qkv: all 6 public cases pass (the grader also runs hidden cases)"
    wrong = run_check(exercise, lambda x, w_q, w_k, w_v: (x @ w_q * 1.5, x @ w_k, x @ w_v))
    assert wrong.line.startswith("❌ output[0] differs from the reference: max abs error ")
    assert f"). Hint: {exercise.hint}" in wrong.line


def test_the_hint_and_a_generic_mismatch_in_chinese():
    exercise = _exercise("ch1.project_qkv")
    with using_language("zh"):
        wrong = run_check(exercise, lambda x, w_q, w_k, w_v: (x, x), quiet=True)
        hint = translate(exercise.hint)
    assert wrong.line.startswith("❌ 输出应该是长度为 3 的元组，但得到的是长度为 2 的元组（用例 1/6：")
    assert wrong.line.endswith(f"）。提示：{hint}") and hint != exercise.hint


def test_hidden_cases_name_parts_and_categories_in_chinese():
    exercise = _exercise("ch1.project_qkv")
    mistake = _mistake(exercise, "transposed_weight")
    with using_language("zh"):
        line = run_check(exercise, mistake.fn, cases="hidden", quiet=True).line
        part = translate(exercise.parts[0].name)
    assert "个隐藏用例中通过了" in line and part in line and part != exercise.parts[0].name
    assert "（数值、出错）" in line or "（数值）" in line, line


def test_not_attempted_forbidden_and_statuses_in_chinese():
    exercise = _exercise("ch2.scaled_dot_product_attention")

    def stub(q, k, v, mask=None):
        raise NotImplementedError

    def uses_torch(q, k, v, mask=None):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v), None

    with using_language("zh"):
        not_attempted = run_check(exercise, stub, quiet=True).line
        forbidden = run_check(exercise, uses_torch, quiet=True).line
        assert credit.part_text("all cases") == "全部用例" and credit.status_text("timeout") == "超时"
        assert category_text("gradients") == "梯度"
    assert not_attempted == "❌ 还没有实现：把 `raise NotImplementedError` 换成你的代码"
    assert forbidden.startswith("❌ 你的函数用到了 ") and "这道练习要求你自己实现它" in forbidden
    assert credit.part_text("all cases") == "all cases" and category_text("gradients") == "gradients"


def test_credit_reasons_in_chinese():
    exercise = _exercise("ch2.causal_mask")
    mistake = _mistake(exercise, "future")
    cases = exercise.public_cases() + exercise.hidden_cases(7)
    from utils.exercises.runner import run_cases

    outcomes = run_cases(mistake.fn, cases)
    n_public = len(exercise.public_cases())
    english = credit.credit_for(exercise, cases, outcomes, n_public).reason("public")
    with using_language("zh"):
        chinese = credit.credit_for(exercise, cases, outcomes, n_public).reason("public")
    assert english.startswith(f"all cases: {mistake.diagnosis} (case 1 of 4: size=")
    assert english.endswith("; hidden cases: 1 of 5 pass (values)"), english
    with using_language("zh"):
        diagnosis = translate(mistake.diagnosis)
    assert chinese.startswith(f"全部用例：{diagnosis}（用例 1/4：size=") and diagnosis != mistake.diagnosis
    assert chinese.endswith("；隐藏用例：5 个中通过了 1 个（数值）"), chinese


def test_chapter_1_and_2_figures_and_explorers_in_chinese():
    from utils.explorers.sdpa import mask_polarity_state, scale_explorer_state
    from utils.plotting.qkv import query_scores_figure
    from utils.plotting.sdpa import mask_polarity_figure, scale_explorer_figure
    from utils.widgets.qkv import ch1_quiz
    from utils.widgets.sdpa import ch2_quiz

    scores = torch.tensor([[2.0, 1.0], [1.0, 3.0]])
    with using_language("zh"):
        fig = query_scores_figure(["a", "b"], scores, 1)
        state = mask_polarity_state("causal", "mha")
        scale = scale_explorer_figure(scale_explorer_state(64, 1.0, True))
        polarity = mask_polarity_figure(state)
        quizzes = ch1_quiz(), ch2_quiz()
    assert fig.axes[0].get_title() == "查询 'b' 的分数（第 1 行）" and fig.axes[0].get_xlabel() == "键词元 (S)"
    assert scale.axes[1].get_ylabel() == "权重" and "温度" in scale._suptitle.get_text()
    assert "看不到任何键的查询" in state.summary and "橙色虚线：填充的查询行" in polarity._suptitle.get_text()
    assert [q.title for q in quizzes] == ["第 1 章测验", "第 2 章测验"]
    plt.close("all")
    english = mask_polarity_state("causal", "mha").summary
    assert english.endswith("queries that see no key: 1 of 6; NaN rows: 1"), english  # no "1 rows"


def test_chapter_1_scores_title_is_measured_on_the_scores_and_comes_from_the_catalogue():
    """The default title states what the scores show, so it stays true whatever scores it is given: the
    identity is mirror-symmetric with its diagonal highest; chapter 1's projected scores are neither."""
    from utils.plotting.qkv import scores_figure

    def title(scores):
        return scores_figure(["a", "b", "c"], scores).axes[0].get_title()

    lopsided = torch.tensor([[0.0, 2.0, 1.0], [0.5, 3.0, 0.0], [1.0, 0.0, -1.0]])
    assert title(torch.eye(3)) == "Q Kᵀ: mirror-symmetric; a query's own key scores highest in 3 of 3 rows"
    assert title(lopsided) == "Q Kᵀ: not mirror-symmetric; a query's own key scores highest in 1 of 3 rows"
    with using_language("zh"):
        assert title(torch.eye(3)) == "Q Kᵀ：镜像对称；3 行中有 3 行的最高分数落在查询自己的键上"
        assert title(lopsided) == "Q Kᵀ：不镜像对称；3 行中有 1 行的最高分数落在查询自己的键上"
    assert scores_figure(["a", "b"], torch.eye(2), title="t").axes[0].get_title() == "t"
    plt.close("all")
