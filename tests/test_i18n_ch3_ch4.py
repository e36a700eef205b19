"""Chapters 3 and 4 in Chinese: explorers, quizzes, figures and check-cell messages come from the message
catalogue when the language is Chinese, and stay exactly as before in English."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest
import torch
from i18n_support import HAN, english_by_default  # noqa: F401  (autouse: every test starts in English)

from utils.exercises import get
from utils.explorers.multihead import head_explorer_state
from utils.explorers.positional import ENCODING_KINDS, positional_explorer_state
from utils.i18n.messages import translate, using_language
from utils.plotting import common as plot_common
from utils.plotting import multihead as plot_heads
from utils.plotting import positional as plot_positions
from utils.positional import sinusoidal_encoding
from utils.widgets.multihead import ch3_quiz, head_explorer
from utils.widgets.positional import ch4_quiz, positional_explorer
from utils.widgets.quiz import Choice, Numeric, Quiz

# Rendering Chinese without a CJK font warns per glyph; whether the glyphs render is the font's test, not this one.
pytestmark = pytest.mark.filterwarnings("ignore:Glyph .* missing from font")


def _texts(fig) -> list[str]:
    """Every title, axis label and suptitle of ``fig`` that is not empty."""
    texts = [t for ax in fig.axes for t in (ax.get_title(), ax.get_xlabel(), ax.get_ylabel())]
    if fig._suptitle is not None:
        texts.append(fig._suptitle.get_text())
    return [t for t in texts if t]


def test_head_explorer_speaks_chinese_and_english_is_unchanged():
    with using_language("zh"):
        box = head_explorer()
        assert [c.description for c in box.controls.values()] == ["头数 H", "头", "查询词元"]
        assert box.children[1].value == "E = 12，H = 3，D = 4：词元 'apple' 在头 1 中：最关注键 'eats'"
        assert head_explorer_state(6, head=1, token=5).preference == "均匀分布：没有偏好"
    box = head_explorer()
    assert [c.description for c in box.controls.values()] == ["heads H", "head", "query token"]
    assert box.children[1].value == "E = 12, H = 3, D = 4: 'apple' in head 1: attends most to 'eats'"
    assert head_explorer_state(6, head=1, token=5).preference == "uniform: no preference"
    assert head_explorer_state(1, head=0, token=5).preference == "attends most, equally, to 'eats' and 'red'"


def test_positional_explorer_speaks_chinese_and_english_is_unchanged():
    with using_language("zh"):
        box = positional_explorer()
        assert [c.description for c in box.controls.values()] == ["编码", "位置 p", "维度 j"]
        assert [label for label, _ in box.controls["kind"].options] == ["正弦", "可学习（随机初始化）", "RoPE"]
        state = positional_explorer_state("learned", 5, 2, length=8, d_model=4)
        assert state.label == "可学习（随机初始化）"
        assert state.similarity_title == "与 p = 5 的相似度\n（随 p 的移动而变化）"
    box = positional_explorer()
    assert [label for label, _ in box.controls["kind"].options] == list(ENCODING_KINDS.values())
    state = positional_explorer_state("rope", 5, 2, length=8, d_model=4)
    assert state.label == "RoPE"
    assert state.similarity_title == "query at p = 5 against keys at n\n(same shape wherever p is)"


def test_quiz_chrome_in_both_languages():
    question = Numeric("n?", answer=8, hint="h")
    choice = Choice("c?", ["a", "b"], answer=1)
    with using_language("zh"):
        quiz = Quiz([question])
        assert (quiz.title, quiz.controls[0]["check"].description) == ("小测验", "检查")
        assert quiz.controls[0]["picker"].placeholder == "输入一个数"
        assert question.grade("x") == (False, "'x' 不是一个数值。")
        assert question.grade(9) == (False, "太大了。h") and question.grade(8) == (True, "正确。")
        assert choice.grade(None) == (False, "请先选一个答案。") and choice.grade(0) == (False, "不太对。")
    quiz = Quiz([question])
    assert (quiz.title, quiz.controls[0]["check"].description) == ("Quick quiz", "Check")
    assert question.grade(7) == (False, "Too low. h") and Numeric("n?", answer=8).grade(7) == (False, "Too low.")
    assert choice.grade(None) == (False, "Pick an answer first.") and choice.grade(1) == (True, "Correct.")


_CODE_OPTIONS = {"(N, 8, L, L)", "(N, L, L)", "(8, L, L)", "(N, L, 512)", "sqrt(512)", "sqrt(64)", "sqrt(8)", "64",
                 "PE(p + k) = PE(p) + PE(k)."}


@pytest.mark.parametrize("make", [ch3_quiz, ch4_quiz])
def test_every_quiz_text_is_chinese_except_code_options(make):
    english = make()
    with using_language("zh"):
        chinese = make()
    assert HAN.search(chinese.title) and not HAN.search(english.title)
    for en, zh in zip(english.questions, chinese.questions):
        prose = [(en.question, zh.question), (en.explanation, zh.explanation)]
        if isinstance(en, Choice):
            prose += list(zip(en.feedback, zh.feedback))
            prose += [(a, b) for a, b in zip(en.options, zh.options) if a not in _CODE_OPTIONS]
            assert [b for a, b in zip(en.options, zh.options) if a in _CODE_OPTIONS] == [
                a for a in en.options if a in _CODE_OPTIONS]
        else:
            prose.append((en.hint, zh.hint))
        for en_text, zh_text in prose:
            assert HAN.search(zh_text) and not HAN.search(en_text), en_text
        assert zh.answer == en.answer


def _figures():
    weights = head_explorer_state(3).weights
    tokens = head_explorer_state(3).tokens
    table = sinusoidal_encoding(32, 8)
    return {
        "head_split": lambda: plot_heads.head_split_figure(torch.arange(12.0), 3, token="apple"),
        "head_maps": lambda: plot_heads.head_maps_figure(weights, tokens),
        "head_token": lambda: plot_heads.head_token_figure(weights, tokens, 1, 5),
        "head_similarity": lambda: plot_heads.head_similarity_figure(torch.eye(3)),
        "speed": lambda: plot_heads.speed_ratio_figure(
            [{"name": "a", "mode": "forward", "ratio": 1.1, "ratio_min": 1.0, "ratio_max": 1.2}]),
        "encoding_heatmap": lambda: plot_positions.encoding_heatmap(table),
        "encoding_curves": lambda: plot_positions.encoding_curves(table, [0, 1]),
        "wavelength": lambda: plot_positions.wavelength_plot(16),
        "similarity": lambda: plot_positions.similarity_figure(table, position=5),
        "explorer": lambda: plot_positions.positional_explorer_figure(positional_explorer_state("learned", 5, 0)),
        "heatmap": lambda: plot_common.attention_heatmap(torch.eye(3), list("abc")),
        "grid": lambda: plot_common.attention_grid(torch.rand(2, 2, 3, 3).softmax(-1), list("abc")),
    }


_FORMULAS = {"PE[p, j]", "PE(p)·PE(q)"}  # axis labels that are formulas, the same in every language


@pytest.mark.parametrize("name", sorted(_figures()))
def test_every_figure_text_is_chinese(name):
    english = _texts(_figures()[name]())
    with using_language("zh"):
        chinese = _texts(_figures()[name]())
    assert len(chinese) == len(english)
    for en, zh in zip(english, chinese):
        if en in _FORMULAS:
            assert zh == en
        else:
            assert HAN.search(zh) and not HAN.search(en), (en, zh)


def test_figure_defaults_stay_english_and_explicit_titles_are_kept():
    fig = plot_common.attention_heatmap(torch.eye(2), ["a", "b"])
    assert _texts(fig) == ["Attention weights", "key (attended to)", "query (attending)"]
    fig = plot_common.attention_grid(torch.rand(1, 2, 2, 2).softmax(-1))
    assert [ax.get_title() for ax in fig.axes] == ["Layer 1, Head 1", "Layer 1, Head 2"]
    fig = plot_common.attention_grid(torch.rand(1, 1, 2, 2).softmax(-1), row_label="Block", col_label="Map")
    assert fig.axes[0].get_title() == "Block 1, Map 1"
    with using_language("zh"):
        fig = plot_common.attention_heatmap(torch.eye(2), ["a", "b"], title="mine", xlabel="x", ylabel="y")
        assert _texts(fig) == ["mine", "x", "y"]
        assert plot_heads.head_similarity_figure(torch.eye(2), metric="cosine").axes[0].get_title().startswith(
            "头之间的相似度（cosine）")


def test_kernel_note_follows_the_language():
    import ipywidgets as w

    from utils.widgets.common import KERNEL_NOTE, wire_explorer

    def draw(_state):
        return plt.subplots()[0]

    text = w.Text(value="a")
    with using_language("zh"):
        box = wire_explorer([text], {"t": text}, lambda: text.value, draw, grid={"t": ["a"]})
        assert box.kernel_note == "要自己输入需要内核：请在 Binder 或 Colab 中打开本章。"
    assert wire_explorer([text], {"t": text}, lambda: text.value, draw).kernel_note == KERNEL_NOTE


@pytest.mark.parametrize("exercise_id", ["ch3.split_heads", "ch3.merge_heads", "ch3.multi_head_attention",
                                         "ch4.sinusoidal_encoding", "ch4.relative_shift_matrix",
                                         "ch4.add_positional_encoding"])
def test_every_diagnosis_hint_and_part_has_chinese(exercise_id):
    exercise = get(exercise_id)
    texts = [exercise.hint] + [m.diagnosis for m in exercise.mistakes]
    texts += [p.name for p in exercise.parts if p.name != "float16"]
    with using_language("zh"):
        for text in texts:
            assert HAN.search(translate(text)), text


def test_chapter_3_head_maps_title_is_built_from_the_links_in_the_learners_language():
    weights, tokens = head_explorer_state(3).weights, head_explorer_state(3).tokens
    links = ["eats-apple", "red-apple", "girl-eats"]
    english = plot_heads.head_maps_figure(weights, tokens, links=links)._suptitle.get_text()
    assert english == "H = 3: head 1 links eats-apple, head 2 red-apple, head 3 girl-eats"  # the stored figure's
    with using_language("zh"):
        chinese = plot_heads.head_maps_figure(weights, tokens, links=links)._suptitle.get_text()
    assert chinese == "H = 3：头 1 连接 eats-apple，头 2 连接 red-apple，头 3 连接 girl-eats"
    with pytest.raises(ValueError, match=r"links: got 2 pairs for H = 3 heads"):
        plot_heads.head_maps_figure(weights, tokens, links=links[:2])


def test_chapter_3_benchmark_table_in_both_languages():
    from utils.benchmark.attention import format_attention_table

    rows = [{"name": "fast path", "mode": "forward+backward", "baseline": "nn.MultiheadAttention", "ratio": 0.8,
             "ratio_min": 0.7, "ratio_max": 0.9, "baseline_ms": 3.0, "repeats": 5}]
    english = format_attention_table(rows).splitlines()
    assert english[0].split() == ["implementation", "mode", "vs", "built-in", "ratio", "(median)", "spread",
                                  "(min-max)", "built-in", "median", "reps", "reading"]
    assert english[1].split()[:3] == ["fast", "path", "forward+backward"] and english[1].endswith("faster")
    with using_language("zh"):
        chinese = format_attention_table(rows).splitlines()
    assert chinese[0].split() == ["实现", "模式", "对比的内置实现", "比值（中位数）", "波动范围（最小-最大）",
                                  "内置实现的中位数", "重复次数", "解读"]
    # the same words as chapter 6's memory table (benchmark.memory): one translation per English message
    assert chinese[1].split()[:4] == ["快速路径", "前向计算", "+", "反向传播"] and chinese[1].endswith("更快")


def test_chapter_4_encoding_kinds_read_in_the_learners_language():
    assert dict(ENCODING_KINDS) == {"sinusoidal": "sinusoidal", "learned": "learned (random init)", "rope": "RoPE"}
    with using_language("zh"):
        assert list(ENCODING_KINDS.items()) == [("sinusoidal", "正弦"), ("learned", "可学习（随机初始化）"),
                                                ("rope", "RoPE")]
    with pytest.raises(KeyError):
        ENCODING_KINDS["alibi"]
