"""Chapter 6's KV-cache explorer, driven in a real JupyterLab: after each Step (the ``step`` slider moved
one notch), the sliding-window switch, a new W and a stretch of Play, the figure the page shows is,
pixel for pixel, the one that :func:`~utils.explorers.at_scale.kv_cache_explorer_state` and
:func:`~utils.plotting.at_scale.kv_cache_explorer_figure` give here in pytest for the values the controls
show: the cache's slots, the counters in the title, the row computed and the memory lines.

The notebook is two cells in the server's copy of the course, not chapter 6 (which runs whole under
nbval and in Binder's environment): the chapter's decoder shape and prompt, seeded and untrained.
Which tokens it writes does not matter to the wiring, and its training would cost most of the
chapter's minute. The first cell is also run here, so both sides build the same model from the same
source.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
from browser_support import KERNEL_READY, keep_artifact, keep_screenshot, png_pixels, run_cells, shown_pixels

from utils.decoder import decode_trace
from utils.explorers.at_scale import kv_cache_explorer_state
from utils.plotting.at_scale import kv_cache_explorer_figure
from utils.plotting.common import figure_png

pytestmark = [pytest.mark.browser, pytest.mark.slow]

NEW_TOKENS, WINDOWS = 32, (4, 8, 9, 16)
SETUP = (
    "import torch\n"
    "torch.set_num_threads(1)\n"
    "from utils.decoder import TinyDecoder\n"
    "from utils.tasks import REPEAT_VOCAB\n"
    "torch.manual_seed(0)\n"
    "prompt = torch.tensor([[REPEAT_VOCAB.index(w) for w in 'tree red sun snow cat blue bee fox .'.split()]])\n"
    f"model = TinyDecoder(len(REPEAT_VOCAB), d_model=64, num_heads=4, num_layers=2, "
    f"max_len=prompt.shape[1] + {NEW_TOKENS}).eval()"
)
EXPLORER = ("from utils.widgets.at_scale import kv_cache_explorer\n"
            f"kv_cache_explorer(model, prompt, new_tokens={NEW_TOKENS}, windows={WINDOWS})")
WAIT_S = 30


class Predicted:
    """The figure the explorer should show for (step, window), computed in this process."""

    def __init__(self) -> None:
        threads = torch.get_num_threads()
        try:
            namespace: dict = {}
            exec(SETUP, namespace)  # the notebook's first cell, on one thread as in the kernel
            model, prompt = namespace["model"], namespace["prompt"]
            self.traces = {None: decode_trace(model, prompt, NEW_TOKENS)}
            self.traces.update({size: decode_trace(model, prompt, NEW_TOKENS, window=size) for size in WINDOWS})
        finally:
            torch.set_num_threads(threads)
        self.ids = prompt[0].tolist()
        self.drawn: dict[tuple, np.ndarray] = {}

    def state(self, step: int, window: int | None):
        return kv_cache_explorer_state(self.ids, self.traces, step, window)

    def pixels(self, step: int, window: int | None) -> np.ndarray:
        if (step, window) not in self.drawn:
            self.drawn[step, window] = png_pixels(figure_png(kv_cache_explorer_figure(self.state(step, window))))
        return self.drawn[step, window]


def _readout(output) -> int:
    return int(output.locator(".widget-slider .widget-readout").first.inner_text().strip())


def _shows(page, output, tmp_path, predicted: Predicted, step: int, window: int | None) -> None:
    """Wait until the explorer shows ``step`` on its slider and the predicted figure for (step, window)."""
    want = predicted.pixels(step, window)
    deadline, shown = time.monotonic() + WAIT_S, None
    while time.monotonic() < deadline:
        src, shown = shown_pixels(output)
        if _readout(output) == step and shown.shape == want.shape and np.array_equal(shown, want):
            return
        page.wait_for_timeout(200)
    name = f"lab-kv-cache-step{step}-window{window}"
    (tmp_path / f"{name}-want.png").write_bytes(figure_png(kv_cache_explorer_figure(predicted.state(step, window))))
    keep_artifact(tmp_path / f"{name}-want.png")
    differing = "a different size" if shown.shape != want.shape else f"{int((shown != want).any(-1).sum())} pixels"
    raise AssertionError(f"after {WAIT_S} s the explorer shows step {_readout(output)} and a figure that differs from "
                         f"the predicted one for step={step}, window={window} in {differing} "
                         f"(build/test-artifacts/{name}-want.png is the predicted one)")


def _paused_at(page, output) -> int:
    """The step Play stopped at: the slider holds still while the kernel stays idle for two seconds (the
    kernel links Play to the slider and redraws, and may lag behind the browser's timer)."""
    deadline, settled, last = time.monotonic() + 3 * WAIT_S, 0, None
    while settled < 10:
        assert time.monotonic() < deadline, f"the step slider did not stop moving after a pause (at {last})"
        page.wait_for_timeout(200)
        step = _readout(output)
        settled = settled + 1 if step == last and page.evaluate(KERNEL_READY) else 0
        last = step
    return last


def _differ(predicted: Predicted, a: tuple, b: tuple) -> None:
    """Each move must change the figure, or a control that does nothing would pass."""
    assert not np.array_equal(predicted.pixels(*a), predicted.pixels(*b)), f"{a} and {b} draw the same figure"


def test_kv_cache_explorer_in_lab(lab, lab_page, tmp_path):
    page = lab_page
    predicted = Predicted()
    output = run_cells(page, lab, "browser_kv_cache.ipynb", [SETUP, EXPLORER])
    try:
        _shows(page, output, tmp_path, predicted, 0, None)  # the prefill: all nine prompt rows
        assert predicted.state(0, None).rows == list(range(9))
        handle = output.locator(".widget-slider .noUi-handle").first
        handle.scroll_into_view_if_needed()
        for step in (1, 2, 3):  # Step: one new row, one more position with the cache
            handle.focus()
            handle.press("ArrowRight")
            _differ(predicted, (step - 1, None), (step, None))
            _shows(page, output, tmp_path, predicted, step, None)
        state = predicted.state(3, None)
        assert state.rows == [11]
        assert (state.positions_run_cached, state.positions_run_uncached) == (12, 9 + 10 + 11 + 12)

        output.locator(".widget-checkbox input[type=checkbox]").first.check()  # the ring buffer, W = 16
        _differ(predicted, (3, None), (3, 16))
        _shows(page, output, tmp_path, predicted, 3, 16)
        output.locator(".widget-dropdown select").first.select_option(label="4")
        _differ(predicted, (3, 16), (3, 4))
        _shows(page, output, tmp_path, predicted, 3, 4)
        state = predicted.state(3, 4)
        assert state.hidden == list(range(8)) and len(set(state.cache_bytes)) == 1  # the memory line is flat
        assert state.full_bytes[-1] > state.full_bytes[0]

        # Play for 2.5 s (the timer ticks every 0.8 s, in the browser), pause, and check the step it stopped at,
        # whichever that is: each tick is a redraw in the kernel, so a short run keeps the backlog small.
        play = output.locator(".widget-play button").first
        play.click()
        page.wait_for_timeout(2500)
        play.click()
        last = _paused_at(page, output)
        assert last > 3, f"Play did not move the step slider from 3 (it shows {last})"
        _shows(page, output, tmp_path, predicted, last, 4)
        assert predicted.state(last, 4).cache_positions == sorted(range(last + 5, last + 9), key=lambda p: p % 4)

        output.locator(".widget-checkbox input[type=checkbox]").first.uncheck()  # back to the full cache
        _differ(predicted, (last, 4), (last, None))
        _shows(page, output, tmp_path, predicted, last, None)
        assert page.errors == [], f"JavaScript errors: {page.errors}"
    except BaseException:
        keep_screenshot(output, tmp_path, "lab-kv-cache.png")
        raise
