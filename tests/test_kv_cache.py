"""Chapter 6's caches and decoder: the ring buffer against full attention with a sliding-window mask
(outputs and gradients), the full cache, the trained decoder's exactness, memory, bad input, the copy task."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from utils.at_scale import receptive_field
from utils.decoder import TinyDecoder, continuation_accuracy, decode_trace, train_decoder
from utils.kv_cache import KVCache, RingKVCache, causal_window_mask
from utils.plotting.at_scale import cache_memory_figure
from utils.tasks import REPEAT_VOCAB, REPEAT_WORDS, is_test_pattern, repeat_task, repeat_text


def _qkv(seed: int, L: int, *, N: int = 2, H: int = 3, D: int = 4, dtype=torch.float32, grad: bool = False):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(N, H, L, D, generator=gen, dtype=dtype).requires_grad_(grad) for _ in range(3)]


def _attend_in_chunks(cache: KVCache, q, k, v, chunks: list[int]) -> torch.Tensor:
    """Feed the sequence through ``cache`` chunk by chunk (a prefill, then steps) and stack the outputs."""
    outputs, start = [], 0
    for size in chunks:
        part = slice(start, start + size)
        outputs.append(cache.attend(q[:, :, part], k[:, :, part], v[:, :, part]))  # (N, H, size, D)
        start += size
    return torch.cat(outputs, dim=-2)  # (N, H, L, D)


CHUNKS = [[1] * 12, [5] + [1] * 7, [3, 4, 5], [12]]


def test_causal_window_mask_is_the_causal_band():
    mask = causal_window_mask(6, 3)
    i, j = torch.meshgrid(torch.arange(6), torch.arange(6), indexing="ij")
    assert torch.equal(mask, (j <= i) & (i - j < 3))
    assert torch.equal(causal_window_mask(5, 5), torch.ones(5, 5).tril().bool())  # W >= L: plain causal


@pytest.mark.parametrize("chunks", CHUNKS, ids=str)
@pytest.mark.parametrize("window", [12, 20])
def test_ring_with_window_at_least_the_length_equals_the_full_cache_exactly(chunks, window):
    q, k, v = _qkv(0, 12)
    full = _attend_in_chunks(KVCache(), q, k, v, chunks)
    ring = _attend_in_chunks(RingKVCache(window), q, k, v, chunks)
    assert torch.equal(ring, full)  # bit for bit: same keys in the same order, same mask
    assert_close(full, F.scaled_dot_product_attention(q, k, v, is_causal=True))


@pytest.mark.parametrize("chunks", CHUNKS, ids=str)
@pytest.mark.parametrize("window", [1, 2, 4, 7])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_ring_equals_sdpa_with_a_sliding_window_mask(chunks, window, dtype):
    q, k, v = _qkv(window, 12, dtype=dtype, grad=True)
    ring = _attend_in_chunks(RingKVCache(window), q, k, v, chunks)  # chunks longer than W included
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_window_mask(12, window))
    assert_close(ring, expected)
    # and the gradients, through the ring's in-place slot writes
    weights = torch.randn_like(expected)
    grads = torch.autograd.grad((ring * weights).sum(), (q, k, v))
    expected_grads = torch.autograd.grad((expected * weights).sum(), (q, k, v))
    for got, want in zip(grads, expected_grads):
        assert_close(got, want)


def test_ring_holds_the_last_window_positions_in_slot_order_and_stays_flat():
    q, k, v = _qkv(1, 10)
    cache, sizes = RingKVCache(4), []
    for t in range(10):
        cache.attend(q[:, :, t:t + 1], k[:, :, t:t + 1], v[:, :, t:t + 1])
        sizes.append(cache.nbytes)
        held = sorted(p for p in cache.positions.tolist() if p >= 0)
        assert held == list(range(max(0, t - 3), t + 1))
        assert all(p % 4 == slot for slot, p in enumerate(cache.positions.tolist()) if p >= 0)
    assert len(set(sizes)) == 1 and sizes[0] == 2 * 2 * 3 * 4 * 4 * 4  # k and v, (N, H, W, D) float32
    full = KVCache()
    _attend_in_chunks(full, q, k, v, [1] * 10)
    assert full.nbytes == 10 * sizes[0] // 4  # grows: T = 10 slots against W = 4


@pytest.mark.parametrize("window", [0, -3])
def test_bad_window_is_a_value_error_naming_it(window):
    for make in (lambda: RingKVCache(window), lambda: causal_window_mask(4, window),
                 lambda: TinyDecoder(10, 8, 2, 1, 8).generate(torch.tensor([[1]]), 2, window=window)):
        with pytest.raises(ValueError, match="window"):
            make()


@pytest.mark.parametrize("window", [2.5, "4", True])
def test_non_integer_window_is_a_type_error(window):
    with pytest.raises(TypeError, match="window"):
        RingKVCache(window)


def test_mismatched_new_keys_are_named():
    cache = RingKVCache(3)
    q, k, v = _qkv(2, 2)
    cache.attend(q, k, v)
    with pytest.raises(ValueError, match=r"key.*\(2, 3, 1, 5\)"):
        cache.attend(*(torch.randn(2, 3, 1, 5) for _ in range(3)))
    with pytest.raises(ValueError, match="query, key, value"):
        cache.attend(q, k[:, :, :1], v)


# ------------------------------------------------------------------------------------------------
# The decoder
# ------------------------------------------------------------------------------------------------
def _model(seed: int = 0, **kwargs) -> TinyDecoder:
    torch.manual_seed(seed)
    config = dict(vocab_size=17, d_model=32, num_heads=4, num_layers=2, max_len=48) | kwargs
    return TinyDecoder(**config).eval()


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("window", [None, 3, 48])
def test_cached_decoding_equals_recomputing_the_prefix(seed, window):
    model, prompt = _model(seed), torch.randint(0, 17, (3, 5), generator=torch.Generator().manual_seed(seed))
    cached = model.generate(prompt, 30, window=window)
    assert torch.equal(cached, model.generate(prompt, 30, use_cache=False, window=window))
    # the logits too: step by step through the caches against one pass over the whole text
    caches = model.new_caches(window)
    with torch.no_grad():
        stepped = torch.cat([model(cached[:, :5], caches)] + [model(cached[:, t:t + 1], caches)
                                                              for t in range(5, 35)], dim=1)  # (N, 35, V)
        assert_close(stepped, model(cached, window=window), atol=1e-5, rtol=1e-4)


def test_ring_as_long_as_the_text_gives_the_full_cache_tokens_and_logits():
    model, prompt = _model(2), torch.tensor([[3, 1, 4, 1, 5]])
    assert torch.equal(model.generate(prompt, 40, window=45), model.generate(prompt, 40))
    full, ring = model.new_caches(), model.new_caches(45)
    with torch.no_grad():
        assert torch.equal(model(prompt, full), model(prompt, ring))


def test_a_small_window_changes_what_the_model_computes():
    model, prompt = _model(3), torch.randint(0, 17, (4, 20), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        assert not torch.allclose(model(prompt, window=4), model(prompt))


def test_information_reaches_layers_times_window_minus_one_back():
    """The quiz's claim: with W slots per layer, 2 layers let the last token depend on 2(W - 1) positions back."""
    model, window, L = _model(4), 4, 20
    embedded = {}

    def keep(module, args, output):
        output.retain_grad()
        embedded["x"] = output

    handle = model.embedding.register_forward_hook(keep)
    try:
        model(torch.randint(0, 17, (1, L)), window=window)[0, -1].sum().backward()
    finally:
        handle.remove()
    reaches = embedded["x"].grad[0].abs().sum(-1) > 0  # (L,): inputs the last logits depend on
    assert torch.equal(reaches, receptive_field(causal_window_mask(L, window), 2)[1, -1])
    assert reaches.nonzero().min().item() == L - 1 - 2 * (window - 1)


def test_decode_trace_follows_generate_and_counts_positions():
    model, prompt = _model(5), torch.tensor([[2, 7, 1, 8]])
    for window in (None, 3):
        steps = decode_trace(model, prompt, 12, window=window)
        assert [s.token for s in steps] == model.generate(prompt, 12, window=window)[0, 4:].tolist()
        assert [s.positions_run_cached for s in steps] == list(range(4, 16))
        assert steps[-1].positions_run_uncached == sum(range(4, 16))
        bytes_ = [s.cache_bytes for s in steps]
        if window is None:
            assert [len(s.cache_positions) for s in steps] == list(range(4, 16)) and bytes_ == sorted(set(bytes_))
        else:
            assert len(set(bytes_)) == 1 and steps[-1].cache_positions == [12, 13, 14]  # 12 % 3 = slot 0
    with pytest.raises(ValueError, match="one sequence"):
        decode_trace(model, torch.zeros(2, 3, dtype=torch.long), 4)


def test_decoder_bad_input():
    model = _model()
    with pytest.raises(ValueError, match="max_len"):
        model.generate(torch.zeros(1, 40, dtype=torch.long), 9)
    with pytest.raises(ValueError, match="window"):
        model(torch.zeros(1, 3, dtype=torch.long), model.new_caches(), window=2)
    with pytest.raises(ValueError, match="caches"):
        model(torch.zeros(1, 3, dtype=torch.long), model.new_caches()[:1])
    with pytest.raises(ValueError, match="tokens"):
        model(torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="windows"):
        train_decoder(model, repeat_task(4, 10, period=3), steps=1, windows=(), progress=False)
    with pytest.raises(ValueError, match="skip"):
        train_decoder(model, repeat_task(4, 10, period=3), steps=1, skip=9, progress=False)
    with pytest.raises(ValueError, match="same shape"):
        continuation_accuracy(torch.zeros(1, 3), torch.zeros(1, 4), 1)


def test_training_learns_a_short_pattern_under_every_window():
    torch.manual_seed(0)
    model = TinyDecoder(len(REPEAT_VOCAB), d_model=32, num_heads=2, num_layers=1, max_len=24)
    data = repeat_task(400, 25, period=3, seed=0, split="train")
    history = train_decoder(model, data, steps=60, batch_size=16, lr=1e-2, skip=3, windows=(None, 4, 8),
                            progress=False)
    assert history.loss[-1] < 0.2 * history.loss[0]
    test = repeat_task(32, 24, period=3, seed=1, split="test")
    for window in (None, 4):
        assert continuation_accuracy(model.generate(test[:, :4], 20, window=window), test, 4) > 0.9
    assert continuation_accuracy(model.generate(test[:, :4], 20, window=2), test, 4) < 0.6  # needs 4 back


def test_cache_memory_figure():
    fig = cache_memory_figure([1, 2, 3], {"full cache": [10, 20, 30], "ring buffer, W = 2": [20, 20, 20]})
    ax = fig.axes[0]
    assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel() and len(ax.get_lines()) == 2
    plt.close(fig)


# ------------------------------------------------------------------------------------------------
# The copy task
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("period", [1, 4, 8, 16])
def test_repeat_task_repeats_a_pattern_of_distinct_words(period):
    data = repeat_task(20, 40, period=period, seed=period)
    assert data.shape == (20, 40) and data.dtype == torch.long
    assert torch.equal(data[:, period + 1:], data[:, : 40 - period - 1])
    assert (data[:, period] == len(REPEAT_WORDS)).all()  # "."
    assert all(len(set(row[:period].tolist())) == period for row in data)
    assert repeat_text(data[0]).split()[period] == "."


def test_repeat_task_splits_are_disjoint_and_seeded():
    train, test = repeat_task(300, 9, seed=0, split="train"), repeat_task(100, 9, seed=1, split="test")
    assert all(is_test_pattern(row[:8].tolist()) for row in test)
    assert not any(is_test_pattern(row[:8].tolist()) for row in train)
    assert torch.equal(repeat_task(5, 9, seed=3), repeat_task(5, 9, seed=3))
    assert not torch.equal(repeat_task(5, 9, seed=3), repeat_task(5, 9, seed=4))


def test_repeat_task_bad_input():
    with pytest.raises(ValueError, match="period"):
        repeat_task(2, 5, period=len(REPEAT_WORDS) + 1)
    with pytest.raises(ValueError, match="split"):
        repeat_task(2, 5, split="dev")
    with pytest.raises(TypeError, match="length"):
        repeat_task(2, 5.0)


@pytest.mark.slow
def test_the_chapters_trained_decoder():
    """Chapter 6's model and training (same settings as the notebook): it continues held-out patterns, the
    cache gives the same 256 tokens as recomputing, and a ring buffer one slot short of a pattern breaks it."""
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        data = repeat_task(2000, 9 + 256 + 1, period=8, seed=0, split="train")
        test = repeat_task(32, 9 + 256, period=8, seed=1, split="test")
        model = TinyDecoder(len(REPEAT_VOCAB), d_model=64, num_heads=4, num_layers=2, max_len=9 + 256)
        history = train_decoder(model, data, steps=120, batch_size=8, lr=1e-2, skip=8,
                                windows=(None, 9, 12, 16, 32, 64), progress=False)
        assert history.loss[-1] < 0.05
        prompts = test[:, :9]
        assert continuation_accuracy(model.generate(prompts, 256), test, 9) > 0.95
        assert torch.equal(model.generate(prompts[:1], 256), model.generate(prompts[:1], 256, use_cache=False))
        assert continuation_accuracy(model.generate(prompts, 256, window=9), test, 9) > 0.95
        assert continuation_accuracy(model.generate(prompts, 256, window=8), test, 9) < 2 / 9
    finally:
        torch.set_num_threads(threads)
