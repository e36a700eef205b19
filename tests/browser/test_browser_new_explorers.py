"""Chapter 2's mask polarity explorer and chapter 5's sentence box, driven in a real JupyterLab: each
control moved in Chromium changes the caption to exactly what the pure state function, run here in
pytest, predicts.

Each test writes a two-cell notebook into the server's copy of the course (the chapters themselves run
whole under nbval and in Binder's environment, and the Chinese chapter 1 in JupyterLab:
test_browser_zh.py), so it takes seconds, not a whole chapter.
"""

from __future__ import annotations

import pytest
import torch
from browser_support import figure_src, keep_screenshot, run_cells

from utils.explorers.sdpa import mask_polarity_state
from utils.explorers.transformer import sentence_state
from utils.layers import TinyEncoderClassifier
from utils.tasks import NOUNS, VOCAB

pytestmark = [pytest.mark.browser, pytest.mark.slow]

MODEL = ("torch.manual_seed(0)\n"
         "model = TinyEncoderClassifier(len(VOCAB), 16, 2, 2, 32, len(NOUNS), norm_first=True).eval()")


def _model():
    torch.manual_seed(0)
    return TinyEncoderClassifier(len(VOCAB), 16, 2, 2, 32, len(NOUNS), norm_first=True).eval()


def _caption_becomes(page, output, text: str) -> None:
    page.wait_for_function(
        "([el, text]) => [...el.querySelectorAll('.widget-html-content')].some(c => c.innerText.trim() === text)",
        arg=[output.element_handle(), text], timeout=30_000)


def _image_changes(page, output, before: str) -> None:
    """The figure is redrawn after the caption is set: wait for it."""
    page.wait_for_function("([el, src]) => { const img = el.querySelector('.widget-output img');"
                           " return !!img && img.complete && img.src !== src; }",
                           arg=[output.element_handle(), before], timeout=30_000)


def test_mask_polarity_explorer_in_lab(lab, lab_page, tmp_path):
    page = lab_page
    output = run_cells(page, lab, "browser_mask_polarity.ipynb", [
        "import torch\ntorch.set_num_threads(1)\nfrom utils.widgets.sdpa import mask_polarity_explorer",
        "mask_polarity_explorer()"])
    try:
        _caption_becomes(page, output, mask_polarity_state("both", "sdpa", False, pad=2).summary)
        first = figure_src(output)
        output.locator(".widget-toggle-button", has_text="nn.MultiheadAttention").click()
        want = mask_polarity_state("both", "mha", False, pad=2)
        assert "NOT the weights you meant" in want.summary
        _caption_becomes(page, output, want.summary)
        _image_changes(page, output, first)
        output.locator(".widget-toggle-button", has_text="inverted").click()
        output.locator(".widget-toggle-button", has_text="left").click()
        _caption_becomes(page, output, mask_polarity_state("both", "mha", True, pad=2, side="left").summary)
        handle = output.locator(".noUi-handle").first
        handle.focus()
        handle.press("ArrowRight")  # pad 2 -> 3
        want = mask_polarity_state("both", "mha", True, pad=3, side="left")
        assert int(want.nan_rows.sum()) == 3
        _caption_becomes(page, output, want.summary)
        assert page.errors == []
    except BaseException:
        keep_screenshot(output, tmp_path, "lab-mask-polarity.png")
        raise


def test_sentence_explorer_in_lab(lab, lab_page, tmp_path):
    page = lab_page
    first = "the king met the girl because she left ."
    output = run_cells(page, lab, "browser_sentence.ipynb", [
        "import torch\ntorch.set_num_threads(1)\nfrom utils.layers import TinyEncoderClassifier\n"
        "from utils.tasks import NOUNS, VOCAB\nfrom utils.widgets.transformer import sentence_explorer\n" + MODEL,
        f"sentence_explorer(model, [{first!r}])"])
    model = _model()
    try:
        _caption_becomes(page, output, sentence_state(model, first).message)
        box = output.locator(".widget-text input").first
        typed = "the kinq met the dragon because she left ."
        box.fill(typed)
        box.press("Enter")
        want = sentence_state(model, typed)
        assert want.maps is None and "'kinq' (nearest known: king)" in want.message
        _caption_becomes(page, output, want.message)
        typed = "the old queen helped the dogs because they won ."
        box.fill(typed)
        box.press("Enter")
        _caption_becomes(page, output, sentence_state(model, typed).message)
        before = figure_src(output)
        output.locator(".widget-dropdown select").first.select_option(label="Layer 2, Head 2")
        _image_changes(page, output, before)
        _caption_becomes(page, output, sentence_state(model, typed, 1, 1).message)
        assert page.errors == []
    except BaseException:
        keep_screenshot(output, tmp_path, "lab-sentence.png")
        raise
