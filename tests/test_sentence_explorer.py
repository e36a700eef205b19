"""Chapter 5's "your own sentence" explorer: the model's real outputs on a typed sentence, nothing dropped."""

import matplotlib.pyplot as plt
import pytest
import torch
from torch.testing import assert_close
from widget_support import assert_same_state, png

from utils.explorers.transformer import MAX_WORDS, attention_view, sentence_state, split_sentence
from utils.layers import TinyEncoderClassifier
from utils.plotting.transformer import sentence_figure
from utils.tasks import NOUNS, VOCAB, pronoun_task
from utils.widgets.transformer import sentence_explorer

SENTENCE = "the old king met the girl because she left ."


def _model(seed=0):
    torch.manual_seed(seed)
    return TinyEncoderClassifier(len(VOCAB), 16, 2, 2, 32, len(NOUNS), norm_first=True).eval()


@pytest.mark.parametrize("seed", [0, 1])
def test_state_is_what_the_model_computes(seed):
    model = _model(seed)
    state = sentence_state(model, SENTENCE, 1, 0)
    words = SENTENCE.split()
    assert state.words == words and state.unknown == {}
    tokens = torch.tensor([[VOCAB.index(w) for w in words]])
    with torch.no_grad():
        logits, maps = model(tokens, need_weights=True)
    assert_close(state.maps, torch.stack([m[0] for m in maps]))
    assert state.pronoun_pos == 7 and state.referent_pos == 5
    probabilities = logits[0, 7].softmax(-1)
    assert state.predicted == NOUNS[int(probabilities.argmax())]
    assert state.confidence == pytest.approx(probabilities.max().item())
    assert_close(state.referent_share, state.maps[:, :, 7, 5])
    assert state.correct == (state.predicted == "girl")
    assert ("right" if state.correct else "WRONG") in state.message


def test_a_sentence_of_the_task_gives_the_other_explorers_maps():
    model, data = _model(), pronoun_task(6, seed=4)
    for i in range(len(data)):
        state = sentence_state(model, " ".join(data.words(i)))
        assert state.pronoun_pos == int(data.pronoun_pos[i]) and state.referent_pos == int(data.referent_pos[i])
        for layer in range(2):
            for head in range(2):
                view = attention_view(model, data, i, layer, head)
                assert_close(state.maps[layer, head], view.weights, atol=1e-5, rtol=1e-5)
                assert view.predicted == state.predicted


def test_unknown_words_are_named_with_their_nearest_known_words():
    words, unknown = split_sentence("The Kinq met the dragon because she left. ")
    assert words == ["the", "kinq", "met", "the", "dragon", "because", "she", "left", "."]  # nothing dropped
    assert unknown == {"kinq": ["king"], "dragon": []}
    state = sentence_state(_model(), "the kinq met the dragon because she left.")
    assert state.maps is None and state.predicted is None and state.words == words
    assert "'kinq' (nearest known: king)" in state.message and "'dragon' (no known word is close)" in state.message
    assert "<pad>" not in state.message  # the padding token is not a word to type
    assert split_sentence("the <pad> left")[1] == {"<pad>": []}
    with pytest.raises(TypeError, match="text"):
        split_sentence(None)


@pytest.mark.parametrize("text, words, unknown", [
    ("the king met the girl, because she left!", ["the", "king", "met", "the", "girl", ",", "because", "she",
                                                  "left", "!"], {",": ["."], "!": ["."]}),
    ("  THE King   met\tthe girl\u00a0because she left.  ", ["the", "king", "met", "the", "girl", "because", "she",
                                                            "left", "."], {}),
    ("the king's girl left", ["the", "king's", "girl", "left"], {"king's": ["king", "kids"]}),
    ("the king\u2014met", ["the", "king", "\u2014", "met"], {"\u2014": []}),
    ("the\u200bking left", ["the", "\u200b", "king", "left"], {"\u200b": []}),
    ("...", [".", ".", "."], {}),
])
def test_punctuation_case_and_spaces_are_split_and_named_never_dropped(text, words, unknown):
    assert split_sentence(text) == (words, unknown)
    state = sentence_state(_model(), text)
    assert state.words == words
    if unknown:
        assert state.maps is None
        for word in unknown:  # named, and an invisible character spelled out
            assert (f"'{word}'" if word.isprintable() else ascii(word)) in state.message
    else:
        assert state.maps is not None and state.maps.shape[-1] == len(words)


def test_caption_counts_words_from_one():
    state = sentence_state(_model(), SENTENCE)
    assert state.pronoun_pos == 7 and "At 'she' (word 8)" in state.message
    twice = sentence_state(_model(), "the girl met the girl because she left .")
    assert "'girl' (word 2), 'girl' (word 5)" in twice.message and twice.correct is None


@pytest.mark.parametrize("text, expected", [
    ("", "1 to"),
    (" ".join(["the"] * (MAX_WORDS + 1)), f"has {MAX_WORDS + 1}"),
    ("the king met the girl .", "No pronoun"),
    ("the king met the boy because he left .", "'king' (word 2), 'boy' (word 5)"),
    ("the cup fell because she left .", "none"),
])
def test_sentences_the_model_cannot_score_say_why(text, expected):
    state = sentence_state(_model(), text)
    assert expected in state.message and state.referent_share is None and state.correct is None
    if "pronoun" in expected.lower() or "'" in expected or expected == "none":
        assert state.maps is not None  # the model still ran


def test_bad_layer_or_head():
    with pytest.raises(ValueError, match="layer=2, head=0"):
        sentence_state(_model(), SENTENCE, 2, 0)


def test_figure_shows_every_head_and_the_enlarged_one():
    state = sentence_state(_model(), SENTENCE, 1, 1)
    fig = sentence_figure(state)
    titles = [ax.get_title() for ax in fig.axes]
    assert titles[:4] == ["Layer 1, Head 1", "Layer 1, Head 2", "Layer 2, Head 1", "Layer 2, Head 2 (enlarged)"]
    assert titles[4] == "Layer 2, Head 2" and fig.axes[-1].get_ylabel() == "attention weight"
    assert_close(torch.as_tensor(fig.axes[4].images[0].get_array()), state.maps[1, 1])
    assert [t.get_text() for t in fig.axes[4].get_yticklabels()] == state.words
    assert fig.axes[4].get_yticklabels()[7].get_color() == "red"
    assert f"model says '{state.predicted}'" in fig._suptitle.get_text()
    plt.close(fig)
    fig = sentence_figure(sentence_state(_model(), "the kinq left"))
    assert fig.axes[0].get_title() == "Your sentence"
    plt.close(fig)


@pytest.mark.slow  # draws the explorer's figures (widgets layer): `make unit` runs it, `make quick` leaves it out
def test_explorer_draws_the_state_of_its_controls():
    pytest.importorskip("ipywidgets")
    model = _model()
    box = sentence_explorer(model, [SENTENCE, "the cup met the dogs because they won ."])
    text, enlarge = box.controls["text"], box.controls["enlarge"]
    caption = box.children[1]
    assert_same_state(box.state, sentence_state(model, SENTENCE, 0, 0))
    before = png(box)
    enlarge.value = (1, 1)
    assert_same_state(box.state, sentence_state(model, SENTENCE, 1, 1))
    assert png(box) != before
    text.value = "the cup met the dogs because they won ."
    assert_same_state(box.state, sentence_state(model, text.value, 1, 1))
    text.value = "the cup met the dragon because it won"
    assert box.state.maps is None and "dragon" in caption.value
    assert plt.get_fignums() == []
