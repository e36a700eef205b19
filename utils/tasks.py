"""Synthetic datasets made in code (no downloads), small enough to train on a laptop CPU in seconds.

:func:`pronoun_task` builds short English-like sentences with two nouns and a pronoun, in the spirit of
the classic "the animal didn't cross the street because *it* was too tired" example. Each noun belongs to
one **agreement class** (he / she / it / they) and the two nouns of a sentence always belong to different
classes, so exactly one noun agrees with the pronoun. The label at the pronoun is that noun (a class
among the ``len(NOUNS)`` nouns); every other position is ignored (label ``IGNORE = -100``, the default
``ignore_index`` of ``F.cross_entropy``).

Why this task needs attention: the answer is a word that sits at *another* position, and *which* position
depends on the content of the sentence (the agreement of both nouns), not on a fixed offset. A model that
looks only at the pronoun's own position can at best guess among the four nouns of the right class
(:func:`class_guess_accuracy`, 25%).

**Held-out noun pairs.** ``split="train"`` never produces the (referent, distractor) pairs that
``split="test"`` uses (about one in five, see :func:`is_test_pair`), so test accuracy measures whether a
model learned the agreement rule rather than memorised pairs it has seen.

Chapter 6's decoder learns :func:`repeat_task`: a "pattern" of ``period`` different words, then ``"."``,
repeated. A continuation is right when it keeps repeating the prompt's pattern, which a learner can check
by eye, and predicting it needs the token exactly ``period + 1`` positions back. Held-out patterns
(:func:`is_test_pattern`) never appear in ``split="train"``.

Shape letters: N sentences (or sequences), L padded length (T for :func:`repeat_task`'s length).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from utils._checks import check_positive_int

__all__ = ["AGREEMENT", "NOUNS", "IGNORE", "PronounData", "pronoun_task", "is_test_pair", "class_guess_accuracy",
           "VOCAB", "REPEAT_WORDS", "REPEAT_VOCAB", "is_test_pattern", "repeat_task", "repeat_text"]

IGNORE = -100
"""Label of positions that carry no target (``F.cross_entropy``'s default ``ignore_index``)."""

AGREEMENT: dict[str, tuple[str, ...]] = {
    "he": ("king", "boy", "uncle", "father"),
    "she": ("queen", "girl", "aunt", "mother"),
    "it": ("cup", "ball", "book", "car"),
    "they": ("dogs", "kids", "birds", "friends"),
}
"""Pronoun -> the nouns it can refer to."""

NOUNS: tuple[str, ...] = tuple(noun for nouns in AGREEMENT.values() for noun in nouns)
"""The classes of the task, in label order."""

_ADJECTIVES = ("big", "small", "old", "new", "red", "quiet")
_VERBS = ("saw", "met", "helped", "found", "liked")
_CONJUNCTIONS = ("because", "so", "and")
_ENDINGS = ("left", "waited", "fell", "won")

VOCAB: tuple[str, ...] = ("<pad>", "the", ".", *_ADJECTIVES, *_VERBS, *_CONJUNCTIONS, *AGREEMENT, *_ENDINGS,
                          *NOUNS)
"""Every token; index 0 is the padding token."""

_INDEX = {word: i for i, word in enumerate(VOCAB)}
_CLASS_OF = {noun: pronoun for pronoun, nouns in AGREEMENT.items() for noun in nouns}


@dataclass(frozen=True)
class PronounData:
    """A batch of sentences of :func:`pronoun_task`.

    Attributes:
        tokens: ``(N, L)`` long token ids, padded with 0 (``"<pad>"``).
        labels: ``(N, L)`` long; the referent's index in :data:`NOUNS` at the pronoun, :data:`IGNORE` elsewhere.
        lengths: ``(N,)`` long, the real length of each sentence.
        pronoun_pos: ``(N,)`` long, where the pronoun is.
        referent_pos: ``(N,)`` long, where the noun it refers to is.
        other_pos: ``(N,)`` long, where the other noun (the distractor) is.
    """

    tokens: torch.Tensor
    labels: torch.Tensor
    lengths: torch.Tensor
    pronoun_pos: torch.Tensor
    referent_pos: torch.Tensor
    other_pos: torch.Tensor

    def __len__(self) -> int:
        return self.tokens.shape[0]

    def __getitem__(self, index) -> PronounData:
        """Select sentences (an int keeps a batch of one), e.g. ``data[:64]``, ``data[idx]``."""
        if isinstance(index, int):
            index = slice(index, index + 1)
        return PronounData(*(getattr(self, f)[index] for f in self.__dataclass_fields__))

    def words(self, i: int) -> list[str]:
        """The words of sentence ``i``, without padding.

        Args:
            i: the index of the sentence, ``0 <= i < N``.

        Returns:
            The ``lengths[i]`` words of the sentence, as strings of :data:`VOCAB`.
        """
        return [VOCAB[t] for t in self.tokens[i, : int(self.lengths[i])].tolist()]


def is_test_pair(referent: str, other: str) -> bool:
    """Whether the pair (noun referred to, the other noun) is kept for ``split="test"``.

    Args:
        referent: the noun the pronoun refers to, one of :data:`NOUNS`.
        other: the other noun of the sentence (the distractor), one of :data:`NOUNS`.

    Returns:
        ``True`` for about one ordered pair in five: those appear only in ``split="test"``.

    >>> is_test_pair("boy", "uncle"), is_test_pair("uncle", "boy")
    (True, False)
    """
    return (NOUNS.index(referent) + 2 * NOUNS.index(other)) % 5 == 0


def class_guess_accuracy(data: PronounData) -> float:
    """The accuracy of guessing, at each pronoun, one of the nouns it agrees with, uniformly at random.

    This is the best a model can do from the pronoun alone, without looking at the other positions: the
    mean over the sentences of ``1 / len(AGREEMENT[pronoun])``.

    >>> class_guess_accuracy(pronoun_task(10))
    0.25
    """
    pronouns = [data.words(i)[int(data.pronoun_pos[i])] for i in range(len(data))]
    return sum(1 / len(AGREEMENT[p]) for p in pronouns) / len(pronouns)


def _sentence(rng: random.Random) -> tuple[list[str], int, int, int]:
    pick = rng.choice
    first, second = rng.sample(list(AGREEMENT), 2)  # two different agreement classes
    nouns = [pick(AGREEMENT[first]), pick(AGREEMENT[second])]
    target = rng.randrange(2)  # which of the two nouns the pronoun refers to
    words: list[str] = []
    noun_pos = []
    for k, noun in enumerate(nouns):
        words.append("the")
        if rng.random() < 0.5:
            words.append(pick(_ADJECTIVES))
        noun_pos.append(len(words))
        words.append(noun)
        if k == 0:
            words.append(pick(_VERBS))
    words.append(pick(_CONJUNCTIONS))
    pronoun_pos = len(words)
    words += [_CLASS_OF[nouns[target]], pick(_ENDINGS), "."]
    return words, pronoun_pos, noun_pos[target], noun_pos[1 - target]


def pronoun_task(n: int, *, seed: int = 0, split: str = "all") -> PronounData:
    """Generate ``n`` sentences like "the old king met the girl because she left ." (labels: at "she", "girl").

    The same seed always gives the same sentences; training and held-out sets use different seeds.

    Args:
        n: the number of sentences N.
        seed: the seed of the generator. Default: ``0``.
        split: ``"train"`` (pairs outside the held-out set), ``"test"`` (only held-out pairs) or ``"all"``.
            Default: ``"all"``.

    Returns:
        A :class:`PronounData` with ``tokens`` and ``labels`` of shape ``(N, L)``, ``L`` = the longest sentence.

    Raises:
        TypeError: if ``n`` is not an int. ValueError: if ``n <= 0`` or ``split`` is unknown.

    >>> data = pronoun_task(3, seed=1)
    >>> data.tokens.shape == data.labels.shape, (data.labels != IGNORE).sum(dim=1).tolist()
    (True, [1, 1, 1])
    """
    check_positive_int("n", n)
    if split not in ("train", "test", "all"):
        raise ValueError(f"split: expected 'train', 'test' or 'all', got {split!r}")
    rng = random.Random(seed)
    sentences = []
    while len(sentences) < n:
        words, pronoun, referent, other = sentence = _sentence(rng)
        held_out = is_test_pair(words[referent], words[other])
        if split == "all" or held_out == (split == "test"):
            sentences.append(sentence)
    L = max(len(words) for words, *_ in sentences)
    tokens = torch.zeros(n, L, dtype=torch.long)  # (N, L), 0 = <pad>
    labels = torch.full((n, L), IGNORE, dtype=torch.long)  # (N, L)
    for i, (words, pronoun, referent, _) in enumerate(sentences):
        tokens[i, : len(words)] = torch.tensor([_INDEX[w] for w in words])
        labels[i, pronoun] = NOUNS.index(words[referent])
    as_long = lambda values: torch.tensor(values, dtype=torch.long)
    return PronounData(
        tokens=tokens,
        labels=labels,
        lengths=as_long([len(s[0]) for s in sentences]),
        pronoun_pos=as_long([s[1] for s in sentences]),
        referent_pos=as_long([s[2] for s in sentences]),
        other_pos=as_long([s[3] for s in sentences]),
    )


REPEAT_WORDS: tuple[str, ...] = ("cat", "dog", "owl", "fox", "bee", "cow", "red", "blue", "green", "sun", "moon",
                                 "star", "tree", "rock", "rain", "snow")
"""The words of :func:`repeat_task`'s patterns."""

REPEAT_VOCAB: tuple[str, ...] = (*REPEAT_WORDS, ".")
"""Every token of :func:`repeat_task`: the words, then ``"."`` (the end of each pattern)."""


def is_test_pattern(pattern: list[int] | tuple[int, ...]) -> bool:
    """Whether a pattern (word ids, without the ``"."``) is kept for ``split="test"``: about one in five.

    >>> is_test_pattern([0, 1, 2, 3]), is_test_pattern([1, 0, 2, 3])
    (True, False)
    """
    return sum((k + 1) * word for k, word in enumerate(pattern)) % 5 == 0


def repeat_task(n: int, length: int, *, period: int = 8, seed: int = 0, split: str = "all") -> torch.Tensor:
    """``n`` sequences of a pattern of ``period`` different words and a ``"."``, repeated to ``length`` tokens.

    Each pattern is drawn at random (no word twice), e.g. ``"bee sun rock tree . bee sun rock tree . bee"``
    for ``period=4``. Token ``t >= period + 1`` always equals token ``t - period - 1``; the first pattern
    cannot be predicted.

    Args:
        n: the number of sequences N, a positive int.
        length: the number of tokens T of each sequence, a positive int.
        period: the number of words in a pattern, ``1 <= period <= len(REPEAT_WORDS)``. Default: ``8``.
        seed: the seed of the generator. Default: ``0``.
        split: ``"train"`` (patterns outside the held-out set), ``"test"`` (only held-out patterns, see
            :func:`is_test_pattern`) or ``"all"``. Default: ``"all"``.

    Returns:
        ``(N, T)`` long token ids into :data:`REPEAT_VOCAB`.

    >>> repeat_text(repeat_task(1, 11, period=4, seed=1)[0])
    'bee sun rock tree . bee sun rock tree . bee'
    """
    check_positive_int("n", n)
    check_positive_int("length", length)
    check_positive_int("period", period)
    if period > len(REPEAT_WORDS):
        raise ValueError(f"period: expected at most {len(REPEAT_WORDS)} (the number of words), got {period}")
    if split not in ("train", "test", "all"):
        raise ValueError(f"split: expected 'train', 'test' or 'all', got {split!r}")
    rng = random.Random(seed)
    end = len(REPEAT_WORDS)  # the id of "."
    rows = []
    while len(rows) < n:
        pattern = rng.sample(range(len(REPEAT_WORDS)), period)
        if split == "all" or is_test_pattern(pattern) == (split == "test"):
            cycle = [*pattern, end]
            rows.append([cycle[t % (period + 1)] for t in range(length)])
    return torch.tensor(rows, dtype=torch.long)  # (N, T)


def repeat_text(tokens: torch.Tensor | list[int]) -> str:
    """The words of one sequence of :func:`repeat_task` (or a model's continuation), space-separated.

    >>> repeat_text([0, 1, 16, 0])
    'cat dog . cat'
    """
    ids = tokens.tolist() if isinstance(tokens, torch.Tensor) else list(tokens)
    return " ".join(REPEAT_VOCAB[i] for i in ids)
