"""ipywidgets explorers and quizzes. One module per chapter, plus ``quiz`` for the quiz widget.

Explorers draw with :mod:`utils.plotting` into an ``Output`` widget; they need no network or CDN.
"""

from utils.widgets.at_scale import *  # noqa: F403
from utils.widgets.common import *  # noqa: F403
from utils.widgets.multihead import *  # noqa: F403
from utils.widgets.positional import *  # noqa: F403
from utils.widgets.qkv import *  # noqa: F403
from utils.widgets.quiz import *  # noqa: F403
from utils.widgets.sdpa import *  # noqa: F403
from utils.widgets.transformer import *  # noqa: F403
