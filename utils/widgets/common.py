"""Helpers shared by every explorer."""

from __future__ import annotations

import io

import matplotlib.pyplot as plt

__all__ = ["show_figure"]


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
