"""Helpers shared by every explorer: showing a figure in an ``Output``, and wiring controls to it."""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt

__all__ = ["show_figure", "wire_explorer", "powers_of_two"]


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

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=80, **savefig_kwargs)
    plt.close(fig)
    output.outputs = ()
    output.append_display_data(Image(data=buffer.getvalue(), format="png"))


def wire_explorer(rows: Sequence[Any], controls: Mapping[str, Any], compute: Callable[[], Any],
                  draw: Callable[[Any], Any], **savefig_kwargs):
    """Stack ``rows`` of widgets above an ``Output``, and redraw whenever a control's value changes.

    Each redraw calls ``compute()`` (which reads the controls and returns the explorer's state, from
    its pure state function), then shows ``draw(state)`` with :func:`show_figure`.

    Args:
        rows: the widgets above the figure (controls, ``HBox`` rows of them, captions).
        controls: name -> the control widgets to observe; tests reach them by these names.
        compute: returns the state to draw from the controls' current values.
        draw: state -> ``Figure``.
        savefig_kwargs: passed to :func:`show_figure`.

    Returns:
        An ``ipywidgets.VBox`` whose last child is the ``Output``, with three attributes: ``controls``
        (the name -> widget map), ``output`` and ``state`` (the state it drew last).

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

    def redraw(_change=None) -> None:
        state = compute()
        show_figure(output, draw(state), **savefig_kwargs)
        box.state = state

    for control in box.controls.values():
        control.observe(redraw, names="value")
    redraw()
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
