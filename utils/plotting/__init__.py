"""Every figure a chapter shows. One module per chapter, plus ``common`` for shared helpers.

Each function returns a ``matplotlib.figure.Figure`` (never calls ``plt.show()``), so tests can
inspect it without a browser. Colour maps are colour-blind safe (viridis / cividis).
"""

from utils.plotting.at_scale import *  # noqa: F403
from utils.plotting.common import *  # noqa: F403
from utils.plotting.multihead import *  # noqa: F403
from utils.plotting.positional import *  # noqa: F403
from utils.plotting.qkv import *  # noqa: F403
from utils.plotting.sdpa import *  # noqa: F403
from utils.plotting.transformer import *  # noqa: F403
