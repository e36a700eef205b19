"""Each explorer's state and pure functions: no ipywidgets, no matplotlib.

The explorers layer, one module per chapter (``utils/explorers/<slug>.py``): the dataclass an explorer
draws and the pure function that computes it from the controls' values, tested by pytest without a
widget or a figure. Layers go one way down, core -> explorers -> plotting -> widgets -> exercises ->
tools: a module here imports core modules and :mod:`utils.i18n` only, never ipywidgets, matplotlib,
:mod:`utils.plotting` or :mod:`utils.widgets`, by any kind of import (``tests/test_explorers_pure.py``).

A figure of ``utils/plotting/<slug>.py`` draws a state; ``utils/widgets/<slug>.py`` wires controls to
the state function and the figure (:func:`utils.widgets.common.wire_explorer`); the HTML builder
renders every explorer's grid of states (:func:`utils.widgets.grid.render_grids`). Import from the
module that defines a name; this package re-exports nothing.
"""
