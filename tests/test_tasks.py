"""Tests of utils.tasks: the synthetic pronoun task of chapter 5."""

import pytest
import torch

from utils.tasks import AGREEMENT, IGNORE, NOUNS, VOCAB, is_test_pair, pronoun_task


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_labels_point_at_the_agreeing_noun(seed):
    data = pronoun_task(200, seed=seed)
    assert data.tokens.shape == data.labels.shape == (200, data.tokens.shape[1])
    assert ((data.labels != IGNORE).sum(dim=1) == 1).all()  # exactly one target: the pronoun
    for i in range(len(data)):
        words = data.words(i)
        pronoun, referent, other = words[data.pronoun_pos[i]], words[data.referent_pos[i]], words[data.other_pos[i]]
        assert pronoun in AGREEMENT and referent in AGREEMENT[pronoun]
        assert other not in AGREEMENT[pronoun]  # unambiguous: the distractor never agrees
        assert NOUNS[int(data.labels[i, data.pronoun_pos[i]])] == referent
        assert len(words) == int(data.lengths[i])
        assert (data.tokens[i, len(words):] == VOCAB.index("<pad>")).all()


def test_same_seed_same_data_and_different_seed_different_data():
    a, b, c = pronoun_task(50, seed=3), pronoun_task(50, seed=3), pronoun_task(50, seed=4)
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.labels, b.labels)
    assert not torch.equal(a.tokens[:, :9], c.tokens[:, :9])


def test_train_and_test_splits_share_no_noun_pair():
    def pairs(data):
        return {(data.words(i)[data.referent_pos[i]], data.words(i)[data.other_pos[i]]) for i in range(len(data))}

    train, test = pronoun_task(1000, seed=1, split="train"), pronoun_task(300, seed=2, split="test")
    assert pairs(train).isdisjoint(pairs(test))
    assert all(is_test_pair(*p) for p in pairs(test)) and not any(is_test_pair(*p) for p in pairs(train))
    assert {train.words(i)[train.pronoun_pos[i]] for i in range(len(train))} == set(AGREEMENT)


def test_referent_is_first_or_second_noun_about_equally_often():
    data = pronoun_task(2000, seed=0)
    first = (data.referent_pos < data.other_pos).float().mean().item()
    assert 0.45 < first < 0.55


def test_indexing_keeps_a_batch():
    data = pronoun_task(10, seed=0)
    assert len(data[3]) == 1 and data[3].tokens.shape == (1, data.tokens.shape[1])
    assert len(data[torch.tensor([0, 2, 4])]) == 3


@pytest.mark.parametrize(
    ("bad", "error", "message"),
    [
        (dict(n=0), ValueError, "n: expected a positive int, got 0"),
        (dict(n=-2), ValueError, "n: expected a positive int, got -2"),
        (dict(n=2.5), TypeError, r"n: expected a positive int, got 2.5 \(float\)"),
        (dict(n=True), TypeError, r"n: expected a positive int, got True \(bool\)"),
        (dict(n="3"), TypeError, r"n: expected a positive int, got '3' \(str\)"),
        (dict(n=3, split="valid"), ValueError, "split: expected 'train', 'test' or 'all', got 'valid'"),
    ],
)
def test_bad_arguments_raise(bad, error, message):
    """A non-integer where an integer belongs is a TypeError, a bad value a ValueError (as in utils._checks)."""
    with pytest.raises(error, match=message):
        pronoun_task(**bad)
