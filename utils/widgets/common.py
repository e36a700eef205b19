"""Helpers shared by every explorer: showing a figure in an ``Output``, and wiring controls to it.

Every explorer made by :func:`wire_explorer` also has a finite grid of control values
(:mod:`utils.widgets.grid`), which the static HTML edition renders in advance.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.layout_engine import PlaceHolderLayoutEngine

from utils.i18n.messages import tr
from utils.widgets.grid import GRID_ENV, render_grid

__all__ = ["figure_png", "show_figure", "wire_explorer", "powers_of_two"]

KERNEL_NOTE = "Typing your own needs a kernel: open this chapter in Binder or Colab."
"""What the static edition says beside a text box it can only offer as a list of choices (in English; the
explorer shows it in the learner's language)."""


def _kernel_note() -> str:
    """:data:`KERNEL_NOTE` in the learner's language."""
    return tr("Typing your own needs a kernel: open this chapter in Binder or Colab.")


def figure_png(fig, *, dpi: int = 80, **savefig_kwargs) -> bytes:
    """``fig`` as PNG bytes (the explorers' resolution), and close it.

    >>> fig, ax = plt.subplots()
    >>> figure_png(fig)[:4], plt.fignum_exists(fig.number)
    (b'\\x89PNG', False)
    """
    if isinstance(fig.get_layout_engine(), PlaceHolderLayoutEngine):
        # what fig.tight_layout() leaves: it lays out nothing, yet savefig draws the figure once more for it
        # (about a third of the time); the pixels are the same without it (tests/test_explorer_grid.py)
        fig.set_layout_engine(None)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, **savefig_kwargs)
    plt.close(fig)
    return buffer.getvalue()


def show_figure(output, fig, **savefig_kwargs) -> None:
    """Make the ``ipywidgets.Output`` ``output`` show ``fig`` (as a PNG) instead of what it showed,
    and close ``fig``.

    Setting ``output.outputs`` directly, rather than ``with output: display(...)``, works in a
    kernel, in a test without one, and in the static HTML edition; closing the figure keeps a long
    session's memory flat however often a slider moves.

    >>> import ipywidgets as w
    >>> output = w.Output()
    >>> fig, ax = plt.subplots()
    >>> show_figure(output, fig)
    >>> len(output.outputs), "image/png" in output.outputs[0]["data"], plt.fignum_exists(fig.number)
    (1, True, False)
    """
    from IPython.display import Image

    png = figure_png(fig, **savefig_kwargs)
    output.outputs = ()
    output.append_display_data(Image(data=png, format="png"))


def wire_explorer(rows: Sequence[Any], controls: Mapping[str, Any], compute: Callable[[], Any],
                  draw: Callable[[Any], Any], *, grid: Mapping[str, Sequence[Any]] | None = None,
                  kernel_note: str | None = None, pure_draw: bool = False, **savefig_kwargs):
    """Stack ``rows`` of widgets above an ``Output``, and redraw whenever a control's value changes.

    Each redraw calls ``compute()`` (which reads the controls and returns the explorer's state, from
    its pure state function), then shows ``draw(state)`` with :func:`show_figure`.

    Args:
        rows: the widgets above the figure (controls, ``HBox`` rows of them, captions).
        controls: name -> the control widgets to observe; tests reach them by these names.
        compute: returns the state to draw from the controls' current values.
        draw: state -> ``Figure``.
        grid: control name -> the values the static HTML edition renders for it
            (:func:`~utils.widgets.grid.grid_controls`): needed for float sliders and text boxes,
            optional for the others (all their choices). Default: none declared.
        kernel_note: for a text box offered as choices only, what the static edition says beside it.
            Default: :data:`KERNEL_NOTE` when a control is a text box, else none.
        pure_draw: ``draw`` reads nothing but its argument (no control, no other variable that the
            controls change), so equal states give the same figure: the static edition then draws
            it once for all the combinations that give that state. Default: ``False``.
        savefig_kwargs: passed to :func:`show_figure`.

    Returns:
        An ``ipywidgets.VBox`` whose last child is the ``Output``, with attributes ``controls`` (the
        name -> widget map), ``output``, ``state`` (the state it drew last), and for the grid
        ``rows``, ``compute``, ``draw``, ``redraw``, ``savefig_kwargs``, ``kernel_note``, ``paused``
        (while True, a control change computes but does not draw), ``pure_draw`` and ``declared_grid`` (what
        ``grid`` declared; :func:`~utils.widgets.grid.grid_controls` makes the grid). When the environment variable
        :data:`~utils.widgets.grid.GRID_ENV` names a folder, the whole grid is rendered there at once
        (:func:`~utils.widgets.grid.render_grid`).

    >>> import ipywidgets as w
    >>> slider = w.IntSlider(value=1, description="n")
    >>> def draw(n):
    ...     fig, ax = plt.subplots()
    ...     ax.plot(range(n))
    ...     return fig
    >>> box = wire_explorer([slider], {"n": slider}, lambda: slider.value * 10, draw)
    >>> box.controls["n"].value = 3
    >>> box.state, box.children[-1] is box.output
    (30, True)
    """
    import ipywidgets as w

    output = w.Output()
    box = w.VBox([*rows, output])
    box.controls = dict(controls)
    box.output = output
    box.rows, box.compute, box.draw, box.savefig_kwargs = list(rows), compute, draw, savefig_kwargs
    box.paused, box.pure_draw = False, pure_draw
    text_boxes = [c for c in box.controls.values() if isinstance(c, (w.Text, w.Textarea, w.Combobox))]
    box.kernel_note = kernel_note if kernel_note is not None else (_kernel_note() if text_boxes else None)

    def redraw(_change=None) -> None:
        state = compute()
        if not box.paused:
            show_figure(output, draw(state), **savefig_kwargs)
        box.state = state

    box.redraw = redraw
    for control in box.controls.values():
        control.observe(redraw, names="value")
    redraw()
    box.declared_grid = dict(grid or {})
    if os.environ.get(GRID_ENV):
        render_grid(box, os.environ[GRID_ENV])
    return box


def powers_of_two(smallest: int, largest: int) -> tuple[int, ...]:
    """The powers of two from ``smallest`` to ``largest``: the values a ``d_k`` slider offers.

    >>> powers_of_two(4, 64)
    (4, 8, 16, 32, 64)
    """
    values = []
    value = 1
    while value <= largest:
        if value >= smallest:
            values.append(value)
        value *= 2
    return tuple(values)
