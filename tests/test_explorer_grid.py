"""Every explorer's grid of control values (utils/widgets/grid.py), and rendering it.

The static HTML edition shows, for each combination of grid values, the figure the explorer's own
state function and figure function give. These tests pin the grid each control type yields, the
bounds, the sliders' tracks (their grid values only), and that every rendered image is exactly (decoded
pixels) the figure the explorer draws for those values in a kernel.
"""

from __future__ import annotations

import base64
import functools
import io
import json

import ipywidgets as w
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from PIL import Image

from utils.plotting.common import figure_png
from utils.widgets import common
from utils.widgets.common import KERNEL_NOTE, Explorer, live_explorers, wire_explorer
from utils.widgets.grid import (
    MAX_GRID_STATES,
    grid_controls,
    grid_size,
    png_to_webp,
    render_grid,
    render_grids,
    snap,
)

# renders explorer grids and figures (widgets and HTML layers): `make unit` runs it, `make quick` leaves it out
pytestmark = pytest.mark.slow


def pixels(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGBA"))


def line_figure(n: int, scale: float):
    fig, ax = plt.subplots(figsize=(2, 1.5))
    ax.plot(np.arange(n) * scale)
    ax.set_title(f"n = {n}, scale = {scale:g}")
    return fig


def small_explorer(**kwargs):
    """n (IntSlider 1..4), scale (FloatLogSlider), and a caption the wiring rewrites."""
    n = w.IntSlider(value=2, min=1, max=4, description="n")
    scale = w.FloatLogSlider(value=1.0, min=-1, max=1, description="scale")
    caption = w.HTML()

    def compute():
        caption.value = f"<b>{n.value} points</b>"
        return n.value, scale.value

    return wire_explorer([w.HBox([n, scale]), caption], {"n": n, "scale": scale}, compute,
                         lambda state: line_figure(*state), grid=kwargs.pop("grid", {"scale": (0.1, 1.0, 10.0)}),
                         **kwargs)


# --- the grid each control gives ------------------------------------------------------------------------

def test_each_control_kind_gives_its_values():
    grid = grid_controls({
        "pick": w.Dropdown(options=[("a", 0), ("b", 1), ("c", 2)], value=1),
        "mode": w.ToggleButtons(options=["x", "y"], value="y"),
        "on": w.ToggleButton(value=True),
        "dim": w.SelectionSlider(options=[1, 2, 4, 8], value=4),
        "steps": w.IntSlider(value=3, min=0, max=6, step=3),
    })
    by_name = {c.name: c for c in grid}
    assert by_name["pick"].values == (0, 1, 2) and by_name["pick"].labels == ("a", "b", "c")
    assert by_name["pick"].kind == "select" and by_name["pick"].initial == 1
    assert by_name["mode"].kind == "buttons" and by_name["mode"].initial == 1
    assert by_name["on"].values == (False, True) and by_name["on"].kind == "check"
    assert by_name["dim"].kind == "slider" and by_name["dim"].positions == (0.0, 1.0, 2.0, 3.0)
    assert by_name["steps"].values == (0, 3, 6) and by_name["steps"].track == (0, 2, 1)  # one stop per value
    assert grid_size(grid) == 3 * 2 * 2 * 4 * 3


def test_declared_values_are_a_subset_in_the_controls_order_and_keep_the_initial_value():
    (dim,) = grid_controls({"dim": w.SelectionSlider(options=[1, 2, 4, 8, 16], value=2)}, {"dim": (16, 1)})
    assert dim.values == (1, 2, 16) and dim.initial == 1
    assert dim.track == (0, 2, 1) and dim.positions == (0.0, 1.0, 2.0)  # 4 and 8 are not on the page's track


def test_a_slider_on_the_page_stops_only_at_its_grid_values_in_order():
    (n,) = grid_controls({"n": w.IntSlider(value=3, min=0, max=9)}, {"n": (8, 0, 1)})
    assert n.values == (0, 1, 3, 8) and n.labels == ("0", "1", "3", "8") and n.initial == 2
    assert n.track == (0, 3, 1) and n.positions == (0.0, 1.0, 2.0, 3.0)
    (t,) = grid_controls({"t": w.FloatLogSlider(value=1.0, min=-1, max=1, step=0.05)}, {"t": (3.0, 0.3)})
    assert t.values == (0.3, 1.0, 3.0) and t.track == (0, 2, 1) and t.labels == ("0.3", "1", "3")


@pytest.mark.parametrize("control, needs", [
    (w.FloatLogSlider(value=1.0, min=-1, max=1, description="temperature"), "temperature"),
    (w.FloatSlider(value=0.5, description="p"), "p"),
    (w.Text(value="hello", description="sentence"), "free text"),
    (w.IntSlider(value=0, min=0, max=500, description="wide"), "501 steps"),
])
def test_a_control_without_a_natural_grid_must_declare_one(control, needs):
    with pytest.raises(ValueError, match=needs):
        grid_controls({"c": control})


def test_bad_declarations_are_named():
    with pytest.raises(ValueError, match=r"\[7\] are not values"):
        grid_controls({"pick": w.Dropdown(options=[1, 2])}, {"pick": (1, 7)})
    with pytest.raises(ValueError, match="not controls of this explorer"):
        grid_controls({"pick": w.Dropdown(options=[1, 2])}, {"pik": (1,)})
    with pytest.raises(TypeError, match="no grid for a ColorPicker"):
        grid_controls({"colour": w.ColorPicker()})


def test_the_number_of_states_is_bounded():
    controls = {"a": w.IntSlider(min=0, max=40), "b": w.IntSlider(min=0, max=40)}
    with pytest.raises(ValueError, match=r"1681 states \(a 41 x b 41\), more than the bound 512"):
        grid_controls(controls)
    assert grid_size(grid_controls(controls, {"a": range(0, 41, 4)})) == 11 * 41 <= MAX_GRID_STATES


def test_snap_reads_the_stop_nearest_to_a_track_position():
    (scale,) = grid_controls({"s": w.FloatLogSlider(value=1.0, min=-1, max=1)}, {"s": (0.1, 1.0, 10.0)})
    assert [scale.values[snap(scale, x)] for x in (0, 0.4, 1, 1.6, 2)] == [0.1, 0.1, 1.0, 10.0, 10.0]
    (n,) = grid_controls({"n": w.IntSlider(value=0, min=0, max=10)}, {"n": (0, 4, 10)})
    assert [n.values[snap(n, x)] for x in (0, 0.5, 1, 1.5, 2)] == [0, 0, 4, 4, 10]  # a tie goes to the lower
    with pytest.raises(ValueError, match="not a slider"):
        snap(grid_controls({"d": w.Dropdown(options=[1])})[0], 0.0)


def test_webp_keeps_the_pngs_pixels_exactly():
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.imshow(torch.rand(8, 8).numpy(), cmap="viridis")
    png = figure_png(fig)
    webp = png_to_webp(png)
    assert webp[8:12] == b"WEBP" and len(webp) < len(png)
    np.testing.assert_array_equal(pixels(webp), pixels(png))


# --- rendering the grid -------------------------------------------------------------------------------

def test_render_grid_draws_every_state_with_the_explorers_functions(tmp_path):
    box = small_explorer()
    manifest = json.loads(render_grid(box, tmp_path).read_text())
    folder = tmp_path / box.model_id
    controls = manifest["controls"]
    assert [c["values"] for c in controls] == [[1, 2, 3, 4], [0.1, 1.0, 10.0]]
    assert len(manifest["states"]) == 12 == manifest["renders"] and len(manifest["images"]) == 12
    for i, (image, caption, effective, disabled) in enumerate(manifest["states"]):
        n, scale = controls[0]["values"][i // 3], controls[1]["values"][i % 3]
        expected = figure_png(line_figure(n, scale))
        np.testing.assert_array_equal(pixels((folder / manifest["images"][image]).read_bytes()), pixels(expected))
        assert manifest["captions"][caption] == [f"<b>{n} points</b>"]
        assert effective is None and disabled == []
    # the controls are put back, and the output shows the saved (initial) state again
    assert (box.controls["n"].value, box.controls["scale"].value) == (2, 1.0) and box.state == (2, 1.0)
    assert box.paused is False and len(box.output.outputs) == 1


def test_render_grid_follows_the_wirings_side_effects(tmp_path):
    """A slider whose bound the wiring moves (chapter 3's head slider) is drawn clamped, and a control
    the wiring disables is drawn once for all its values."""
    count = w.Dropdown(options=[1, 2, 3], value=2, description="count")
    which = w.IntSlider(value=1, min=1, max=2, description="which")
    extra = w.Checkbox(value=False, description="extra")
    drawn = []

    def compute():
        which.max = count.value
        extra.disabled = count.value == 1
        return count.value, which.value

    def draw(state):
        drawn.append(state)
        return line_figure(*state)

    box = wire_explorer([count, which, extra], {"count": count, "which": which, "extra": extra}, compute, draw,
                        grid={"which": (1, 2, 3)})
    drawn.clear()
    manifest = json.loads(render_grid(box, tmp_path).read_text())
    states = manifest["states"]  # row-major over count (3) x which (3) x extra (2)
    assert states[(0 * 3 + 2) * 2 + 0][2] == [0, 0, 0]  # count 1, which 3 -> clamped to which 1
    assert states[(1 * 3 + 2) * 2 + 1][2] == [1, 1, 1]  # count 2, which 3 -> 2
    assert states[(2 * 3 + 2) * 2 + 1][2] is None  # count 3, which 3: as asked
    assert all(s[3] == [2] for s in states[:6]) and all(s[3] == [] for s in states[6:])
    # count 1: one figure whatever `which` and the disabled `extra`; count 2 and 3: 2 and 3 whiches x 2 extras
    assert manifest["renders"] == 1 + 2 * 2 + 3 * 2 == len(drawn) - 1  # and the saved figure, once


def test_a_grid_that_cannot_be_made_or_rendered_leaves_an_error_and_the_saved_state(tmp_path):
    text = w.Text(value="hello", description="sentence")
    box = wire_explorer([text], {"sentence": text}, lambda: len(text.value), lambda n: line_figure(n, 1.0))
    manifest = json.loads(render_grid(box, tmp_path).read_text())
    assert "free text" in manifest["error"] and box.controls["sentence"].value == "hello"
    slow = json.loads(render_grid(small_explorer(), tmp_path / "slow", budget_s=0.0).read_text())
    assert slow["error"].startswith("TimeoutError: rendering the grid took more than 0 s")


def test_a_text_box_becomes_choices_only_with_a_note(tmp_path):
    """The mechanism for a free-text explorer (chapter 5's own sentence), on chapter 3's state and
    figure functions: the query token typed into a combobox, offered in the edition as choices."""
    from utils.explorers.multihead import head_explorer_state
    from utils.plotting.multihead import head_token_figure

    tokens = head_explorer_state(3).tokens
    query = w.Combobox(value="apple", options=tokens, description="query word", ensure_option=False)

    def compute():
        return head_explorer_state(3, 0, tokens.index(query.value) if query.value in tokens else 0)

    box = wire_explorer([query], {"query": query}, compute,
                        lambda s: head_token_figure(s.weights, s.tokens, s.head, s.token),
                        grid={"query": ("apple", "red")})
    assert box.kernel_note == KERNEL_NOTE
    manifest = json.loads(render_grid(box, tmp_path).read_text())
    (control,) = manifest["controls"]
    assert control["free_text"] and control["kind"] == "select" and control["values"] == ["apple", "red"]
    assert manifest["note"] == KERNEL_NOTE and len(manifest["images"]) == 2
    state = head_explorer_state(3, 0, tokens.index("red"))
    expected = figure_png(head_token_figure(state.weights, state.tokens, state.head, state.token))
    image = tmp_path / box.model_id / manifest["images"][manifest["states"][1][0]]
    np.testing.assert_array_equal(pixels(image.read_bytes()), pixels(expected))


# --- the explorer object, and rendering every live one ---------------------------------------------------

def test_an_explorer_displays_as_its_widget():
    """In a notebook an Explorer shows the widget view of its VBox (the same model id), as wire_explorer's
    VBox did; its fields are the wiring's own objects."""
    from IPython.core.formatters import DisplayFormatter

    box = small_explorer()
    assert isinstance(box, Explorer) and isinstance(box.widget, w.VBox)
    assert box.widget.children == (*box.rows, box.output) == box.children
    shown, _ = DisplayFormatter().format(box)
    assert shown == DisplayFormatter().format(box.widget)[0]
    assert shown["application/vnd.jupyter.widget-view+json"]["model_id"] == box.model_id == box.widget.model_id
    assert repr(box) == f"Explorer(controls=['n', 'scale'], model_id={box.model_id!r})"


def test_building_renders_no_grid_and_render_grids_renders_every_live_explorer_in_order(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "_LIVE", [])  # the explorers of other tests stay alive (ipywidgets holds them)
    first, second = small_explorer(), _ignoring_explorer(pure_draw=True)[0]
    assert live_explorers() == [first, second] and not any(tmp_path.iterdir())  # nothing rendered yet
    paths = render_grids(tmp_path)
    assert paths == [tmp_path / first.model_id / "manifest.json", tmp_path / second.model_id / "manifest.json"]
    assert [json.loads(p.read_text())["renders"] for p in paths] == [12, 5]
    # the same manifest as render_grid's on that one explorer, its CPU time aside
    one = json.loads(render_grid(first, tmp_path / "one").read_text())
    both = json.loads(paths[0].read_text())
    assert {**one, "render_s": 0} == {**both, "render_s": 0}


def test_the_registry_holds_explorers_weakly(tmp_path, monkeypatch):
    import gc

    monkeypatch.setattr(common, "_LIVE", [])
    kept, dropped = small_explorer(), small_explorer()
    dropped.close()  # ipywidgets lets its widgets go, and they held the explorer (each control its redraw)
    del dropped
    gc.collect()
    assert live_explorers() == [kept] and len(common._LIVE) == 1
    assert [p.parent.name for p in render_grids(tmp_path)] == [kept.model_id]


def test_render_grids_in_a_process_that_built_no_explorer_loads_nothing_heavy(tmp_path):
    """The builder's epilogue runs it in every chapter's kernel: without explorers it renders nothing and
    imports neither ipywidgets nor matplotlib (nor utils.widgets.common)."""
    import subprocess
    import sys

    code = ("import sys; from utils.widgets.grid import render_grids; "
            f"print(render_grids({str(tmp_path)!r}), sorted(m for m in ('ipywidgets', 'matplotlib', "
            "'utils.widgets.common') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[] []" and not any(tmp_path.iterdir())


# --- the course's explorers ------------------------------------------------------------------------

def course_explorers():
    """Chapter -> a callable that builds its explorer from the cell the Lab test runs (tests/explorer_cells.py)."""
    from explorer_cells import CHAPTERS, build

    return {chapter: functools.partial(build, name) for chapter, name in CHAPTERS.items()}


@pytest.mark.parametrize("chapter", ["ch1", "ch2", "ch3", "ch4", "ch5", "ch6", "ch7"])
def test_every_course_explorer_declares_a_bounded_grid_holding_its_initial_state(chapter):
    box = course_explorers()[chapter]()
    grid = grid_controls(box.controls, box.declared_grid)
    assert 2 <= grid_size(grid) <= MAX_GRID_STATES
    assert set(c.name for c in grid) == set(box.controls)
    for c in grid:
        assert c.values[c.initial] == box.controls[c.name].value


@pytest.mark.parametrize("chapter", ["ch1", "ch2", "ch3", "ch4", "ch5", "ch6", "ch7"])
def test_figure_png_draws_once_and_gives_matplotlibs_own_pixels(chapter, monkeypatch):
    """figure_png drops the do-nothing layout engine fig.tight_layout() leaves, which would cost savefig a
    second draw: the explorer's figure is drawn once, byte for byte what savefig gives with that draw."""
    from matplotlib.figure import Figure

    box = course_explorers()[chapter]()
    state = box.compute()
    reference = box.draw(state)
    buffer = io.BytesIO()
    reference.savefig(buffer, format="png", dpi=80, **box.savefig_kwargs)
    draws = []
    original = Figure.draw
    monkeypatch.setattr(Figure, "draw", lambda fig, renderer: (draws.append(1), original(fig, renderer))[1])
    png = figure_png(box.draw(state), **box.savefig_kwargs)
    assert png == buffer.getvalue()
    assert len(draws) == (2 if box.savefig_kwargs.get("bbox_inches") == "tight" else 1), draws


def _record_calls(monkeypatch, cls, name: str, record=lambda obj: 1) -> list:
    """Patch ``cls.name`` to append ``record(self)`` to the returned list on each call, then run as before."""
    calls: list = []
    original = getattr(cls, name)
    monkeypatch.setattr(cls, name, lambda obj, *a, **k: (calls.append(record(obj)), original(obj, *a, **k))[1])
    return calls


def _explorers_with_composed_figures():
    """Every course explorer, and chapter 2's mask explorer, whose figure draws two heatmaps into its axes."""
    from utils.widgets.sdpa import mask_polarity_explorer

    return {**course_explorers(), "ch2-masks": mask_polarity_explorer}


@pytest.mark.parametrize("name", ["ch1", "ch2", "ch2-masks", "ch3", "ch4", "ch5", "ch6"])
def test_each_explorer_figure_is_laid_out_once(name, monkeypatch):
    """A heatmap drawn into a given axes leaves the layout to the caller: the figure is laid out once,
    when complete (mask_polarity_figure was laid out three times, a third of its redraw time)."""
    from matplotlib.figure import Figure

    box = _explorers_with_composed_figures()[name]()
    state = box.compute()
    layouts = _record_calls(monkeypatch, Figure, "tight_layout")
    plt.close(box.draw(state))
    assert len(layouts) <= 1, f"{name}: laid out {len(layouts)} times"


def test_a_heatmap_in_given_axes_is_laid_out_by_its_caller_only(monkeypatch):
    from matplotlib.figure import Figure

    from utils.plotting.common import attention_heatmap
    from utils.plotting.positional import encoding_heatmap

    layouts = _record_calls(monkeypatch, Figure, "tight_layout", record=lambda fig: fig)
    for draw in (lambda **k: attention_heatmap(torch.rand(4, 4), list("abcd"), **k),
                 lambda **k: encoding_heatmap(torch.rand(6, 8), **k)):
        fig, (ax, _) = plt.subplots(1, 2)
        draw(ax=ax)
        assert layouts == [], "a heatmap drawn into a given axes laid the caller's unfinished figure out"
        own = draw()  # its own figure: laid out before it is returned
        assert layouts == [own]
        layouts.clear()
        plt.close(fig)
        plt.close(own)


def test_cell_numbers_are_not_measured_by_the_layout_yet_the_pixels_are_unchanged(monkeypatch):
    """cell_text leaves a heatmap's cell numbers out of tight_layout's measuring (they lie inside the
    axes); the image is byte for byte the one that measuring them gives."""
    from matplotlib.text import Text

    from utils.explorers.sdpa import mask_polarity_state
    from utils.plotting.common import attention_heatmap
    from utils.plotting.sdpa import mask_polarity_figure

    def png(make, measure_cells: bool):
        if measure_cells:
            monkeypatch.setattr(Text, "get_in_layout", lambda self: True)
        fig = make()
        cells = [t for ax in fig.axes for t in ax.texts]
        assert len(cells) >= 16
        data = figure_png(fig)
        monkeypatch.undo()
        return data, cells

    makers = (lambda: attention_heatmap(torch.rand(10, 10, generator=torch.Generator().manual_seed(0)),
                                        [f"t{i}" for i in range(10)]),
              lambda: mask_polarity_figure(mask_polarity_state("both", "sdpa", True)))
    for make in makers:
        left_out, cells = png(make, False)
        assert not any(t.get_in_layout() for t in cells)
        measured, _ = png(make, True)
        assert left_out == measured

    fig = makers[0]()
    cells = set(map(id, fig.axes[0].texts))
    measured = _record_calls(monkeypatch, Text, "get_window_extent", record=lambda text: id(text) in cells)
    fig.tight_layout()
    plt.close(fig)
    assert measured and not any(measured)  # the layout measured labels and titles, no cell number


# --- one figure per distinct state (pure_draw) ------------------------------------------------------------

def test_state_key_tells_states_apart_by_every_field_and_byte():
    from dataclasses import dataclass

    from utils.widgets.grid import state_key

    @dataclass
    class State:
        grid: torch.Tensor
        labels: list
        window: int | None

    base = State(torch.zeros(3, 3, dtype=torch.long), ["a", "b"], None)
    assert state_key(base) == state_key(State(torch.zeros(3, 3, dtype=torch.long), ["a", "b"], None))
    changed = base.grid.clone()
    changed[2, 1] = 1
    for other in (State(changed, ["a", "b"], None), State(base.grid.float(), ["a", "b"], None),
                  State(base.grid.reshape(9), ["a", "b"], None), State(base.grid, ["a", "c"], None),
                  State(base.grid, ["a", "b"], 4), State(base.grid, ("a", "b"), None)):
        assert state_key(other) != state_key(base), other
    assert state_key(0.0) != state_key(-0.0) and state_key(1) != state_key(1.0) and state_key(True) != state_key(1)
    assert state_key({"a": 1, "b": 2}) != state_key({"b": 2, "a": 1})  # a figure may follow the order
    assert state_key(np.arange(3)) == state_key(np.arange(3)) != state_key(torch.arange(3))
    assert state_key([1, object()]) is None and state_key(np.array([object()])) is None


def _ignoring_explorer(*, pure_draw: bool):
    """n (1..3) and a checkbox the state ignores while n == 1; the figure reads the state alone."""
    n = w.IntSlider(value=1, min=1, max=3, description="n")
    shift = w.Checkbox(value=False, description="shift")
    drawn = []

    def compute():
        return n.value, 0.5 if shift.value and n.value > 1 else 1.0

    def draw(state):
        drawn.append(state)
        return line_figure(*state)

    box = wire_explorer([n, shift], {"n": n, "shift": shift}, compute, draw, pure_draw=pure_draw)
    drawn.clear()
    return box, drawn


def test_a_pure_draw_is_drawn_once_per_distinct_state_with_the_same_images(tmp_path):
    pure, pure_drawn = _ignoring_explorer(pure_draw=True)
    plain, plain_drawn = _ignoring_explorer(pure_draw=False)
    once = json.loads(render_grid(pure, tmp_path / "pure").read_text())
    every = json.loads(render_grid(plain, tmp_path / "plain").read_text())
    assert once["renders"] == 5 == len(pure_drawn) - 1 and len(set(pure_drawn)) == 5  # (1, 1.0) once
    assert every["renders"] == 6 == len(plain_drawn) - 1
    assert once["states"] == every["states"] and once["images"] == every["images"] and len(once["images"]) == 5
    for name in once["images"]:
        assert (tmp_path / "pure" / pure.model_id / name).read_bytes() == (
            tmp_path / "plain" / plain.model_id / name).read_bytes()


@pytest.mark.slow  # seconds of CPU: `make unit` runs it, `make quick` leaves it out
def test_a_draw_that_reads_a_control_is_not_merged_by_state(tmp_path):
    """Chapter 1's draw reads the query control, which its state (the scores) does not hold: without
    pure_draw, every query gets its own figure (merging by state would show one query's for all)."""
    from utils.widgets.qkv import qkv_explorer

    box = qkv_explorer("pronoun", d_model=16)
    assert box.pure_draw is False
    box.declared_grid = {"query": (0, 1), "d_k": (8,), "w_seed": (0,)}
    manifest = json.loads(render_grid(box, tmp_path).read_text())
    queries = len(manifest["controls"][0]["values"])  # 0, 1 and the initial one
    assert queries == 3 and manifest["renders"] == 2 * queries == len(manifest["images"])  # x 2 modes


@pytest.mark.slow  # starts a Jupyter kernel
def test_grid_images_are_the_bytes_the_kernel_redraw_shows(tmp_path):
    """Chapter 6's KV-cache explorer (pure_draw: the full cache ignores the window): every grid image is
    byte for byte the WebP of the PNG its kernel shows after moving the controls to that state."""
    from utils.decoder import TinyDecoder
    from utils.widgets.at_scale import kv_cache_explorer

    torch.manual_seed(0)
    model = TinyDecoder(vocab_size=17, d_model=16, num_heads=2, num_layers=2, max_len=16).eval()
    box = kv_cache_explorer(model, torch.randint(0, 17, (1, 9)), 3, windows=(4, 8),
                            vocab=[f"w{i}" for i in range(17)])
    assert box.pure_draw is True
    manifest = json.loads(render_grid(box, tmp_path).read_text())
    controls = manifest["controls"]
    assert [c["name"] for c in controls] == ["step", "sliding", "window"] and len(manifest["states"]) == 12
    assert manifest["renders"] == 3 * (1 + 2)  # the full cache's figure once for both windows
    index = 0
    for step in controls[0]["values"]:
        for sliding in controls[1]["values"]:
            for window in controls[2]["values"]:
                box.controls["step"].value, box.controls["sliding"].value = step, sliding
                box.controls["window"].value = window
                shown = png_to_webp(base64.b64decode(box.output.outputs[0]["data"]["image/png"]))
                image = manifest["images"][manifest["states"][index][0]]
                assert (tmp_path / box.model_id / image).read_bytes() == shown, (step, sliding, window)
                index += 1
