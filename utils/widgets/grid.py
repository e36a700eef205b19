"""The finite grid of an explorer's control values, and rendering every state of it once.

The static HTML edition (``python -m utils.html``) has no kernel, so an explorer there can only show
figures rendered in advance. Each explorer made by :func:`utils.widgets.common.wire_explorer` has a
grid: for every control, the values it may take in the edition. Dropdowns, toggle buttons and
checkboxes offer all their choices; an integer slider offers every step of its range; a float slider
or a free-text box has no natural finite set, so the explorer declares its values (``grid=`` of
``wire_explorer``), and a text box becomes "choices only" with a note that typing your own needs a
kernel.

The HTML builder executes each chapter and then, after its last cell, calls :func:`render_grids`,
which runs :func:`render_grid` on every explorer the kernel built (:func:`utils.widgets.common.live_explorers`,
in creation order): it sets the controls to every combination of grid values, calls the explorer's own
``compute`` (its pure state function, :mod:`utils.explorers`) and ``draw`` (its :mod:`utils.plotting`
figure), and writes each distinct figure once, as lossless WebP (the same pixels as the PNG a kernel
shows, about a third of the bytes), with a ``manifest.json`` that the page's script reads. On the page a
slider steps through its grid values only, whatever range it has in a kernel: every value it offers there
has a figure (tests/test_explorer_grid_ranges.py checks every explorer of the course).

This module imports :mod:`utils.widgets.common`, never the other way round; its heavy imports (ipywidgets,
torch, matplotlib) are made where they are used, so the builder's epilogue imports it cheaply.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import math
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from utils.i18n.messages import tr

if TYPE_CHECKING:
    from utils.widgets.common import Explorer

__all__ = ["MAX_GRID_STATES", "GRID_TIME_BUDGET_S", "GridControl", "grid_controls", "grid_size", "snap",
           "png_to_webp", "state_key", "render_grid", "render_grids"]

MAX_GRID_STATES = 512
"""The most combinations of control values one explorer may declare."""
GRID_TIME_BUDGET_S = 120.0
"""The most CPU seconds one explorer may take to render its grid (about 0.6 s a figure on a slow core). CPU
time, not wall time, so that a busy machine does not trip it."""
MAX_SLIDER_STEPS = 64
"""An integer slider with more steps than this must declare its grid values."""


@dataclass(frozen=True)
class GridControl:
    """One control of an explorer as the static edition shows it.

    ``values`` are the grid's values, ``labels`` how each is written, ``initial`` the index of the
    value the control had when the explorer was built (the saved state). ``kind`` is ``"slider"``,
    ``"select"``, ``"buttons"`` or ``"check"``. A slider's ``track`` (min, max, step) runs over the
    indices of its grid values, ``(0, len(values) - 1, 1)``, and ``positions`` places each value at its
    index: the page's slider stops at the rendered values and nowhere else (its label shows the value).
    ``free_text`` marks a text box reduced to its ``values`` (typing your own needs a kernel).
    """

    name: str
    kind: str
    description: str
    values: tuple[Any, ...]
    labels: tuple[str, ...]
    initial: int
    track: tuple[float, float, float] | None = None
    positions: tuple[float, ...] | None = None
    free_text: bool = False

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["values"] = [v if isinstance(v, (bool, int, float, str)) else repr(v) for v in self.values]
        return data


def _format(value: Any, fmt: str | None) -> str:
    if isinstance(value, float) and fmt:
        return format(value, fmt)
    return str(value)


def _control(name: str, control: Any, declared: Sequence[Any] | None) -> GridControl:
    import ipywidgets as w

    description = getattr(control, "description", "") or name
    current = control.value

    def chosen(allowed: Sequence[Any]) -> list[Any]:
        if declared is None:
            return list(allowed)
        bad = [v for v in declared if v not in allowed]
        if bad:
            raise ValueError(f"grid[{name!r}]: {bad} are not values the control {description!r} can take "
                             f"(it allows {list(allowed)})")
        return [v for v in allowed if v in declared or v == current]  # keep the control's own order

    if hasattr(control, "_options_values"):  # Dropdown, ToggleButtons, RadioButtons, Select, SelectionSlider
        options, labels = list(control._options_values), list(control._options_labels)
        values = chosen(options)
        names = tuple(labels[options.index(v)] for v in values)
        if isinstance(control, w.SelectionSlider):
            return _slider(name, description, values, names, current)
        kind = "buttons" if isinstance(control, (w.ToggleButtons, w.RadioButtons)) else "select"
        return GridControl(name, kind, description, tuple(values), names, values.index(current))
    if isinstance(control, (w.ToggleButton, w.Checkbox)):
        values = chosen([False, True])
        names = tuple(tr("on") if v else tr("off") for v in values)
        return GridControl(name, "check", description, tuple(values), names, values.index(current))
    if isinstance(control, (w.Text, w.Textarea, w.Combobox)):
        if declared is None and not getattr(control, "options", None):
            raise ValueError(f"grid[{name!r}]: the text box {description!r} takes free text, which cannot be "
                             f"precomputed; declare the choices the static edition offers, grid={{{name!r}: [...]}}")
        values = list(declared if declared is not None else control.options)
        if current not in values:
            values.insert(0, current)
        return GridControl(name, "select", description, tuple(values), tuple(values), values.index(current),
                           free_text=True)
    if isinstance(control, (w.IntSlider, w.IntRangeSlider, w.Play, w.BoundedIntText)) or (
            isinstance(control, w.FloatLogSlider)) or isinstance(control, w.FloatSlider):
        lo, hi, step = control.min, control.max, control.step
        if declared is None:
            if isinstance(current, float) or isinstance(control, w.FloatLogSlider):
                raise ValueError(f"grid[{name!r}]: the slider {description!r} has no finite set of values; "
                                 f"declare them, grid={{{name!r}: (...)}}")
            count = (hi - lo) // step + 1
            if count > MAX_SLIDER_STEPS:
                raise ValueError(f"grid[{name!r}]: the slider {description!r} has {count} steps (more than "
                                 f"{MAX_SLIDER_STEPS}); declare the values the static edition renders")
            declared = range(lo, hi + 1, step)
        # Declared values past the slider's range are kept: the wiring may widen the slider (a head slider
        # up to H); a value the widget clamps is drawn as clamped, and the page moves the slider to it.
        values = sorted({*declared, current})
        fmt = getattr(control, "readout_format", None)
        return _slider(name, description, values, [_format(v, fmt) for v in values], current)
    raise TypeError(f"grid[{name!r}]: no grid for a {type(control).__name__}; use a slider, dropdown, toggle or "
                    "text box")


def _slider(name: str, description: str, values: Sequence[Any], labels: Sequence[str], current: Any) -> GridControl:
    """A slider that steps through ``values`` (in order) and nothing else: its track is their indices."""
    return GridControl(name, "slider", description, tuple(values), tuple(labels), list(values).index(current),
                       (0, len(values) - 1, 1), tuple(float(i) for i in range(len(values))))


def grid_controls(controls: Mapping[str, Any], declared: Mapping[str, Sequence[Any]] | None = None,
                  *, max_states: int = MAX_GRID_STATES) -> tuple[GridControl, ...]:
    """The grid of an explorer's ``controls`` (name -> widget), with ``declared`` values where given.

    Args:
        controls: the explorer's controls, as passed to ``wire_explorer``.
        declared: name -> the values the static edition renders for that control (a subset of what
            it can take). Needed for float sliders and text boxes; optional elsewhere. Default: none.
        max_states: the bound on the number of combinations. Default: :data:`MAX_GRID_STATES`.

    Raises:
        ValueError: a declared value the control cannot take, a name that is not a control, a grid
            that cannot be enumerated, or more than ``max_states`` combinations.

    >>> import ipywidgets as w
    >>> grid = grid_controls({"n": w.IntSlider(value=2, min=0, max=4), "on": w.Checkbox(value=True)})
    >>> [c.values for c in grid], grid_size(grid)
    ([(0, 1, 2, 3, 4), (False, True)], 10)
    """
    declared = dict(declared or {})
    unknown = sorted(set(declared) - set(controls))
    if unknown:
        raise ValueError(f"grid names {unknown}, which are not controls of this explorer ({sorted(controls)})")
    grid = tuple(_control(name, control, declared.get(name)) for name, control in controls.items())
    size = grid_size(grid)
    if size > max_states:
        sizes = " x ".join(f"{c.name} {len(c.values)}" for c in grid)
        raise ValueError(f"the grid has {size} states ({sizes}), more than the bound {max_states}: declare fewer "
                         "values for its sliders")
    return grid


def grid_size(grid: Sequence[GridControl]) -> int:
    """The number of combinations of the grid's values."""
    return math.prod(len(c.values) for c in grid)


def snap(control: GridControl, position: float) -> int:
    """The index of the grid value at ``position`` on a slider's track: the nearest stop (ties: the lower
    one), as the page's script reads a slider.

    >>> import ipywidgets as w
    >>> (t,) = grid_controls({"t": w.FloatLogSlider(value=1.0, min=-1, max=1)}, {"t": (0.1, 1.0, 10.0)})
    >>> t.track, t.values[snap(t, 1.0)], t.values[snap(t, 1.6)]
    ((0, 2, 1), 1.0, 10.0)
    """
    if control.positions is None:
        raise ValueError(f"{control.name!r} is a {control.kind}, not a slider: it has no positions to snap to")
    distances = [abs(p - position) for p in control.positions]
    return distances.index(min(distances))


def png_to_webp(png: bytes) -> bytes:
    """The same pixels as lossless WebP (a third of the bytes of matplotlib's PNG, every browser reads it)."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.open(io.BytesIO(png)).save(buffer, "WEBP", lossless=True, exact=True, quality=80, method=4)
    return buffer.getvalue()


def _captions(rows: Sequence[Any]) -> list[Any]:
    """The text widgets among ``rows`` (searched inside boxes): what ``compute`` may rewrite per state."""
    import ipywidgets as w

    found = []
    for widget in rows:
        if isinstance(widget, w.Box):
            found.extend(_captions(widget.children))
        elif isinstance(widget, (w.HTML, w.Label, w.HTMLMath)):
            found.append(widget)
    return found


def state_key(state: Any) -> bytes | None:
    """A digest of ``state`` that two states share only when every field is the same, or ``None``.

    Two combinations of control values often give the same state (a control the state ignores, such as
    the ring buffer's size while the full cache is shown); the figure, a function of the state alone, is
    then drawn once. Numbers, text, ``None``, tuples, lists, dicts, dataclasses, and tensors and arrays
    (dtype, shape and every byte) are compared exactly; a state holding anything else gives ``None``
    (no key: always drawn).

    >>> import torch
    >>> state_key((1, torch.zeros(2))) == state_key((1, torch.zeros(2)))
    True
    >>> state_key((1, torch.zeros(2))) == state_key((1, -torch.zeros(2))), state_key(object()) is None
    (False, True)
    """
    import dataclasses  # here, not at the top: the builder imports this module without torch

    import numpy as np
    import torch

    digest = hashlib.sha256()

    def feed(value: Any) -> None:
        if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
            digest.update(f"{type(value).__name__}:{value!r};".encode())
        elif isinstance(value, (torch.Tensor, np.ndarray)):
            array = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
            if array.dtype == object:
                raise TypeError("no key for an array of objects")
            digest.update(f"{type(value).__name__}:{value.dtype}:{tuple(array.shape)}:".encode())
            digest.update(np.ascontiguousarray(array).tobytes())
        elif isinstance(value, (tuple, list)):
            digest.update(f"{type(value).__name__}[{len(value)}]".encode())
            for item in value:
                feed(item)
        elif isinstance(value, dict):
            digest.update(f"dict[{len(value)}]".encode())
            for item in value.items():  # in order: a figure may draw the items in their order
                feed(item)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            digest.update(f"{type(value).__module__}.{type(value).__qualname__}(".encode())
            for field in dataclasses.fields(value):
                feed((field.name, getattr(value, field.name)))
        else:
            raise TypeError(f"no key for a {type(value).__name__}")

    try:
        feed(state)
    except TypeError:
        return None
    return digest.digest()


def render_grid(box: Explorer, folder: str | Path, *, budget_s: float = GRID_TIME_BUDGET_S) -> Path:
    """Render every state of the explorer ``box`` (made by ``wire_explorer``) into ``folder/<model id>/``.

    Each combination of grid values is set on the controls (so the wiring's side effects, such as a
    slider's bound or a disabled control, happen as in a kernel), the explorer's ``compute`` gives the
    state and its ``draw`` the figure; a figure whose control values were already drawn is not drawn
    again, nor, for an explorer whose ``draw`` reads nothing but the state (``pure_draw`` of
    ``wire_explorer``), one whose state (:func:`state_key`) was; identical images are stored once. The
    controls are then put back and the saved figure redrawn, so the notebook's stored state is the
    explorer's initial one.

    Returns:
        The path of ``manifest.json``: the controls (:meth:`GridControl.to_json`), ``states`` in
        row-major order of the controls (each ``[image index, caption index, effective value indices,
        disabled control indices]``), ``images`` (file names), ``captions``, ``renders`` (figures
        drawn), ``render_s`` (CPU seconds) and ``note``.

    A grid that cannot be made (see :func:`grid_controls`) writes ``{"error": why}`` instead, so
    that the notebook still runs; the builder keeps that explorer's saved state and says why.
    Rendering that fails, or takes longer than ``budget_s``, also writes ``{"error": why}``.
    """
    from utils.plotting.common import figure_png

    target = Path(folder) / box.model_id
    target.mkdir(parents=True, exist_ok=True)
    path = target / "manifest.json"
    try:
        grid = grid_controls(box.controls, box.declared_grid)
    except (TypeError, ValueError) as exc:  # the page keeps the saved state; the builder reports it
        path.write_text(json.dumps({"error": str(exc)}), encoding="utf-8")
        return path
    controls = [box.controls[c.name] for c in grid]
    captions_widgets = _captions(box.rows)
    initial = [control.value for control in controls]
    images: list[str] = []
    captions: list[str] = []
    drawn: dict[str, int] = {}  # control values -> image index
    drawn_states: dict[bytes, int] = {}  # state_key -> image index
    renders = 0
    states = []
    start = time.process_time()
    box.paused = True  # the wiring computes but does not draw while the controls move
    try:
        for combo in itertools.product(*(range(len(c.values)) for c in grid)):
            for spec, control, index in zip(grid, controls, combo):
                control.value = spec.values[index]
            state = box.compute()
            # a disabled control does not change the figure (its value is not used): draw once for all
            key = repr([None if getattr(c, "disabled", False) else c.value for c in controls])
            # and when the figure depends on the state alone, the same state as another combination's: the same figure
            same = state_key(state) if box.pure_draw else None
            if key not in drawn and same is not None and same in drawn_states:
                drawn[key] = drawn_states[same]
            if key not in drawn:
                webp = png_to_webp(figure_png(box.draw(state), **box.savefig_kwargs))
                name = hashlib.sha256(webp).hexdigest()[:20] + ".webp"
                (target / name).write_bytes(webp)
                if name not in images:
                    images.append(name)
                drawn[key] = images.index(name)
                renders += 1
                if same is not None:
                    drawn_states[same] = drawn[key]
            text = json.dumps([widget.value for widget in captions_widgets])
            if text not in captions:
                captions.append(text)
            effective = [spec.values.index(c.value) if c.value in spec.values else i
                         for spec, c, i in zip(grid, controls, combo)]
            disabled = [j for j, control in enumerate(controls) if getattr(control, "disabled", False)]
            states.append([drawn[key], captions.index(text), effective if effective != list(combo) else None,
                           disabled])
            if time.process_time() - start > budget_s:
                raise TimeoutError(f"rendering the grid took more than {budget_s:.0f} s after {len(states)} of "
                                   f"{grid_size(grid)} states: declare fewer values")
    except Exception as exc:  # noqa: BLE001 (any failure leaves the saved state; the builder says why)
        path.write_text(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), encoding="utf-8")
        return path
    finally:
        for control, value in zip(controls, initial):
            control.value = value
        box.paused = False
        box.redraw()  # once: the saved figure
    manifest = {
        "controls": [c.to_json() for c in grid], "states": states, "images": images,
        "captions": [json.loads(text) for text in captions], "renders": renders,
        "render_s": round(time.process_time() - start, 2), "note": box.kernel_note,
    }
    path.write_text(json.dumps(manifest, ensure_ascii=False), encoding="utf-8")
    return path


def render_grids(folder: str | Path, *, budget_s: float = GRID_TIME_BUDGET_S) -> list[Path]:
    """Render the grid of every explorer alive in this kernel into ``folder/<model id>/``, in the order
    they were built (:func:`render_grid` on each of :func:`utils.widgets.common.live_explorers`).

    The HTML builder calls it after a chapter's last cell (the ``epilogue`` of its execution). Returns
    the manifests' paths; none when the kernel built no explorer.
    """
    if "utils.widgets.common" not in sys.modules:  # no explorer was built: no need to load ipywidgets
        return []
    from utils.widgets.common import live_explorers

    return [render_grid(explorer, folder, budget_s=budget_s) for explorer in live_explorers()]
