"""ipywidgets explorers and quizzes. One module per chapter, plus ``quiz`` for the quiz widget and
``common`` for the wiring every explorer shares.

Explorers draw with :mod:`utils.plotting` into an ``Output`` widget; they need no network or CDN.
Import from the module that defines a name, e.g. ``from utils.widgets.sdpa import scale_explorer``;
this package re-exports nothing.
"""
