"""Every explorer of the course, in the HTML edition, offers exactly the control values that were rendered.

The static edition pre-renders a grid of control values (``grid=`` of ``wire_explorer``; the controls'
own choices where none is declared). A control on the page that offered a value outside that grid would
have no figure for it: a slider would jump back to a rendered value (chapter 1's "W seed" once ran
0-9 on the page while only seeds 0 and 1 had figures). For every explorer that a chapter builds, these
tests build it as the chapter does, make its page block (:func:`utils.htmlbook.explorers.explorer_html`)
and read back what each control there can be set to: a range input's every stop, a drop-down's options,
a button group's buttons, a checkbox's two states. That set must equal the control's grid, and the grid
must equal what the explorer declared (plus the value the control starts at), or, with nothing declared,
every value the control takes in a kernel.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import Any

import pytest
import torch

from utils.htmlbook.explorers import explorer_html
from utils.widgets.grid import GridControl, grid_controls, grid_size

# builds every chapter's explorers (widgets layer, one figure each): `make unit` runs it, `make quick` leaves it out
pytestmark = pytest.mark.slow


def _ch5_model_and_data():
    from utils.layers import TinyEncoderClassifier
    from utils.tasks import NOUNS, VOCAB, pronoun_task

    torch.manual_seed(0)
    return TinyEncoderClassifier(len(VOCAB), 32, 2, 2, 64, len(NOUNS)).eval(), pronoun_task(60, seed=2)


def _qkv():
    from utils.widgets.qkv import qkv_explorer

    return qkv_explorer("pronoun", d_model=16)


def _scale():
    from utils.widgets.sdpa import scale_explorer

    return scale_explorer()


def _mask_polarity():
    from utils.widgets.sdpa import mask_polarity_explorer

    return mask_polarity_explorer()


def _heads():
    from utils.widgets.multihead import head_explorer

    return head_explorer()


def _positional():
    from utils.widgets.positional import positional_explorer

    return positional_explorer()


def _attention():
    from utils.widgets.transformer import attention_explorer

    model, data = _ch5_model_and_data()
    return attention_explorer(model, data)


def _sentence():
    from utils.widgets.transformer import sentence_explorer

    model, data = _ch5_model_and_data()
    return sentence_explorer(model, [" ".join(data.words(i)) for i in range(8)])


def _window():
    from utils.widgets.at_scale import window_explorer

    return window_explorer()


def _kv_cache():
    from utils.decoder import TinyDecoder
    from utils.tasks import REPEAT_VOCAB
    from utils.widgets.at_scale import kv_cache_explorer

    torch.manual_seed(0)
    model = TinyDecoder(len(REPEAT_VOCAB), d_model=16, num_heads=2, num_layers=1, max_len=9 + 32).eval()
    return kv_cache_explorer(model, torch.randint(0, len(REPEAT_VOCAB), (1, 9)), new_tokens=32)


def _tiny_llama():
    from test_ch7_explorers import ByteTokenizer  # one byte, one token: the chapter's byte merging is exercised

    from utils.llm import LlamaConfig, LlamaDecoder

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=256, d_model=32, num_layers=3, num_heads=4, num_kv_heads=2, d_ff=48)
    return LlamaDecoder(config).eval(), ByteTokenizer()


def _heads_llm():
    from utils.widgets.llm import heads_explorer

    model, tokenizer = _tiny_llama()
    return heads_explorer(model, tokenizer, ["the cat. the cat.", "注意注意", "abc"], groups_of=2)


def _sink_cache():
    from utils.widgets.llm import sink_cache_explorer

    T, window, sinks = 200, 8, 4
    losses = {(None, 0): torch.full((T - 1,), 1.0), (window, 0): torch.full((T - 1,), 3.0),
              (window, sinks): torch.full((T - 1,), 1.5)}
    return sink_cache_explorer(losses, bytes_per_token=3)


EXPLORERS: dict[str, Callable[[], Any]] = {
    "ch1 qkv_explorer": _qkv,
    "ch2 scale_explorer": _scale,
    "ch2 mask_polarity_explorer": _mask_polarity,
    "ch3 head_explorer": _heads,
    "ch4 positional_explorer": _positional,
    "ch5 attention_explorer": _attention,
    "ch5 sentence_explorer": _sentence,
    "ch6 window_explorer": _window,
    "ch6 kv_cache_explorer": _kv_cache,
    "ch7 heads_explorer": _heads_llm,
    "ch7 sink_cache_explorer": _sink_cache,
}
"""Every explorer a chapter builds, made with the arguments the chapter passes (untrained models: the grid
does not depend on the weights)."""


def page_block(grid: tuple[GridControl, ...]) -> str:
    """The explorer's page block for ``grid``, with one placeholder figure for every state."""
    manifest = {"controls": [c.to_json() for c in grid], "states": [[0, 0, None, []]] * grid_size(grid),
                "images": ["state.webp"], "captions": [[]], "renders": 1, "render_s": 0.0, "note": None}
    return explorer_html(manifest, "explorers", "explorer-1")


def _attributes(tag: str) -> dict[str, str]:
    return {name: html.unescape(value) for name, value in re.findall(r'([\w-]+)="([^"]*)"', tag)}


def offered_on_the_page(block: str, index: int, control: GridControl) -> list[Any]:
    """The values the page's control ``index`` can be set to, read from its HTML (as the reader's browser
    would offer them): a range input's stops become the grid values at those positions (``None`` for a stop
    with no rendered value, which ``static/explorer.js`` would snap away from)."""
    tags = [tag for tag in re.findall(r"<(?:input|select)\b[^>]*>", block)
            if _attributes(tag).get("data-control") == str(index)]
    assert tags, f"{control.name!r}: no element on the page"
    first = _attributes(tags[0])
    if first.get("type") == "range":
        low, high, step = float(first["min"]), float(first["max"]), float(first["step"])
        count = round((high - low) / step) + 1
        at = {round(p, 9): v for p, v in zip(control.positions, control.values)}
        return [at.get(round(low + i * step, 9)) for i in range(count)]
    if first.get("type") == "checkbox":
        return [False, True]  # a checkbox can always be ticked and unticked
    if first.get("type") == "radio":
        return [control.values[int(_attributes(tag)["value"])] for tag in tags]
    select = re.search(rf'<select [^>]*data-control="{index}"[^>]*>(.*?)</select>', block, re.S)
    return [control.values[int(i)] for i in re.findall(r'<option value="(\d+)"', select[1])]


def kernel_values(control: Any) -> list[Any]:
    """Every value ``control`` takes in a kernel (its options, or its range)."""
    if hasattr(control, "_options_values"):
        return list(control._options_values)
    if isinstance(control.value, bool):
        return [False, True]
    if hasattr(control, "options") and control.options:  # a combobox's suggestions
        return list(control.options)
    return list(range(control.min, control.max + 1, control.step))


@pytest.fixture(scope="module", params=list(EXPLORERS))
def built(request):
    box = EXPLORERS[request.param]()
    yield request.param, box
    box.close()


def test_every_page_control_offers_exactly_the_values_rendered_for_it(built):
    name, box = built
    grid = grid_controls(box.controls, box.declared_grid)
    block = page_block(grid)
    wrong = {}
    for index, control in enumerate(grid):
        offered = offered_on_the_page(block, index, control)
        if sorted(map(repr, offered)) != sorted(map(repr, control.values)):
            wrong[control.description] = f"the page offers {offered}, the grid renders {list(control.values)}"
    assert not wrong, f"{name}: {wrong}"


def test_every_grid_is_what_its_explorer_declared(built):
    name, box = built
    wrong = {}
    for control in grid_controls(box.controls, box.declared_grid):
        widget = box.controls[control.name]
        declared = box.declared_grid.get(control.name)
        want = [*(kernel_values(widget) if declared is None else declared), widget.value]
        if set(map(repr, control.values)) != set(map(repr, want)):
            wrong[control.description] = f"the grid holds {list(control.values)}, the explorer declared {declared}"
    assert not wrong, f"{name}: {wrong}"


def test_the_explorers_are_every_explorer_the_widgets_define():
    """A new explorer joins :data:`EXPLORERS`, so that its page controls are checked too."""
    import inspect

    import utils.widgets as widgets_package

    defined = set()
    for module_name in ("qkv", "sdpa", "multihead", "positional", "transformer", "at_scale", "llm"):
        module = __import__(f"{widgets_package.__name__}.{module_name}", fromlist=["*"])
        defined |= {name for name, value in inspect.getmembers(module, inspect.isfunction)
                    if name.endswith("_explorer") and value.__module__ == module.__name__}
    assert defined == {name.split()[1] for name in EXPLORERS}
