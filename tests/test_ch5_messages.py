"""Chapter 5 in Chinese: every text a learner reads in its figures, explorers and quiz comes from the message
catalogue, and the English stays exactly what it was."""

import re

import pytest
import torch
from i18n_support import HAN, english_by_default  # noqa: F401  (autouse: every test starts in English)

from utils.i18n.messages import using_language
from utils.layers import TinyEncoderClassifier
from utils.plotting import transformer as plots
from utils.tasks import NOUNS, VOCAB, pronoun_task
from utils.training import History, ablation_configurations
from utils.widgets import transformer as widgets

# what stays as it is in Chinese: code names and the task's English tokens
_KEPT = {"dropout", "LayerNorm 1", "LayerNorm 2", "+", "(N, L, E)", "post-LN", "pre-LN", "'he'", "'she'"}


def _texts(fig) -> list[str]:
    """Every text of ``fig`` a learner reads: titles, axis labels, tick labels, annotations, legends."""
    found = [fig._suptitle.get_text()] if fig._suptitle is not None else []
    for sub in fig.subfigs:
        found += [t.get_text() for t in (sub._suptitle, sub._supxlabel, sub._supylabel) if t is not None]
    for ax in fig.axes:
        found += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
        found += [t.get_text() for t in [*ax.get_xticklabels(), *ax.get_yticklabels(), *ax.texts]]
        if ax.get_legend() is not None:
            found += [t.get_text() for t in ax.get_legend().get_texts()]
    return [text for text in found if text]


def _figures(model, data):
    torch.manual_seed(0)  # the same data in both languages, so the same ticks
    history = History()
    history.loss[:], history.eval_steps[:], history.eval_accuracy[:] = [3.0, 2.0, 1.0], [1, 3], [0.3, 0.9]
    configurations = ablation_configurations(model)
    state = widgets.sentence_state(model, "the king met the girl because she left .", 1, 1)
    return {
        "layer_diagrams": plots.layer_diagrams(),
        "loss_curves": plots.loss_curves({"post-LN": [3.0, 2.0], "pre-LN": [3.0, 1.0]}, chance=2.77),
        "grad_norms_figure": plots.grad_norms_figure({"post-LN": torch.rand(3), "pre-LN": torch.rand(3)}),
        "training_curves": plots.training_curves(history, chance=0.25),
        "sentence_attention_grid": plots.sentence_attention_grid(torch.rand(2, 2, 3, 3).softmax(-1),
                                                                 ["the", "king", "he"], 2),
        "head_ablation_figure": plots.head_ablation_figure({k: 0.5 for k in configurations}, chance=0.25),
        "pronoun_heads_figure": plots.pronoun_heads_figure(torch.rand(len(configurations), 2), list(configurations),
                                                           ["he", "she"], chance=0.25),
        "layer_head_similarity_figure": plots.layer_head_similarity_figure(torch.rand(2, 2, 2)),
        "attention_view_figure": plots.attention_view_figure(widgets.attention_view(model, data, 0, 1, 0)),
        "sentence_figure": plots.sentence_figure(state),
        "sentence_figure (did not run)": plots.sentence_figure(widgets.sentence_state(model, "the kinq")),
    }


@pytest.fixture(scope="module")
def model_and_data():
    torch.manual_seed(0)
    return TinyEncoderClassifier(len(VOCAB), 16, 2, 2, 32, len(NOUNS)).eval(), pronoun_task(4, seed=2, split="test")


def test_every_figure_text_is_chinese_except_code_and_tokens(model_and_data):
    model, data = model_and_data
    tokens = set(VOCAB) | {f"'{p}'" for p in ("he", "she", "it", "they")}
    with using_language("en"):
        english = {name: _texts(fig) for name, fig in _figures(*model_and_data).items()}
    with using_language("zh"):
        chinese = {name: _texts(fig) for name, fig in _figures(*model_and_data).items()}
    for name, texts in chinese.items():
        assert len(texts) == len(english[name]), name
        left = [(en, zh) for en, zh in zip(english[name], texts) if re.search(r"[A-Za-z]{2}", en)
                and en not in _KEPT | tokens and not re.fullmatch(r"L\dH\d", en)]
        assert left, name
        assert [pair for pair in left if not HAN.search(pair[1])] == [], f"{name}: English left in the Chinese figure"


def test_explorer_captions_labels_and_quiz_in_chinese(model_and_data):
    model, data = model_and_data
    with using_language("zh"):
        view = widgets.attention_view(model, data, 0, 1, 1)
        assert view.title.startswith("第 2 层，第 2 个头：")
        box = widgets.attention_explorer(model, data, num_examples=3)
        assert [c.description for c in box.controls.values()] == ["句子", "层", "头"]
        assert box.controls["layer"].options[0][0] == "第 1 层"
        explorer = widgets.sentence_explorer(model, ["the king left ."])
        assert explorer.controls["enlarge"].description == "放大"
        assert explorer.controls["enlarge"].options[0][0] == "第 1 层，第 1 个头"
        right = widgets.sentence_state(model, "the king met the cup because he left .")
        assert right.message.startswith("在 'he'（第 7 个词）处，模型给出 ")
        assert "与代词一致的名词是 'king'" in right.message
        assert ("正确" if right.correct else "错误") in right.message
        unknown = widgets.sentence_state(model, "the kinq left")
        assert unknown.message.startswith("不在任务的词表里：'kinq'（最接近的已知词：king）")
        assert widgets.sentence_state(model, "the king left .").message.startswith("没有代词")
        quiz = widgets.ch5_quiz()
        assert quiz.title == "第 5 章测验"
        for question in quiz.questions:
            for text in [question.question, *question.options, *question.feedback, question.explanation]:
                assert not text or HAN.search(text), text
    with using_language("en"):
        assert widgets.ch5_quiz().title == "Chapter 5 quiz"
        assert widgets.sentence_state(model, "the kinq left").message.startswith("Not in the task's vocabulary: 'kinq'")


def test_ablation_labels_stay_english_keys_and_show_in_chinese(model_and_data):
    model, _ = model_and_data
    with using_language("zh"):
        labels = list(ablation_configurations(model))
        assert labels[:2] == ["all on", "L1H1 off"], "the labels are the keys the chapter's code looks up"
        shown = [plots.configuration_label(label) for label in labels]
    heads = ["L1H1", "L1H2", "L2H1", "L2H2"]
    assert shown == ["全部开启", *[f"关掉 {h} 这个头" for h in heads], "关掉第 1 层", "关掉第 2 层",
                     *[f"只开 {h} 一个头" for h in heads], "全部关闭"]
    assert plots.configuration_label("my own label") == "my own label"


def test_loss_and_sentence_titles_built_from_data_in_the_learners_language():
    words = ["the", "king", "met", "the", "girl", "because", "she", "left", "."]
    maps = torch.rand(2, 2, len(words), len(words)).softmax(-1)
    losses = {"post-LN": [2.0, 1.9], "pre-LN": [2.0, 1.0]}

    def titles():
        return (plots.loss_curves(losses, lr=3e-2, chance=2.0).axes[0].get_title(),
                plots.sentence_attention_grid(maps, words, 6, referent_pos=4)._suptitle.get_text())

    assert titles() == ("Adam at lr = 3e-2, no warm-up: post-LN stays near chance, pre-LN learns with spikes",
                        "Every head on one held-out sentence: 'she' refers to 'girl'")  # the stored figures'
    with using_language("zh"):
        assert titles() == ("Adam，学习率 = 3e-2，不预热：post-LN 一直停在随机猜测附近，pre-LN 能学会，但损失会骤升",
                            "每个头在一个留出句子上的注意力：“she”指代“girl”")
    assert plots.loss_curves(losses, lr=2.5e-3).axes[0].get_title().startswith("Adam at lr = 2.5e-3, no warm-up")
    assert plots.loss_curves(losses, lr=3e-2, title="t").axes[0].get_title() == "t"
    assert plots.sentence_attention_grid(maps, words, 6)._suptitle.get_text() == "Every head on one sentence"
