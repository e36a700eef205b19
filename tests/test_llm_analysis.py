"""Chapter 7's analyses on attention maps made by hand and on a small random decoder: the sink share,
previous-token and induction (prefix-matching) scores, repeated random tokens with random periods,
StreamingLLM's per-token loss through the caches, and byte tokens merged into characters.
(The same functions on SmolLM2 itself: the slow tests of tests/test_llm.py.)"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from utils.llm import (
    LIGHTHOUSE_STORY,
    LlamaConfig,
    LlamaDecoder,
    induction_score,
    merge_byte_tokens,
    previous_token_score,
    repeated_random_tokens,
    sink_share,
    streaming_loss,
)


def _stack(*heads: torch.Tensor) -> torch.Tensor:
    """Maps (T, T) of one layer's heads -> (layers=1, N=1, H, T, T)."""
    return torch.stack(heads)[None, None]


def _uniform(T: int) -> torch.Tensor:
    return torch.ones(T, T).tril() / torch.arange(1, T + 1)[:, None]


def _on_key(T: int, keys: torch.Tensor) -> torch.Tensor:
    """Each query i puts all its weight on key keys[i]."""
    return F.one_hot(keys, T).float()


def test_sink_share_leaves_out_the_first_query():
    T = 6
    sink = _on_key(T, torch.zeros(T, dtype=torch.long))
    self_only = _on_key(T, torch.arange(T))  # query 0 on key 0 as well, which must not count
    share = sink_share(_stack(sink, self_only, _uniform(T)))
    assert_close(share, torch.tensor([[1.0, 0.0, sum(1 / n for n in range(2, T + 1)) / (T - 1)]]))


def test_previous_token_score():
    T = 5
    previous = _on_key(T, (torch.arange(T) - 1).clamp(min=0))
    sink = _on_key(T, torch.zeros(T, dtype=torch.long))
    assert_close(previous_token_score(_stack(previous, sink)), torch.tensor([[1.0, 1 / (T - 1)]]))


def test_maps_are_checked():
    with pytest.raises(ValueError, match=r"maps: .*\(layers, N, H, T, T\)"):
        sink_share(torch.rand(2, 3, 4, 4))
    with pytest.raises(ValueError, match=r"maps: .*square"):
        previous_token_score(torch.rand(1, 1, 1, 4, 5))


def test_repeated_random_tokens_repeat_with_random_periods():
    tokens, periods = repeated_random_tokens(40, 30, periods=(3, 12), low=100, high=200, seed=1)
    assert tokens.shape == (40, 30) and periods.shape == (40,)
    assert 3 <= int(periods.min()) and int(periods.max()) <= 12 and len(set(periods.tolist())) > 5
    assert int(tokens.min()) >= 100 and int(tokens.max()) < 200
    for row, p in zip(tokens, periods.tolist()):
        assert torch.equal(row[p:], row[:-p])
        assert len(set(row[:p].tolist())) == p  # no id twice within a block
    again, _ = repeated_random_tokens(40, 30, periods=(3, 12), low=100, high=200, seed=1)
    assert torch.equal(tokens, again)
    with pytest.raises(ValueError, match="periods"):
        repeated_random_tokens(2, 10, periods=(3, 10), low=0, high=50)
    with pytest.raises(ValueError, match="low, high"):
        repeated_random_tokens(2, 10, periods=(3, 5), low=0, high=4)


def _induction_map(row: torch.Tensor) -> torch.Tensor:
    """The perfect induction head on one row: the key after the latest earlier occurrence of the token."""
    T = len(row)
    keys = torch.zeros(T, dtype=torch.long)
    for i in range(T):
        earlier = [j for j in range(1, i + 1) if row[j - 1] == row[i]]
        keys[i] = earlier[-1] if earlier else 0
    return _on_key(T, keys)


def test_induction_score_finds_content_not_a_fixed_offset():
    tokens, periods = repeated_random_tokens(6, 24, periods=(4, 9), low=10, high=60, seed=3)
    induction = torch.stack([_induction_map(row) for row in tokens])  # (N, T, T)
    T = tokens.shape[1]
    previous = _on_key(T, (torch.arange(T) - 1).clamp(min=0)).expand(6, T, T)
    p0 = int(periods[0])  # a head that looks back a fixed p0 - 1 positions: right only where the period is p0
    offset = _on_key(T, (torch.arange(T) - p0 + 1).clamp(min=0)).expand(6, T, T)
    maps = torch.stack([induction, previous, offset], dim=1)[None]  # (1, N, 3, T, T)
    score = induction_score(maps, tokens)[0]
    assert_close(score[0], torch.tensor(1.0))
    assert float(score[1]) < 0.05
    assert int((periods == p0).sum()) < 6 and float(score[2]) < 0.8  # random periods defeat the offset head
    fixed = tokens[0].expand(6, T)  # every row with the same period: the offset head looks perfect
    fixed_maps = torch.stack([_induction_map(fixed[0]).expand(6, T, T), offset], dim=1)[None]
    assert_close(induction_score(fixed_maps, fixed)[0], torch.tensor([1.0, 1.0]))


def test_induction_score_checks_its_tokens():
    maps = torch.rand(1, 2, 1, 5, 5)
    with pytest.raises(ValueError, match=r"tokens: .*\(2, 5\)"):
        induction_score(maps, torch.zeros(1, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="no token occurs twice"):
        induction_score(maps, torch.arange(10).view(2, 5))


def _tiny() -> LlamaDecoder:
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=30, d_model=16, num_layers=2, num_heads=4, num_kv_heads=2, d_ff=24,
                         rope_base=100.0, context_length=64)
    return LlamaDecoder(config, rope="rotate_half").eval()


@pytest.mark.parametrize("chunk", [1, 5, 7, 40])
@pytest.mark.parametrize(("window", "sinks"), [(None, 0), (6, 0), (6, 2)])
def test_streaming_loss_equals_the_masked_full_forward(chunk, window, sinks, tol):
    model = _tiny()
    tokens = torch.randint(0, 30, (1, 23))
    with torch.no_grad():
        logits = model(tokens, window=window, sinks=sinks)[0, :-1]
    expected = F.cross_entropy(logits, tokens[0, 1:], reduction="none")
    got = streaming_loss(model, tokens, window=window, sinks=sinks, chunk=chunk)
    assert got.shape == (22,)
    assert_close(got, expected, **tol(torch.float32, 10))


def test_streaming_loss_checks_its_input():
    with pytest.raises(ValueError, match=r"tokens: .*one text"):
        streaming_loss(_tiny(), torch.zeros(2, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="sinks"):
        streaming_loss(_tiny(), torch.zeros(1, 5, dtype=torch.long), sinks=2)


class _Bytes:
    """A byte-level tokenizer: one token per UTF-8 byte."""

    @staticmethod
    def decode(ids):
        return bytes(ids).decode("utf-8", errors="replace")


def test_merge_byte_tokens_makes_whole_characters():
    text = "注意 a é!"
    ids = list(text.encode("utf-8"))
    pieces = merge_byte_tokens(_Bytes(), ids)
    assert [piece for piece, _ in pieces] == ["注", "意", " ", "a", " ", "é", "!"]
    assert sum((group for _, group in pieces), []) == ids
    broken = merge_byte_tokens(_Bytes(), [0xE6] * 10)  # never a whole character: pieces of at most 8 tokens
    assert sum((group for _, group in broken), []) == [0xE6] * 10 and len(broken) == 2


def test_the_story_is_a_few_thousand_words_of_prose_in_paragraphs():
    paragraphs = LIGHTHOUSE_STORY.split("\n\n")
    assert len(LIGHTHOUSE_STORY.split()) > 1800 and len(paragraphs) >= 20
    assert all("\n" not in p and p == p.strip() for p in paragraphs)
