"""Chapters 5 and 6 say what their cells show, in both languages (issue 36).

* The two source articles go by their short names, never "seed 000/004" or 种子文章.
* Chapter 5's ablation printout shows the figure's labels, through the message catalogue.
* Chapter 5's quiz feedback on pre-LN's gradients agrees with the chapter's own measurement.
* Chapter 6 writes the softmax backward's row sums as Δ, so that D means the head dimension only.
"""

import re
from pathlib import Path

import nbformat
import pytest
import torch
from i18n_support import english_by_default  # noqa: F401  (autouse: every test starts in English)

from utils.i18n.messages import using_language
from utils.layers import TinyEncoderClassifier
from utils.plotting.transformer import configuration_label
from utils.tasks import NOUNS, VOCAB, pronoun_task
from utils.training import ablation_configurations, grad_norms_per_layer
from utils.widgets.at_scale import ch6_quiz
from utils.widgets.transformer import ch5_quiz

REPO = Path(__file__).resolve().parents[1]
CH5, CH6 = "05_transformer_layer", "06_attention_at_scale"
NOTEBOOKS = {(stem, lang): REPO / "solutions" / ("zh" if lang == "zh" else "") / f"{stem}.ipynb"
             for stem in (CH5, CH6) for lang in ("en", "zh")}


def _notebook(stem: str, lang: str) -> nbformat.NotebookNode:
    return nbformat.read(NOTEBOOKS[stem, lang], as_version=4)


def _cell(nb: nbformat.NotebookNode, cell_id: str) -> nbformat.NotebookNode:
    return next(cell for cell in nb.cells if cell.get("id") == cell_id)


def _stdout(cell: nbformat.NotebookNode) -> str:
    return "".join(out.get("text", "") for out in cell.get("outputs", []) if out.get("name") == "stdout")


def _quiz_texts(quiz) -> list[str]:
    return [text for q in quiz.questions for text in (q.question, *q.options, *q.feedback, q.explanation) if text]


SEED_JARGON = re.compile(r"\bseed (?:article|0\d\d)\b|\bour seed\b|\bthe seed (?:is|says|article)\b|种子文章",
                         re.IGNORECASE)


@pytest.mark.parametrize("stem", [CH5, CH6])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_source_articles_go_by_their_short_names(stem, lang):
    nb = _notebook(stem, lang)
    prose = "\n".join(cell.source for cell in nb.cells if cell.cell_type == "markdown")
    assert not SEED_JARGON.search(prose), SEED_JARGON.search(prose)
    short = {"en": ("the five-step article", "the practitioner's article"),
             "zh": ("《五步拆解》", "《机制详解》")}[lang]
    named = [name for name in short if name in prose.replace("The ", "the ")]
    assert named, f"{stem} ({lang}) names neither source article by its short name"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_ch5_ablation_printout_shows_the_figures_labels(lang):
    """The printed rows carry the labels the ablation figure shows, in the notebook's language."""
    model = TinyEncoderClassifier(len(VOCAB), 8, 2, 2, 16, len(NOUNS))  # 2 layers x 2 heads, as in the chapter
    with using_language(lang):
        expected = [configuration_label(label) for label in ablation_configurations(model)]
    printed = _stdout(_cell(_notebook(CH5, lang), "ch5-39")).splitlines()
    assert len(printed) == len(expected), printed
    for line, label in zip(printed, expected):
        assert re.fullmatch(r"\d\.\d{3}  " + re.escape(label), line), (line, label)
    if lang == "zh":
        assert "全部开启" in expected and "all on" not in printed


def test_configuration_label_translates_every_kind_and_keeps_others():
    with using_language("zh"):
        assert [configuration_label(x) for x in ("all on", "L1H2 off", "layer 2 off", "only L2H1 on", "all off")] \
            == ["全部开启", "关掉 L1H2 这个头", "关掉第 2 层", "只开 L2H1 一个头", "全部关闭"]
        assert configuration_label("my own label") == "my own label"
    assert configuration_label("only L2H1 on") == "only L2H1 on"


def _spread(norms: torch.Tensor) -> float:
    return (norms.max() / norms.min()).item()


def test_ch5_quiz_feedback_on_pre_ln_gradients_matches_the_measurement():
    """The chapter measures pre-LN's largest / smallest gradient norm at initialisation as the larger of the two
    (section 5); the quiz's feedback on "pre-LN diverges" must not credit the un-normalised stream with evener
    gradients, and says what was measured instead."""
    data = pronoun_task(4000, seed=1, split="train")[:256]  # the chapter's batch
    spread = {}
    for name, norm_first in (("post-LN", False), ("pre-LN", True)):
        torch.manual_seed(0)
        deep = TinyEncoderClassifier(len(VOCAB), 32, 2, 6, 64, len(NOUNS), norm_first=norm_first)
        spread[name] = _spread(grad_norms_per_layer(deep, data))
    assert spread["pre-LN"] > spread["post-LN"], spread  # what the feedback below states
    question = next(q for q in ch5_quiz().questions if "high learning rate" in q.question)
    feedback = question.feedback[2]
    assert "well-behaved" not in feedback and "keeps pre-LN's gradients" not in feedback
    assert "section 5" in feedback and "larger" in feedback


DELTA_AS_D = re.compile(r"dP\s*[−-]\s*D\b|\bD\s*=\s*(?:\\mathrm\{)?rowsum|\bD = dO")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_ch6_row_sums_are_delta_not_the_head_dimension_d(lang):
    nb = _notebook(CH6, lang)
    text = "\n".join(cell.source for cell in nb.cells) + "\n" + "\n".join(_stdout(c) for c in nb.cells)
    assert not DELTA_AS_D.search(text), DELTA_AS_D.search(text)
    assert "Δ = rowsum(dO ⊙ O)" in text and r"\Delta = \mathrm{rowsum}" in text
    with using_language(lang):
        quiz = "\n".join(_quiz_texts(ch6_quiz()))
    assert not DELTA_AS_D.search(quiz) and "dP − Δ" in quiz


def test_pronoun_cost_line_is_one_language():
    from utils.explorers.transformer import pronoun_cost_line

    with using_language("en"):
        shown = {configuration_label(label): value for label, value in (("all on", 1.0), ("L2H2 off", 0.294))}
        line = pronoun_cost_line("she", "L2H2", 0.7054, shown)
    assert line == "'she': switching off L2H2 costs the most, 0.705 | all on 1.00, L2H2 off 0.29"
    with using_language("zh"):
        shown = {configuration_label(label): value for label, value in (("all on", 1.0), ("L2H2 off", 0.294))}
        line = pronoun_cost_line("she", "L2H2", 0.7054, shown)
    assert "0.705" in line and "全部开启 1.00" in line and "L2H2" in line
    assert not re.search(r"switching|costs|the most|all on|\boff\b", line), line
    with pytest.raises(ValueError, match="shown"):
        pronoun_cost_line("she", "L2H2", 0.7, {})


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_ch5_per_pronoun_printout_is_in_the_notebooks_language(lang):
    printed = _stdout(_cell(_notebook(CH5, lang), "ch5-39d")).splitlines()
    assert len(printed) == 4, printed
    for line in printed:
        english = re.search(r"switching|costs|the most|all on|\boff\b", line)
        assert bool(english) == (lang == "en"), line
