"""What every explorer shares: showing a figure in an ``Output``, and the :class:`Explorer` that
:func:`wire_explorer` makes by wiring controls to a state function and a figure function.

Every explorer built in a kernel is remembered (weakly, in creation order: :func:`live_explorers`), so
that the HTML builder can render each one's finite grid of control values after a chapter's last cell
(:func:`utils.widgets.grid.render_grids`).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from utils.i18n.messages import tr
from utils.plotting.common import figure_png

__all__ = ["Explorer", "show_figure", "wire_explorer", "live_explorers", "powers_of_two"]

KERNEL_NOTE = "Typing your own needs a kernel: open this chapter in Binder or Colab."
"""What the static edition says beside a text box it can only offer as a list of choices (in English; the
explorer shows it in the learner's language)."""


def _kernel_note() -> str:
    """:data:`KERNEL_NOTE` in the learner's language."""
    return tr("Typing your own needs a kernel: open this chapter in Binder or Colab.")


def show_figure(output, fig, **savefig_kwargs) -> None:
    """Make the ``ipywidgets.Output`` ``output`` show ``fig`` (as a PNG) instead of what it showed,
    and close ``fig``.

    Setting ``output.outputs`` directly, rather than ``with output: display(...)``, works in a
    kernel, in a test without one, and in the static HTML edition; closing the figure keeps a long
    session's memory flat however often a slider moves.

    >>> import ipywidgets as w
    >>> import matplotlib.pyplot as plt
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


@dataclass(eq=False, repr=False)
class Explorer:
    """An explorer: controls wired to a state function and a figure function, shown as one widget.

    In a notebook it displays as its :attr:`widget` (the same widget view, and the same saved widget
    state, as that ``VBox``). Made by :func:`wire_explorer`; its fields are what the wiring, the tests and
    the static edition's grid (:func:`utils.widgets.grid.render_grid`) read.

    Attributes:
        widget: the ``ipywidgets.VBox`` shown: :attr:`rows`, then :attr:`output`.
        controls: name -> the control widgets whose changes redraw; tests reach them by these names.
        rows: the widgets above the figure (controls, ``HBox`` rows of them, captions).
        output: the ``Output`` that holds the figure.
        compute: returns the state to draw from the controls' current values.
        draw: state -> ``Figure``.
        declared_grid: control name -> the values the static edition renders for it (the ``grid`` of
            :func:`wire_explorer`).
        kernel_note: what the static edition says beside a text box offered as choices only, or None.
        pure_draw: ``draw`` reads nothing but the state, so equal states give the same figure.
        savefig_kwargs: passed to :func:`show_figure` (and to the grid's figures).
        paused: while True, a control change computes the state but does not draw it.
        state: the state computed last.
    """

    widget: Any
    controls: dict[str, Any]
    rows: list[Any]
    output: Any
    compute: Callable[[], Any]
    draw: Callable[[Any], Any]
    declared_grid: dict[str, Sequence[Any]] = field(default_factory=dict)
    kernel_note: str | None = None
    pure_draw: bool = False
    savefig_kwargs: dict[str, Any] = field(default_factory=dict)
    paused: bool = False
    state: Any = None

    def redraw(self, _change: Any = None) -> None:
        """Compute the state from the controls and, unless :attr:`paused`, show its figure (a control's
        ``observe`` callback: ``_change`` is ignored)."""
        state = self.compute()
        if not self.paused:
            show_figure(self.output, self.draw(state), **self.savefig_kwargs)
        self.state = state

    def __repr__(self) -> str:
        return f"Explorer(controls={list(self.controls)}, model_id={self.model_id!r})"

    @property
    def model_id(self) -> str:
        """The widget model id of :attr:`widget`: what the saved widget state and the notebook's output name."""
        return self.widget.model_id

    @property
    def children(self) -> tuple[Any, ...]:
        """The children of :attr:`widget`: :attr:`rows`, then :attr:`output`."""
        return self.widget.children

    def close(self) -> None:
        """Close :attr:`widget`, every widget inside it and every control: ipywidgets then lets them go,
        and with them the explorer (it leaves :func:`live_explorers` once nothing else holds it)."""

        def close_tree(widget: Any) -> None:
            for child in getattr(widget, "children", ()):
                close_tree(child)
            widget.close()

        close_tree(self.widget)
        for control in self.controls.values():
            control.close()

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        """Display as :attr:`widget` does (its widget view)."""
        return self.widget._repr_mimebundle_(**kwargs)


_LIVE: list[weakref.ref[Explorer]] = []
"""Every explorer built in this process, weakly, in creation order (see :func:`live_explorers`)."""


def live_explorers() -> list[Explorer]:
    """The explorers built in this process that are still alive, in the order they were built.

    An explorer lives as long as something holds it: a variable, the notebook's output history, or its
    controls (ipywidgets keeps every open widget, and each control keeps the explorer's
    :meth:`~Explorer.redraw`).
    """
    alive = [(ref, ref()) for ref in _LIVE]
    _LIVE[:] = [ref for ref, explorer in alive if explorer is not None]
    return [explorer for _, explorer in alive if explorer is not None]


def wire_explorer(rows: Sequence[Any], controls: Mapping[str, Any], compute: Callable[[], Any],
                  draw: Callable[[Any], Any], *, grid: Mapping[str, Sequence[Any]] | None = None,
                  kernel_note: str | None = None, pure_draw: bool = False, **savefig_kwargs) -> Explorer:
    """Stack ``rows`` of widgets above an ``Output``, and redraw whenever a control's value changes.

    Each redraw calls ``compute()`` (which reads the controls and returns the explorer's state, from
    its pure state function in :mod:`utils.explorers`), then shows ``draw(state)`` (a figure of
    :mod:`utils.plotting`) with :func:`show_figure`.

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
        An :class:`Explorer`, drawn once, which displays as its ``VBox`` (the rows, then the
        ``Output``) and is remembered by :func:`live_explorers`. Building it renders no grid: the HTML
        builder calls :func:`~utils.widgets.grid.render_grids` after the chapter's last cell.

    >>> import ipywidgets as w
    >>> import matplotlib.pyplot as plt
    >>> slider = w.IntSlider(value=1, description="n")
    >>> def draw(n):
    ...     fig, ax = plt.subplots()
    ...     ax.plot(range(n))
    ...     return fig
    >>> box = wire_explorer([slider], {"n": slider}, lambda: slider.value * 10, draw)
    >>> box.controls["n"].value = 3
    >>> box.state, box.widget.children[-1] is box.output, box in live_explorers()
    (30, True, True)
    """
    import ipywidgets as w

    output = w.Output()
    controls = dict(controls)
    if kernel_note is None and any(isinstance(c, (w.Text, w.Textarea, w.Combobox)) for c in controls.values()):
        kernel_note = _kernel_note()
    explorer = Explorer(widget=w.VBox([*rows, output]), controls=controls, rows=list(rows), output=output,
                        compute=compute, draw=draw, declared_grid=dict(grid or {}), kernel_note=kernel_note,
                        pure_draw=pure_draw, savefig_kwargs=savefig_kwargs)
    for control in controls.values():
        control.observe(explorer.redraw, names="value")
    explorer.redraw()
    _LIVE.append(weakref.ref(explorer))
    return explorer


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
