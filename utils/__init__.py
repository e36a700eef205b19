"""Attention, Step by Step: the package behind every chapter.

Modules mirror the course:

==========================  ======================================================  ========
module                      what lives there                                        chapters
==========================  ======================================================  ========
``utils.attention``         scaled dot-product attention, masks, multi-head         1, 2, 3
``utils.tiled_attention``   online softmax, tiled (memory-light) attention          6
``utils.tiled_backward``    FlashAttention-2's recomputing backward pass            6
``utils.scaling``           why the scores are divided by sqrt(D): measurements     2
``utils.heads``             hand-built heads; how alike heads' attention maps are   3, 5
``utils.positional``        sinusoidal, learned and rotary position encodings       4
``utils.layers``            feed-forward, encoder layer, tiny token classifier      5
``utils.at_scale``          naive attention, window masks, KV-cache decoder         6
``utils.tasks``             synthetic datasets made in code (no downloads)          5, 6
``utils.training``          the training loop and measurements on a trained model   5
``utils.device``            ``get_device`` and seeding                              all
``utils.notebook_setup``    ``setup()``: what every notebook's setup cell calls    all
``utils.plotting``          every figure a chapter shows                            all
``utils.widgets``           explorers and quizzes                                   all
``utils.exercises``         one definition per exercise; the check-cell API         all
``utils.build``             solutions/ -> chapters/                                 -
``utils.grading``           the instructor grader (``python -m utils.grade``)       -
``utils.benchmark``         ratios against the PyTorch built-ins, one module each   3, 6
==========================  ======================================================  ========
"""

from utils.device import get_device, seed_everything
from utils.notebook_setup import COURSE, setup

__all__ = ["COURSE", "get_device", "seed_everything", "setup"]
__version__ = "0.1.0"
