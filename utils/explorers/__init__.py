"""Each explorer's state and pure functions: no ipywidgets, no matplotlib."""
