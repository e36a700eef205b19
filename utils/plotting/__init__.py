"""Every figure a chapter shows. One module per chapter, plus ``common`` for shared helpers.

Each function returns a ``matplotlib.figure.Figure`` (never calls ``plt.show()``), so tests can
inspect it without a browser. Colour maps are colour-blind safe (viridis / cividis). Figures only
draw: what they show is computed by the chapter's core module. Import from the module that defines
a name, e.g. ``from utils.plotting.sdpa import variance_figure``; this package re-exports nothing.
"""

from utils.plotting.fonts import register_cjk_font as _register_cjk_font

# Chinese figure text needs a CJK font: the package carries one and adds it as DejaVu Sans's fallback.
_register_cjk_font()
