"""Chapter 6's KV-cache explorer: its pure state function (counters, bytes, what the newest token sees), its
figure, and its wiring (Play linked to the step slider, the sliding-window switch)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest
import torch
from widget_support import assert_same_state, png

from utils.decoder import TinyDecoder, decode_trace
from utils.explorers.at_scale import kv_cache_explorer_state
from utils.kv_cache import causal_window_mask
from utils.plotting.at_scale import kv_cache_explorer_figure
from utils.widgets.at_scale import kv_cache_explorer

P, NEW = 9, 12  # the chapter's prompt length; a short decode


@pytest.fixture(scope="module")
def setup():
    torch.manual_seed(0)
    # 2 layers, H = 2, D = 8: one position of one layer's K and V is 2 * 2 * 8 * 4 = 128 bytes
    model = TinyDecoder(vocab_size=17, d_model=16, num_heads=2, num_layers=2, max_len=40).eval()
    prompt = torch.randint(0, 17, (1, P))
    traces = {None: decode_trace(model, prompt, NEW), 4: decode_trace(model, prompt, NEW, window=4)}
    return model, prompt, traces


def test_prefill_step_computes_every_prompt_row(setup):
    _, prompt, traces = setup
    full = kv_cache_explorer_state(prompt[0].tolist(), traces, 0)
    assert full.rows == list(range(P)) and full.query == P - 1
    assert full.cache_positions == list(range(P)) and full.written == list(range(P))
    assert full.visible == list(range(P)) and full.hidden == []
    assert full.cache_bytes[-1] == 2 * P * 128 and full.full_bytes[-1] == full.cache_bytes[-1]
    assert (full.positions_run_cached, full.positions_run_uncached) == (P, P)
    ring = kv_cache_explorer_state(prompt[0].tolist(), traces, 0, window=4)
    assert ring.cache_positions == [8, 5, 6, 7]  # position p in slot p % 4; 0..4 overwritten during prefill
    assert ring.visible == [5, 6, 7, 8] and ring.hidden == [0, 1, 2, 3, 4]
    assert ring.cache_bytes == [2 * 4 * 128]


def test_decode_step_counters_bytes_and_visibility(setup):
    _, prompt, traces = setup
    full = kv_cache_explorer_state(prompt[0].tolist(), traces, 3)
    assert full.rows == [11] and full.query == 11 and full.written == [11]
    assert (full.positions_run_cached, full.positions_run_uncached) == (9 + 3, 9 + 10 + 11 + 12)
    assert full.cache_bytes == [2 * t * 128 for t in (9, 10, 11, 12)]
    assert full.tokens_so_far == [9, 10, 11, 12]
    assert full.visible == list(range(12)) and full.hidden == []
    ring = kv_cache_explorer_state(prompt[0].tolist(), traces, 3, window=4)
    assert ring.cache_positions == [8, 9, 10, 11] and ring.visible == [8, 9, 10, 11]
    assert ring.hidden == list(range(8))
    assert ring.cache_bytes == [2 * 4 * 128] * 4 and ring.full_bytes == full.cache_bytes
    last = kv_cache_explorer_state(prompt[0].tolist(), traces, NEW - 1)
    assert last.positions_run_cached == P + NEW - 1
    assert last.positions_run_uncached == sum(range(P, P + NEW))


@pytest.mark.parametrize("window", [None, 4])
def test_grid_rows_follow_the_window_mask(setup, window):
    _, prompt, traces = setup
    T = P + NEW - 1  # positions that are ever run
    allowed = causal_window_mask(T, window or T)  # (T, T)
    for step in range(NEW):
        state = kv_cache_explorer_state(prompt[0].tolist(), traces, step, window=window)
        assert state.grid.shape == (T, T)
        for row in range(T):
            codes = state.grid[row]
            if row > state.query:  # not computed yet
                assert (codes == 0).all()
                continue
            seen = codes == (2 if row in state.rows else 1)
            assert torch.equal(seen, allowed[row]), (step, row)
            assert torch.equal(codes == 3, ~allowed[row] & (torch.arange(T) < row))
        assert state.visible == allowed[state.query].nonzero().flatten().tolist()
        # what the ring holds is exactly what the newest token sees
        assert sorted(p for p in state.cache_positions if p >= 0) == state.visible


def test_labels_follow_the_chosen_trace(setup):
    _, prompt, traces = setup
    vocab = [f"w{i}" for i in range(17)]
    state = kv_cache_explorer_state(prompt[0].tolist(), traces, 2, window=4, vocab=vocab)
    expected = [*prompt[0].tolist(), *(s.token for s in traces[4][:2])]
    assert state.labels == [vocab[i] for i in expected]
    assert state.predicted == vocab[traces[4][2].token]


def test_bad_input_names_the_argument(setup):
    _, prompt, traces = setup
    with pytest.raises(ValueError, match="step"):
        kv_cache_explorer_state(prompt[0].tolist(), traces, NEW)
    with pytest.raises(ValueError, match="window"):
        kv_cache_explorer_state(prompt[0].tolist(), traces, 0, window=8)
    with pytest.raises(ValueError, match="vocab"):
        kv_cache_explorer_state(prompt[0].tolist(), traces, 0, vocab=["a"])


def test_figure_titles_say_what_changed(setup):
    _, prompt, traces = setup
    fig = kv_cache_explorer_figure(kv_cache_explorer_state(prompt[0].tolist(), traces, 3, window=4))
    table, grid, memory = fig.axes[:3]
    assert "ring buffer of W = 4 slots" in table.get_title() and table.get_xlabel() == "slot"
    assert table.get_title().startswith("Layer 1's")  # layers count from 1, as in chapter 5 (L1H1)
    full = kv_cache_explorer_figure(kv_cache_explorer_state(prompt[0].tolist(), traces, 3))
    assert full.axes[0].get_title().startswith("Layer 1's full cache")
    plt.close(full)
    assert "t11" in grid.get_title() and "no longer sees t0–t7" in grid.get_title()
    assert grid.get_xlabel().startswith("key") and grid.get_ylabel().startswith("query")
    assert "with cache 12" in fig._suptitle.get_text() and "without 42" in fig._suptitle.get_text()
    assert [len(line.get_xdata()) for line in memory.get_lines()] == [4, 4]
    plt.close(fig)


def test_explorer_plays_steps_and_switches_to_a_ring_buffer(setup):
    model, prompt, traces = setup
    box = kv_cache_explorer(model, prompt, NEW, windows=(4,), vocab=[f"w{i}" for i in range(17)])
    controls = box.controls
    assert set(controls) == {"step", "sliding", "window"}
    vocab = [f"w{i}" for i in range(17)]
    assert_same_state(box.state, kv_cache_explorer_state(prompt[0].tolist(), traces, 0, vocab=vocab))
    before = png(box)
    box.play.value = 3  # Play drives the slider
    assert controls["step"].value == 3
    assert_same_state(box.state, kv_cache_explorer_state(prompt[0].tolist(), traces, 3, vocab=vocab))
    assert png(box) != before
    controls["sliding"].value = True
    assert_same_state(box.state, kv_cache_explorer_state(prompt[0].tolist(), traces, 3, window=4, vocab=vocab))
    assert box.state.hidden == list(range(8))
