"""A toy vocabulary and a deterministic embedding table, made in code: no download, no tokenizer.

Every chapter needs a few short sentences turned into vectors. This module gives them:

* :data:`SENTENCES`: named example sentences, among them the pronoun example ``"pronoun"``;
* :func:`tokenize`: lower-case, split on spaces (``"didn't"`` stays one token);
* :class:`Vocab`: token <-> id, with ``<pad>`` = 0 and ``<unk>`` = 1;
* :func:`embed`: a (L, E) tensor, one row per token. A token's row depends only on the token, ``d_model``
  and ``seed``, never on the sentence or on the order of the vocabulary, so "it" is the same vector in
  every sentence of every chapter;
* :func:`toy_sentence` and :func:`embed_batch`: the two calls the notebooks use.

The rows are drawn from N(0, 1), the same initialisation as ``nn.Embedding``, so their squared length
is about ``d_model``. There is no position information in them: two copies of "the" get identical rows
(chapter 4 adds positions).

>>> tokens, x = toy_sentence("short", d_model=4)
>>> tokens, tuple(x.shape)
(['the', 'cat', 'sat', 'on', 'the', 'mat'], (6, 4))
>>> bool(torch.equal(x[0], x[4]))  # both "the": same row
True
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence

import torch

from utils._checks import check_positive_int

__all__ = ["SENTENCES", "PAD", "UNK", "Vocab", "tokenize", "token_vector", "embed", "toy_sentence", "embed_batch"]

SENTENCES: dict[str, str] = {
    "pronoun": "the animal didn't cross the street because it was too tired",
    "pronoun_street": "the animal didn't cross the street because it was too wide",
    "short": "the cat sat on the mat",
    "bank": "she sat by the river bank and watched the water",
    "agreement": "the keys to the old cabinet are on the table",
}
"""Named example sentences. ``"pronoun"`` and ``"pronoun_street"`` differ in one word, which changes what
"it" refers to (the animal, or the street)."""

PAD, UNK = "<pad>", "<unk>"


def tokenize(sentence: str) -> list[str]:
    """Split a sentence into lower-case tokens on white space.

    Args:
        sentence: the text. Punctuation stays attached (``"didn't"`` is one token).

    Returns:
        The L tokens, lower-case.

    >>> tokenize("The cat  sat")
    ['the', 'cat', 'sat']
    """
    if not isinstance(sentence, str):
        raise TypeError(f"sentence: expected a str, got {type(sentence).__name__}")
    return sentence.lower().split()


class Vocab:
    """Token <-> id. Ids 0 and 1 are ``<pad>`` and ``<unk>``; the other tokens follow in sorted order.

    Args:
        tokens: the tokens to know. Default: every token of :data:`SENTENCES`.

    >>> vocab = Vocab(["b", "a", "b"])
    >>> vocab.encode(["a", "b", "zebra"]).tolist(), len(vocab)
    ([2, 3, 1], 4)
    >>> vocab.decode([3, 0])
    ['b', '<pad>']
    """

    def __init__(self, tokens: Iterable[str] | None = None) -> None:
        if tokens is None:
            tokens = [t for sentence in SENTENCES.values() for t in tokenize(sentence)]
        self.itos: list[str] = [PAD, UNK] + sorted(set(tokens) - {PAD, UNK})
        self.stoi: dict[str, int] = {t: i for i, t in enumerate(self.itos)}

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, tokens: Sequence[str]) -> torch.Tensor:
        """Ids of tokens.

        Args:
            tokens: L tokens.

        Returns:
            (L,) LongTensor of ids; unknown tokens map to ``<unk>`` (1).
        """
        return torch.tensor([self.stoi.get(t, 1) for t in tokens], dtype=torch.long)

    def decode(self, ids: Iterable[int] | torch.Tensor) -> list[str]:
        """Tokens of ids, the inverse of :meth:`encode` for known tokens.

        Args:
            ids: L ids, a sequence of ints or an (L,) tensor.

        Returns:
            The L tokens.
        """
        return [self.itos[int(i)] for i in ids]

    def embedding_table(self, d_model: int, *, seed: int = 0) -> torch.Tensor:
        """The embedding table of the vocabulary, for ``F.embedding`` or ``nn.Embedding.from_pretrained``.

        Args:
            d_model: E, the embedding size.
            seed: as in :func:`token_vector`. Default: ``0``.

        Returns:
            (V, E) tensor whose row ``i`` is :func:`token_vector` of token ``i`` (``<pad>`` is zeros).
        """
        return torch.stack([token_vector(t, d_model, seed=seed) for t in self.itos])


def token_vector(token: str, d_model: int, *, seed: int = 0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The (E,) embedding of one token, drawn from N(0, 1); ``<pad>`` is all zeros.

    The same (token, d_model, seed) always gives the same vector, on every machine.

    Args:
        token: the token.
        d_model: E, the embedding size.
        seed: picks a different (but still fixed) vector. Default: ``0``.
        dtype: of the result. Default: ``torch.float32``.

    Returns:
        (E,) tensor.

    >>> torch.equal(token_vector("it", 8), token_vector("it", 8))
    True
    >>> token_vector(PAD, 3).tolist()
    [0.0, 0.0, 0.0]
    """
    check_positive_int("d_model", d_model)
    if token == PAD:
        return torch.zeros(d_model, dtype=dtype)
    # crc32 is stable across runs (unlike hash()), so a token's vector never depends on PYTHONHASHSEED
    generator = torch.Generator().manual_seed(zlib.crc32(token.encode("utf-8")) + 1_000_003 * seed)
    return torch.randn(d_model, generator=generator, dtype=torch.float64).to(dtype)


def embed(tokens: Sequence[str], d_model: int, *, seed: int = 0, dtype: torch.dtype = torch.float32,
          device: torch.device | str | None = None) -> torch.Tensor:
    """Embed a list of tokens as a (L, E) tensor, one :func:`token_vector` per row.

    Args:
        tokens: L tokens, e.g. ``tokenize("the cat sat")``.
        d_model: E, the embedding size.
        seed: picks a different (but still fixed) table. Default: ``0``.
        dtype, device: of the result. Default: float32 on the CPU.

    Returns:
        (L, E) tensor.

    >>> embed(["a", "b", "a"], d_model=5).shape
    torch.Size([3, 5])
    """
    if isinstance(tokens, str):
        raise TypeError("tokens: expected a list of tokens, got a str; use tokenize(sentence) first")
    if len(tokens) == 0:
        raise ValueError("tokens: expected at least one token, got an empty list")
    check_positive_int("d_model", d_model)
    return torch.stack([token_vector(t, d_model, seed=seed, dtype=dtype) for t in tokens]).to(device)


def toy_sentence(name: str = "pronoun", d_model: int = 16, *, seed: int = 0) -> tuple[list[str], torch.Tensor]:
    """Tokens and (L, E) embeddings of a sentence: a key of :data:`SENTENCES` or any text.

    Args:
        name: a key of :data:`SENTENCES`, or a text to tokenize. Default: ``"pronoun"``.
        d_model: E, the embedding size. Default: ``16``.
        seed: as in :func:`embed`. Default: ``0``.

    Returns:
        ``(tokens, x)``: the L tokens and their (L, E) embeddings.

    >>> tokens, x = toy_sentence("pronoun", d_model=8)
    >>> len(tokens), tuple(x.shape), tokens.index("it")
    (11, (11, 8), 7)
    """
    tokens = tokenize(SENTENCES.get(name, name))
    return tokens, embed(tokens, d_model, seed=seed)


def embed_batch(sentences: Sequence[str], d_model: int = 16, *, seed: int = 0
                ) -> tuple[list[list[str]], torch.Tensor, torch.Tensor]:
    """Embed several sentences as one padded batch.

    Args:
        sentences: N keys of :data:`SENTENCES` or texts.
        d_model: E. Default: ``16``.
        seed: as in :func:`embed`. Default: ``0``.

    Returns:
        ``(tokens, x, lengths)``: N token lists padded with ``<pad>`` to the longest length L, x of shape
        (N, L, E) with zero rows at the padding, and lengths (N,) (a LongTensor).

    >>> tokens, x, lengths = embed_batch(["short", "the cat"], d_model=4)
    >>> tuple(x.shape), lengths.tolist(), tokens[1][-1]
    ((2, 6, 4), [6, 2], '<pad>')
    """
    if isinstance(sentences, str) or len(sentences) == 0:
        raise ValueError("sentences: expected a non-empty list of sentences (or SENTENCES keys)")
    token_lists = [tokenize(SENTENCES.get(s, s)) for s in sentences]
    longest = max(len(t) for t in token_lists)
    padded = [t + [PAD] * (longest - len(t)) for t in token_lists]
    x = torch.stack([embed(t, d_model, seed=seed) for t in padded])  # (N, L, E)
    lengths = torch.tensor([len(t) for t in token_lists], dtype=torch.long)
    return padded, x, lengths
